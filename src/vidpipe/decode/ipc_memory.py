"""GPU buffers shared with decoder processes through CUDA IPC, seen from both sides, without
PyTorch in the children.

The parent's ring (:class:`~vidpipe.decode.procring.Ring`) takes each CUDA slot from
:class:`ExportedBuffers`: an allocation of its own from the CUDA driver
(:mod:`vidpipe.decode.cuda_driver`), whose IPC handle a child can open, viewed here as a PyTorch
tensor (``torch.as_tensor`` of its ``__cuda_array_interface__``: no copy, and the allocation lives
as long as any view of it). PyTorch's own CUDA IPC (``torch.multiprocessing``) would need
PyTorch in the child to open the handle; PyTorch's import costs a child 4-5 s and slows the
parent's own start (``docs/bench/h200/torch-free-children``). An allocation whose views are all
gone goes back to its ring's spares, for the ring's next slot: a batch the caller keeps does
not cost an allocation and a free (which waits for the GPU) per batch. The process counts these
allocations per GPU (:func:`exported_bytes`: device memory is the process's, as PyTorch's
allocator counts its own), and a new one past the allocator's cap (``max_gpu_memory``) is an
out-of-memory error, as it was when the ring was PyTorch's memory.

A child maps a slot with :class:`Mappings` (a handle is opened once per process and closed when
its last :class:`MappedSlot` is gone) and writes frames into its rows (:class:`DeviceRow`:
``data_ptr``, ``numel``, ``element_size``, as the driver copy of
:mod:`vidpipe.decode.nvdec_copy` reads them). Code that does need PyTorch (a segment decoded again
by PyAV, live streams) views a slot or row with :func:`as_torch`.

Element types are given as ``__cuda_array_interface__`` type strings (``"|u1"``, ``"<u2"``, ...).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from vidpipe.decode import cuda_driver

if TYPE_CHECKING:
    import torch

__all__ = ["ExportedBuffers", "Mappings", "MappedSlot", "DeviceRow", "as_torch", "typestr", "exported_bytes"]

logger = logging.getLogger(__name__)


def typestr(dtype: "torch.dtype") -> str:
    """The ``__cuda_array_interface__`` type string of a PyTorch dtype (``torch.uint8``: ``"|u1"``)."""
    import numpy as np

    return np.dtype(str(dtype).removeprefix("torch.")).str


def _itemsize(type_str: str) -> int:
    return int(type_str[2:])


def _interface(ptr: int, shape: tuple[int, ...], type_str: str) -> dict[str, Any]:
    return {"shape": tuple(shape), "typestr": type_str, "data": (int(ptr), False), "version": 3, "strides": None,
            "stream": None}  # fmt: skip


class _Buffer:
    __slots__ = ("ptr", "handle")

    def __init__(self, ptr: int, handle: bytes) -> None:
        self.ptr = ptr
        self.handle = handle


class _Export:
    """What ``torch.as_tensor`` reads a slot's view from; PyTorch keeps it as long as the view's
    storage lives, and its end gives the allocation back (:meth:`ExportedBuffers._back`)."""

    def __init__(self, owner: "ExportedBuffers", buf: _Buffer, shape: tuple[int, ...], type_str: str) -> None:
        self.owner = owner
        self.buf = buf
        self.__cuda_array_interface__ = _interface(buf.ptr, shape, type_str)

    def __del__(self) -> None:
        try:
            self.owner._back(self.buf)
        except Exception:  # noqa: BLE001 - interpreter shutdown: the process's end frees it
            pass


# re-entrant locks: an allocation's or a mapping's end (``__del__``) may come from the garbage
# collector inside a locked block of the same thread
_exported_lock = threading.RLock()
_exported_bytes: dict[int, int] = {}  # GPU ordinal -> bytes of live ring allocations in this process


def exported_bytes(gpu: int) -> int:
    """Bytes of ring allocations (:class:`ExportedBuffers`) alive on GPU ``gpu`` in this process:
    GPU memory PyTorch's allocator does not see."""
    with _exported_lock:
        return _exported_bytes.get(gpu, 0)


def _count(gpu: int, n: int) -> None:
    with _exported_lock:
        _exported_bytes[gpu] = _exported_bytes.get(gpu, 0) + n


def _check_cap(gpu: int, nbytes: int) -> None:
    """Raise PyTorch's out-of-memory error when ``nbytes`` more would take this process past the
    cap on PyTorch's allocator (``torch.cuda.set_per_process_memory_fraction``: ``max_gpu_memory``,
    :mod:`vidpipe.gpu_memory`), counting what the allocator has reserved and the rings' own
    allocations: the ring is part of the decode's share of that budget, and the decoders back off
    on that error (smaller batches, fewer slots) as they did when the ring was PyTorch's memory."""
    import torch

    getter = getattr(torch.cuda, "get_per_process_memory_fraction", None)
    fraction = float(getter(gpu)) if getter is not None else 1.0
    if fraction >= 1.0:
        return
    limit = int(fraction * torch.cuda.get_device_properties(gpu).total_memory)
    held = torch.cuda.memory_reserved(gpu) + exported_bytes(gpu)
    if held + nbytes > limit:
        raise torch.cuda.OutOfMemoryError(
            f"CUDA out of memory: a decode ring buffer of {nbytes >> 20} MiB would take this process to "
            f"{(held + nbytes) >> 20} MiB, over its cap of {limit >> 20} MiB (max_gpu_memory)"
        )


class ExportedBuffers:
    """The parent's side: device allocations of ``nbytes`` each on GPU ``gpu``, for one ring's
    slots, each with its CUDA IPC handle; the ring's spares until :meth:`close`. A new allocation
    past the process's cap on PyTorch's allocator raises PyTorch's out-of-memory error
    (:func:`_check_cap`)."""

    def __init__(self, gpu: int, nbytes: int) -> None:
        self.gpu = gpu
        self.nbytes = int(nbytes)
        self._spares: list[_Buffer] = []
        self._lock = threading.RLock()  # (see _exported_lock)
        self._closed = False

    def new(self, shape: tuple[int, ...], dtype: "torch.dtype") -> "tuple[torch.Tensor, bytes]":
        """A ``shape`` ``dtype`` tensor over a spare allocation or a new one, with its IPC handle."""
        import torch

        with self._lock:
            buf = self._spares.pop() if self._spares else None
        if buf is None:
            _check_cap(self.gpu, self.nbytes)
            ptr = cuda_driver.alloc(self.gpu, self.nbytes)
            try:
                buf = _Buffer(ptr, cuda_driver.ipc_handle(self.gpu, ptr))
            except BaseException:
                cuda_driver.free(self.gpu, ptr)
                raise
            _count(self.gpu, self.nbytes)
        export = _Export(self, buf, shape, typestr(dtype))
        return torch.as_tensor(export, device=torch.device("cuda", self.gpu)), buf.handle

    def _back(self, buf: _Buffer) -> None:
        with self._lock:
            if not self._closed:
                self._spares.append(buf)
                return
        self._free(buf)

    def _free(self, buf: _Buffer) -> None:
        # (no turn with CUDA graph captures, vidpipe._capture_turns: this runs from __del__, where
        # waiting on that lock could deadlock; a kept batch of a closed ring that dies during another
        # run's capture may make that model run eagerly, which its capture logs)
        cuda_driver.free(self.gpu, buf.ptr)
        _count(self.gpu, -self.nbytes)

    def close(self) -> None:
        """Free the spares now, and each allocation still viewed once its views are gone."""
        with self._lock:
            self._closed = True
            spares, self._spares = self._spares, []
        for buf in spares:
            self._free(buf)


class Mappings:
    """A child's mappings of the parent's allocations: each handle opened once (the driver maps a
    handle only once per process), counted, and closed when its last slot is gone.

    The parent frees a ring's allocations once it drops the ring (:meth:`drop` marks them), and a
    new allocation may then get the address of one this process still maps (a slot still
    referenced here: the driver refuses to map the new one, ``CUDA_ERROR_ALREADY_MAPPED``). An
    open that fails so unmaps every dropped ring's allocations, after this process's GPU work is
    done, and tries again."""

    def __init__(self) -> None:
        self._lock = threading.RLock()  # (see _exported_lock)
        self._open: dict[bytes, list[Any]] = {}  # handle -> [address, slots using it, GPU, ring]
        self._dropped: set[int] = set()  # rings the parent let go

    def open(self, gpu: int, handle: bytes, ring: int) -> int:
        with self._lock:
            entry = self._open.get(handle)
            if entry is None:
                try:
                    ptr = cuda_driver.ipc_open(gpu, handle)
                except cuda_driver.CudaDriverError as exc:
                    if exc.code != cuda_driver.ALREADY_MAPPED or not self._unmap_dropped():
                        raise
                    ptr = cuda_driver.ipc_open(gpu, handle)
                entry = self._open[handle] = [ptr, 0, gpu, ring]
            entry[1] += 1
            return entry[0]

    def close(self, handle: bytes) -> None:
        with self._lock:
            entry = self._open.get(handle)
            if entry is None:  # (unmapped with its dropped ring)
                return
            entry[1] -= 1
            if entry[1] > 0:
                return
            del self._open[handle]
        cuda_driver.ipc_close(entry[2], entry[0])

    def drop(self, ring: int) -> None:
        """The parent let ``ring`` go: its allocations are freed there (each is unmapped here when
        its last slot is gone, or at the next open that needs its address)."""
        with self._lock:
            self._dropped.add(ring)

    def _unmap_dropped(self) -> bool:
        """Unmap the allocations of dropped rings, whatever still refers to them (called with the
        lock held); whether there were any."""
        gone = [(h, e) for h, e in self._open.items() if e[3] in self._dropped]
        for h, _ in gone:
            del self._open[h]
        self._dropped.clear()
        for gpu in sorted({e[2] for _, e in gone}):
            cuda_driver.synchronize(gpu)  # no copy into them in flight
        for _, (ptr, _, gpu, _) in gone:
            cuda_driver.ipc_close(gpu, ptr)
        return bool(gone)


class DeviceRow:
    """``shape`` elements of type ``type_str`` at ``ptr`` on GPU ``gpu``, contiguous: one frame's
    row of a mapped slot (it keeps the slot, and so the mapping, alive)."""

    __slots__ = ("ptr", "shape", "type_str", "gpu", "_keep")

    def __init__(self, ptr: int, shape: tuple[int, ...], type_str: str, gpu: int, keep: Any) -> None:
        self.ptr = ptr
        self.shape = tuple(shape)
        self.type_str = type_str
        self.gpu = gpu
        self._keep = keep

    def data_ptr(self) -> int:
        return self.ptr

    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def element_size(self) -> int:
        return _itemsize(self.type_str)

    def is_contiguous(self) -> bool:
        return True

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return _interface(self.ptr, self.shape, self.type_str)


class MappedSlot(DeviceRow):
    """A child's view of one slot ``(B, *row)`` of ring ``ring``: the parent's allocation
    ``handle``, mapped through ``mappings`` at its first use (:meth:`map`; unmapped when this
    object is gone, or when the ring is dropped); ``slot[i]`` is row ``i``.

    Mapped when first used, not when the ring comes: a child maps about 7 ms per GiB (an H200;
    4 children mapping a 4.4 GiB ring at once took 0.09-0.10 s each), which at the ring's arrival
    came before the job's first frame, in a fresh command's run clock. A decoding thread now maps
    the slot it writes into, so the job starts at once and the rest is mapped as the decode
    reaches it (``tools/bench-probes/ipc_map_cost.py``)."""

    __slots__ = ("handle", "_mappings", "_row_bytes", "_ring", "_mapped", "_lock")

    def __init__(self, mappings: Mappings, gpu: int, handle: bytes, shape: tuple[int, ...], type_str: str, *,
                 ring: int) -> None:  # fmt: skip
        super().__init__(0, shape, type_str, gpu, None)
        self.handle = handle
        self._mappings = mappings
        self._ring = ring
        self._mapped = False
        self._lock = threading.Lock()
        self._row_bytes = self.numel() // self.shape[0] * self.element_size()

    def map(self) -> int:
        """The slot's address in this process, mapping the allocation at the first call (once,
        whichever thread comes first)."""
        if not self._mapped:
            with self._lock:
                if not self._mapped:
                    self.ptr = self._mappings.open(self.gpu, self.handle, self._ring)
                    self._mapped = True
        return self.ptr

    def data_ptr(self) -> int:
        return self.map()

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return _interface(self.map(), self.shape, self.type_str)

    def __getitem__(self, row: int) -> DeviceRow:
        if not 0 <= row < self.shape[0]:
            raise IndexError(f"row {row} of a slot of {self.shape[0]}")
        return DeviceRow(self.map() + row * self._row_bytes, self.shape[1:], self.type_str, self.gpu, self)

    def __del__(self) -> None:
        if not getattr(self, "_mapped", False):  # (never used: nothing to unmap)
            return
        try:
            self._mappings.close(self.handle)
        except Exception:  # noqa: BLE001 - interpreter shutdown: the process's end unmaps it
            pass


def as_torch(x: Any) -> "torch.Tensor":
    """``x`` as a PyTorch tensor: itself if it is one, a CPU tensor sharing a NumPy array's
    memory (a decoder process's row of a CPU ring), else a view of a :class:`DeviceRow` or
    :class:`MappedSlot` (the view keeps it, and so its mapping, alive)."""
    import numpy as np
    import torch

    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, np.ndarray):
        return torch.from_numpy(x)
    return torch.as_tensor(x, device=torch.device("cuda", x.gpu))
