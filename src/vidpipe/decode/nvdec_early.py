"""NVDEC sessions started before PyTorch is imported: a command's and a decoder process's first
seconds.

A decoder process (:mod:`vidpipe.decode.procworker`) started for a long file used to import
PyTorch (2-5 s, while the command and the other processes import it too), start CUDA, and only
then start its share of the file's NVDEC sessions (about 50 ms each, one at a time in the
driver) before saying hello; ``vidpipe detect`` on a shorter file, decoded in the command's own
process, started them during its decode's first second (:mod:`vidpipe.decode.prestart`). The
sessions need a CUDA context and a stream, not PyTorch. This module takes the GPU's primary
context (the one PyTorch's runtime binds later, so the sessions and PyTorch share it) and one
non-blocking stream per session from the CUDA driver through ``ctypes`` (calls that release the
GIL), and starts the sessions on them, in a thread beside the import (in the decoder process or
in the command). Each session goes to the process's session pool
(:mod:`vidpipe.decode.nvdec_pool`) as soon as it is ready; the decoder that takes it, once
PyTorch is imported, wraps its stream in a ``torch.cuda.ExternalStream``
(:meth:`~vidpipe.decode.nvdec.NvdecSession.adopt_stream`).

The streams live as long as the process: a stream is never destroyed under a decoder that may
still use it (a CUDA error inside PyNvVideoCodec ends the process), and there are only as many as
the sessions started here.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from typing import TYPE_CHECKING, Any

from vidpipe._capture_turns import driver_work

if TYPE_CHECKING:
    from vidpipe.decode.base import StreamInfo

__all__ = ["pool_sessions", "primary_context", "new_stream", "CudaDriverError"]

logger = logging.getLogger(__name__)

#: ``CU_STREAM_NON_BLOCKING``: no implicit synchronization with the legacy default stream, as
#: PyTorch's own streams (``torch.cuda.Stream``) are made
_NON_BLOCKING = 1
_lock = threading.Lock()
_lib: Any = None


class CudaDriverError(RuntimeError):
    """A CUDA driver call failed (its name and ``CUresult`` code in the message)."""


def _driver() -> Any:
    """``libcuda.so.1`` with the few calls used here typed (``CDLL``: each call releases the GIL)."""
    global _lib
    with _lock:
        if _lib is None:
            lib = ctypes.CDLL("libcuda.so.1")
            p, i = ctypes.c_void_p, ctypes.c_int
            for name, args in {
                "cuInit": [ctypes.c_uint],
                "cuDeviceGet": [ctypes.POINTER(i), i],
                "cuDevicePrimaryCtxRetain": [ctypes.POINTER(p), i],
                "cuCtxSetCurrent": [p],
                "cuStreamCreate": [ctypes.POINTER(p), ctypes.c_uint],
            }.items():
                fn = getattr(lib, name)
                fn.argtypes, fn.restype = args, i
            _lib = lib
        return _lib


def _call(name: str, *args: Any) -> None:
    code = getattr(_driver(), name)(*args)
    if code != 0:
        raise CudaDriverError(f"{name} failed with CUresult {code}")


def primary_context(gpu: int) -> int:
    """Retain GPU ``gpu``'s primary context (the one PyTorch uses), make it current in the calling
    thread and return its handle. Never released: it lives as long as the process, as PyTorch's
    does. Raises :class:`CudaDriverError` (or ``OSError`` without the driver's library)."""
    _call("cuInit", 0)
    dev = ctypes.c_int(-1)
    _call("cuDeviceGet", ctypes.byref(dev), gpu)
    ctx = ctypes.c_void_p()
    _call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)
    _call("cuCtxSetCurrent", ctx)
    return int(ctx.value or 0)


def new_stream() -> int:
    """A new non-blocking stream of the context current in the calling thread (its
    ``cudaStream_t`` as an int), for the life of the process."""
    stream = ctypes.c_void_p()
    _call("cuStreamCreate", ctypes.byref(stream), _NON_BLOCKING)
    return int(stream.value or 0)


def pool_sessions(info: "StreamInfo", gpu: int, count: int, *, stop: "threading.Event | None" = None) -> int:
    """Start ``count`` NVDEC sessions for ``info``'s kind of stream on GPU ``gpu`` without
    PyTorch, each on a stream of its own (:func:`new_stream`, in GPU ``gpu``'s primary context),
    fed the file's first keyframe and drained as :func:`~vidpipe.decode.nvdec.warm_sessions`
    does, and put each in the process's pool as soon as it is ready: the decoder that takes one
    gives it its PyTorch stream (:meth:`~vidpipe.decode.nvdec.NvdecSession.adopt_stream`). Starts
    no more once ``stop`` is set (the one being started is finished and pooled). Returns how many
    were pooled. Raises where the driver, PyNvVideoCodec or the file fail (those pooled before
    the failure stay pooled: the decode starts the rest)."""
    from vidpipe.decode.nvdec import NvdecSession, primed_sessions

    with driver_work():  # each driver step of this thread: not during a CUDA graph's capture
        primary_context(gpu)
    pooled = 0
    sessions = primed_sessions(info, count, lambda: NvdecSession(info, gpu, stream=new_stream()))
    try:
        while True:
            with driver_work():
                sess = next(sessions, None)  # one session's start (~50 ms)
            if sess is None:
                break
            sess.close()  # drained and healthy: into the pool
            pooled += 1
            if stop is not None and stop.is_set():
                break
    finally:
        sessions.close()
    return pooled
