"""The few CUDA driver calls vidpipe makes without PyTorch, through ``ctypes``.

A decoder process (:mod:`vidpipe.decode.procworker`) decodes a file's segments with NVDEC and
copies each frame into the parent's shared ring without importing PyTorch: PyTorch's import takes
4-5 s in each of five interpreters importing it at once, and slows the command's own import by
about 0.7 s (``docs/bench/h200/torch-free-children``). What it needs from CUDA instead is here:

- GPU ``gpu``'s primary context (the one PyTorch's runtime binds, so everything is shared with
  it), retained once per process and made current in a thread with :func:`use_primary_context`;
- streams (:func:`new_stream`, :class:`DriverStream`: a non-blocking stream and its
  synchronization);
- device memory and its CUDA IPC handles (:func:`alloc`, :func:`free`, :func:`ipc_handle`,
  :func:`ipc_open`, :func:`ipc_close`: the ring's buffers, :mod:`vidpipe.decode.ipc_memory`).

Each call goes through ``ctypes.CDLL`` (it releases the GIL) and raises :class:`CudaDriverError`
with the call's name, ``CUresult`` and the driver's words for it when it fails (``"out of
memory"``, as out-of-memory errors are recognized: :func:`~vidpipe.decode.gpu_buffers.is_cuda_oom`;
``OSError`` without the driver's library).
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
from collections.abc import Iterator
from typing import Any

__all__ = [
    "CudaDriverError", "use_primary_context", "pushed", "new_stream", "DriverStream", "synchronize",
    "alloc", "free", "ipc_handle", "ipc_open", "ipc_close", "IPC_HANDLE_BYTES", "ALREADY_MAPPED",
]  # fmt: skip

#: ``CU_STREAM_NON_BLOCKING``: no implicit synchronization with the legacy default stream, as
#: PyTorch's own streams (``torch.cuda.Stream``) are made
_NON_BLOCKING = 1
#: ``CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS``, the only flag ``cuIpcOpenMemHandle`` takes
_LAZY_PEER_ACCESS = 1
#: size of a ``CUipcMemHandle``
IPC_HANDLE_BYTES = 64
_lock = threading.Lock()
_lib: Any = None
_contexts: dict[int, int] = {}  # GPU ordinal -> its retained primary context (never released)


#: ``CUDA_ERROR_ALREADY_MAPPED``: ``cuIpcOpenMemHandle`` of an allocation whose address this
#: process still maps (an older allocation there, freed by its owner, not unmapped here yet)
ALREADY_MAPPED = 208


class CudaDriverError(RuntimeError):
    """A CUDA driver call failed (its name and ``CUresult`` code in the message; ``code``)."""

    def __init__(self, message: str, code: int = 0) -> None:
        super().__init__(message)
        self.code = code


class _IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_ubyte * IPC_HANDLE_BYTES)]


def _driver() -> Any:
    """``libcuda.so.1`` with the calls used here typed."""
    global _lib
    with _lock:
        if _lib is None:
            lib = ctypes.CDLL("libcuda.so.1")
            p, i, u64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64
            for name, args in {
                "cuInit": [ctypes.c_uint],
                "cuDeviceGet": [ctypes.POINTER(i), i],
                "cuDevicePrimaryCtxRetain": [ctypes.POINTER(p), i],
                "cuCtxSetCurrent": [p],
                "cuCtxPushCurrent_v2": [p],
                "cuCtxPopCurrent_v2": [ctypes.POINTER(p)],
                "cuStreamCreate": [ctypes.POINTER(p), ctypes.c_uint],
                "cuStreamSynchronize": [p],
                "cuCtxSynchronize": [],
                "cuMemAlloc_v2": [ctypes.POINTER(u64), ctypes.c_size_t],
                "cuMemFree_v2": [u64],
                "cuIpcGetMemHandle": [ctypes.POINTER(_IpcHandle), u64],
                "cuIpcOpenMemHandle_v2": [ctypes.POINTER(u64), _IpcHandle, ctypes.c_uint],
                "cuIpcCloseMemHandle": [u64],
                "cuGetErrorString": [i, ctypes.POINTER(ctypes.c_char_p)],
            }.items():
                fn = getattr(lib, name)
                fn.argtypes, fn.restype = args, i
            _lib = lib
        return _lib


def _call(name: str, *args: Any) -> None:
    lib = _driver()
    code = getattr(lib, name)(*args)
    if code != 0:
        text = ctypes.c_char_p()
        said = lib.cuGetErrorString(code, ctypes.byref(text)) == 0 and text.value
        why = f": {text.value.decode(errors='replace')}" if said and text.value else ""
        raise CudaDriverError(f"{name} failed with CUresult {code}{why}", code)


def _retained(gpu: int) -> int:
    """GPU ``gpu``'s primary context, retained once for the life of the process, as PyTorch's is."""
    with _lock:
        ctx = _contexts.get(gpu)
    if ctx is not None:
        return ctx
    _call("cuInit", 0)
    dev = ctypes.c_int(-1)
    _call("cuDeviceGet", ctypes.byref(dev), gpu)
    handle = ctypes.c_void_p()
    _call("cuDevicePrimaryCtxRetain", ctypes.byref(handle), dev)
    with _lock:
        return _contexts.setdefault(gpu, int(handle.value or 0))


def use_primary_context(gpu: int) -> int:
    """Make GPU ``gpu``'s primary context current in the calling thread; returns its handle."""
    ctx = _retained(gpu)
    _call("cuCtxSetCurrent", ctypes.c_void_p(ctx))
    return ctx


@contextlib.contextmanager
def pushed(gpu: int) -> Iterator[None]:
    """GPU ``gpu``'s primary context current for the block, whatever the thread had before."""
    _call("cuCtxPushCurrent_v2", ctypes.c_void_p(_retained(gpu)))
    try:
        yield
    finally:
        _call("cuCtxPopCurrent_v2", ctypes.byref(ctypes.c_void_p()))


def new_stream() -> int:
    """A new non-blocking stream of the context current in the calling thread (its
    ``cudaStream_t`` as an int), for the life of the process."""
    stream = ctypes.c_void_p()
    _call("cuStreamCreate", ctypes.byref(stream), _NON_BLOCKING)
    return int(stream.value or 0)


class DriverStream:
    """A CUDA stream known by its handle, without PyTorch: what a decoder process's NVDEC session
    runs on. ``cuda_stream`` as PyTorch's streams have it; :meth:`synchronize` waits for its work
    (the GIL released)."""

    __slots__ = ("cuda_stream",)

    def __init__(self, handle: int) -> None:
        self.cuda_stream = int(handle)

    def synchronize(self) -> None:
        _call("cuStreamSynchronize", ctypes.c_void_p(self.cuda_stream))

    def __repr__(self) -> str:
        return f"DriverStream(0x{self.cuda_stream:x})"


def synchronize(gpu: int) -> None:
    """Wait for all work of this process on GPU ``gpu``'s primary context."""
    with pushed(gpu):
        _call("cuCtxSynchronize")


def alloc(gpu: int, nbytes: int) -> int:
    """``nbytes`` of device memory on GPU ``gpu`` (its own allocation: it can have an IPC handle);
    the address."""
    ptr = ctypes.c_uint64()
    with pushed(gpu):
        _call("cuMemAlloc_v2", ctypes.byref(ptr), ctypes.c_size_t(max(1, nbytes)))
    return int(ptr.value)


def free(gpu: int, ptr: int) -> None:
    """Free an :func:`alloc` allocation of GPU ``gpu``."""
    with pushed(gpu):
        _call("cuMemFree_v2", ctypes.c_uint64(ptr))


def ipc_handle(gpu: int, ptr: int) -> bytes:
    """The CUDA IPC handle of the allocation at ``ptr`` (another process opens it: :func:`ipc_open`)."""
    handle = _IpcHandle()
    with pushed(gpu):
        _call("cuIpcGetMemHandle", ctypes.byref(handle), ctypes.c_uint64(ptr))
    return bytes(handle.reserved)


def ipc_open(gpu: int, handle: bytes) -> int:
    """Map another process's allocation (its :func:`ipc_handle`) here; the address. The same
    handle may be mapped only once per process (:class:`~vidpipe.decode.ipc_memory.Mappings`)."""
    if len(handle) != IPC_HANDLE_BYTES:
        raise ValueError(f"a CUDA IPC handle has {IPC_HANDLE_BYTES} bytes, not {len(handle)}")
    raw = _IpcHandle()
    ctypes.memmove(ctypes.addressof(raw), handle, IPC_HANDLE_BYTES)
    ptr = ctypes.c_uint64()
    with pushed(gpu):
        _call("cuIpcOpenMemHandle_v2", ctypes.byref(ptr), raw, ctypes.c_uint(_LAZY_PEER_ACCESS))
    return int(ptr.value)


def ipc_close(gpu: int, ptr: int) -> None:
    """Unmap an allocation :func:`ipc_open` mapped."""
    with pushed(gpu):
        _call("cuIpcCloseMemHandle", ctypes.c_uint64(ptr))
