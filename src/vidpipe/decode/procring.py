"""The shared batch buffers of a decoder-process run: a ring of ``slots`` batches every child writes
into and the parent reads from, without copies.

On CUDA each slot is an allocation of its own from the CUDA driver, viewed here as a PyTorch
tensor and opened by the children from its CUDA IPC handle without PyTorch
(:mod:`vidpipe.decode.ipc_memory`). On the CPU the slots lie in one anonymous shared-memory file
(``memfd_create``; elsewhere a temporary file unlinked at once) whose descriptor travels to the
children over their socket (``SCM_RIGHTS``): the file has no name, so nothing can collide with it
and nothing is left behind, whatever way the processes end. Each slot is a tensor with a storage
of its own, so its use count tells whether the caller kept a batch (:meth:`Ring.renew_if_kept`).
"""

from __future__ import annotations

import logging
import os
import socket
import tempfile
from typing import TYPE_CHECKING, Any

from vidpipe.ops.pool import _use_count

if TYPE_CHECKING:
    import numpy as np
    import torch

    from vidpipe.decode.ipc_memory import ExportedBuffers, Mappings
    from vidpipe.decode.proclease import Lease

__all__ = ["Ring", "share_slot", "open_slots", "anonymous_shm", "send_fds", "recv_fds"]

logger = logging.getLogger(__name__)


def share_slot(tensor: "torch.Tensor", offset: int = 0, handle: bytes | None = None) -> tuple:
    """What a child needs to map ``tensor``: for a CUDA slot, the CUDA IPC ``handle`` of its
    allocation (:class:`~vidpipe.decode.ipc_memory.ExportedBuffers`), its GPU, shape and element
    type; for a CPU tensor at byte ``offset`` of a shared-memory file, where it lies (the file's
    descriptor is sent with the message: :meth:`~vidpipe.decode.procpool.DecoderProcessPool.send`)."""
    if tensor.device.type == "cuda":
        from vidpipe.decode.ipc_memory import typestr

        return ("ipc", tensor.device.index, handle, tuple(tensor.shape), typestr(tensor.dtype))
    return ("fd", offset, tuple(tensor.shape), str(tensor.dtype).removeprefix("torch."))


def open_slots(handles: list[Any], fd: int | None, mappings: "Mappings | None" = None, ring: int = 0) -> list[Any]:
    """The child's views of shared batch buffers (see :func:`share_slot`): CUDA ones as
    :class:`~vidpipe.decode.ipc_memory.MappedSlot` objects of ring ``ring`` mapped through
    ``mappings`` (no PyTorch), CPU ones as NumPy arrays over the file open as ``fd`` (received
    with the message; the caller closes it; no PyTorch either)."""
    mapping = _map(fd) if fd is not None else None
    out: list[Any] = []
    for h in handles:
        if h[0] == "ipc":
            from vidpipe.decode.ipc_memory import MappedSlot

            if mappings is None:
                raise ValueError("CUDA ring slots are mapped through a Mappings object")
            _, gpu, handle, shape, type_str = h
            out.append(MappedSlot(mappings, gpu, handle, shape, type_str, ring=ring))
        else:
            _, offset, shape, dtype = h
            out.append(_array(mapping, offset, shape, dtype))
    return out


def _map(fd: int) -> Any:
    """A shared mapping of the whole file open as ``fd`` (``fd`` may be closed after)."""
    import mmap

    return mmap.mmap(fd, os.fstat(fd).st_size)


def _array(mapping: Any, offset: int, shape: tuple[int, ...], dtype: str) -> "np.ndarray":
    """A NumPy array over bytes ``offset...`` of ``mapping`` (the mapping lives as long as the
    array and its views)."""
    import numpy as np

    n = int(np.prod(shape))
    return np.frombuffer(mapping, dtype=getattr(np, dtype), count=n, offset=offset).reshape(shape)


def _view(mapping: Any, offset: int, shape: tuple[int, ...], dtype: str) -> "torch.Tensor":
    """A CPU tensor over bytes ``offset...`` of ``mapping`` (the parent's slot); each view has its
    own storage, so its use count tells whether it was kept (:meth:`Ring.renew_if_kept`)."""
    import torch

    return torch.from_numpy(_array(mapping, offset, shape, dtype))


def anonymous_shm(nbytes: int) -> int:
    """A descriptor of a new shared-memory file of ``nbytes`` bytes that has no name: nothing to
    remove, whatever way the processes using it end (Linux ``memfd_create``; elsewhere a file in
    ``/dev/shm`` or the temporary folder, unlinked before this returns)."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("vidpipe-ring", getattr(os, "MFD_CLOEXEC", 0))
    else:
        shm_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None
        fd, path = tempfile.mkstemp(prefix="vidpipe-ring-", dir=shm_dir)
        os.unlink(path)
    try:
        os.ftruncate(fd, max(1, nbytes))
    except BaseException:
        os.close(fd)
        raise
    return fd


def send_fds(conn: Any, fds: list[int]) -> None:
    """Send open descriptors over the Unix socket of ``conn`` (``SCM_RIGHTS``), after a message."""
    s = socket.socket(fileno=conn.fileno())
    try:
        socket.send_fds(s, [b"F"], fds)
    finally:
        s.detach()


def recv_fds(conn: Any, n: int) -> list[int]:
    """Receive the ``n`` descriptors :func:`send_fds` sent on ``conn``'s socket."""
    s = socket.socket(fileno=conn.fileno())
    try:
        _, fds, _, _ = socket.recv_fds(s, 1, n)
    finally:
        s.detach()
    if len(fds) != n:
        for fd in fds:
            os.close(fd)
        raise OSError(f"expected {n} shared-memory descriptors from the parent, got {len(fds)}")
    return list(fds)


class Ring:
    """``slots`` batch buffers ``(B, *row)`` shared with the children of ``lease``; batch ``b``
    lives in slot ``b % slots``. On the CPU the slots lie in one anonymous shared-memory file (one descriptor
    per process, whatever the slot count); a slot renewed later gets a file of its own.

    ``lease`` ``None``: a ring of a run that starts in the parent's threads while its decoder
    processes still start (shared with nobody yet, id 0); the pool gives it an id once they
    join (:meth:`~vidpipe.decode.procpool.DecoderProcessPool.adopt_ring`, then :meth:`join`)."""

    def __init__(self, lease: "Lease | None", ident: int, shape: tuple[int, ...], dtype: "torch.dtype",
                 slots: int, device: "torch.device") -> None:  # fmt: skip
        self.lease = lease  # the children it is shared with
        self.id = ident
        self.shape = shape
        self.dtype = dtype
        self.device = device
        self._said_uncountable = False
        self._exported: "ExportedBuffers | None" = None  # CUDA: the slots' allocations
        try:
            self.tensors, offsets, fd, ipc = self._alloc(slots)
        except BaseException:  # (out of memory: the slots made so far are freed)
            if self._exported is not None:
                self._exported.close()
            raise
        # CPU: the shared-memory files stay open while the ring lives, for a child that joins
        # later (join): the first file (every slot at first), and each renewed slot's own
        self._fd: int | None = fd
        self._slot_fds: dict[int, int] = {}
        try:
            self._base = [_use_count(t) for t in self.tensors]  # the ring's own references to each slot
            self._handles = [share_slot(t, o, h) for t, o, h in zip(self.tensors, offsets, ipc)]
            if lease is not None:
                lease.broadcast(("ring", ident, self._handles), () if fd is None else (fd,))
        except BaseException:
            self._close_fds()
            if self._exported is not None:
                self._exported.close()
            raise

    def join(self, lease: "Lease", positions: list[int]) -> None:
        """Map the ring, every slot as it is now, in ``lease``'s children at ``positions`` (they
        joined it after the ring was made: :meth:`~vidpipe.decode.proclease.Lease.grow`); the
        ring's later messages (renewed slots, its end) go to all of ``lease``'s children."""
        self.lease = lease  # (a ring kept across decodes may have been made by an earlier lease)
        for i in positions:
            if self.device.type == "cuda":
                lease.send(i, ("ring", self.id, list(self._handles)))
                continue
            lease.send(i, ("ring", self.id, self._handles), (self._fd,) if self._fd is not None else ())
            for k, fd in self._slot_fds.items():
                lease.send(i, ("slot", self.id, k, share_slot(self.tensors[k])), (fd,))

    def _close_fds(self) -> None:
        for fd in [self._fd, *self._slot_fds.values()]:
            if fd is not None:
                os.close(fd)
        self._fd, self._slot_fds = None, {}

    def _alloc(self, n: int) -> tuple[list["torch.Tensor"], list[int], int | None, list[bytes | None]]:
        """``n`` new slots: CUDA allocations (with their IPC handles), or CPU tensors in one new
        anonymous shared-memory file (with their byte offsets and the file's descriptor, for the
        children; the caller closes it)."""
        size = self.dtype.itemsize
        for s in self.shape:
            size *= s
        if self.device.type == "cuda":
            from vidpipe._capture_turns import driver_work
            from vidpipe.decode.ipc_memory import ExportedBuffers

            if self._exported is None:
                import torch

                gpu = self.device.index if self.device.index is not None else torch.cuda.current_device()
                self._exported = ExportedBuffers(gpu, size)
            with driver_work():  # a driver allocation: not during a CUDA graph's capture
                made = [self._exported.new(self.shape, self.dtype) for _ in range(n)]
            return [t for t, _ in made], [0] * n, None, [h for _, h in made]
        step = -(-max(1, size) // 4096) * 4096  # page-aligned slots
        fd = anonymous_shm(step * n)
        try:
            mapping = _map(fd)
            dtype = str(self.dtype).removeprefix("torch.")
            offsets = [k * step for k in range(n)]
            return [_view(mapping, o, self.shape, dtype) for o in offsets], offsets, fd, [None] * n
        except BaseException:
            os.close(fd)
            raise

    @property
    def slots(self) -> int:
        return len(self.tensors)

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors)

    def renew_if_kept(self, i: int) -> None:
        """Give slot ``i`` a new buffer when something outside the ring still references the old
        one (the caller kept a batch, or a view of it): the kept one leaves the ring, as a pool
        buffer would. Where PyTorch cannot report the storage's use count, every slot is renewed
        (nothing kept is ever overwritten; said once per ring)."""
        n, base = _use_count(self.tensors[i]), self._base[i]
        if n is not None and base is not None and n <= base:
            return
        if (n is None or base is None) and not self._said_uncountable:
            self._said_uncountable = True
            logger.warning("decoder-process ring: this PyTorch does not report storage use counts; each batch "
                           "gets a new buffer")  # fmt: skip
        (t,), (offset,), fd, (handle,) = self._alloc(1)
        self.tensors[i] = t  # the caller's tensor keeps its own mapping of the old buffer
        share = share_slot(t, offset, handle)
        if handle is not None:  # (a CPU ring's joiners map the first file, then its renewed slots' own)
            self._handles[i] = share
        self._base[i] = _use_count(t)
        if fd is not None:
            old = self._slot_fds.pop(i, None)
            if old is not None:
                os.close(old)
            self._slot_fds[i] = fd  # (kept for a child that joins later)
        if self.lease is not None:
            self.lease.broadcast(("slot", self.id, i, share), () if fd is None else (fd,))

    def release(self) -> None:
        """The children let the ring go; its memory is freed once the caller's batches are gone."""
        if self.lease is not None:
            self.lease.broadcast(("drop", self.id))
        self.tensors = []
        self._close_fds()
        if self._exported is not None:
            self._exported.close()
