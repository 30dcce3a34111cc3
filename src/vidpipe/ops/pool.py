"""Reusable batch buffers: no allocation per frame or per batch once a stream runs steadily.

A :class:`BufferPool` hands out tensors of a given shape and dtype on one device and takes them
back with :meth:`BufferPool.release`, together with a CUDA event marking when the last reader of
the buffer is done. The next :meth:`~BufferPool.acquire` of that shape reuses the buffer, after
making the writer wait for that event (on the GPU: ``stream.wait_event``; a CPU writer
synchronizes on it), so a buffer is never overwritten while a kernel still reads it.

A buffer is only reused once nothing outside the pool references its memory any more (the
tensor's storage use count is back to the pool's own reference), so a caller who keeps a
delivered batch (or a view of it) never sees it overwritten: the pool allocates another buffer
instead, and drops the oldest waiting ones beyond ``max_free`` (``stats.retired``). The use count
comes from a private PyTorch function (``torch._C._storage_Use_Count``); where it is missing or
fails, the pool fails closed: it cannot prove a buffer free, so it reuses none (a new buffer per
acquisition, the released ones retired beyond ``max_free``; said once per pool).

GPU memory stays flat: ``stats.allocated_bytes`` grows while the pipeline fills and then stays
put; ``stats.peak_bytes`` is its maximum.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = ["BufferPool", "PoolStats", "Buffer"]

logger = logging.getLogger(__name__)


def _use_count(t: "torch.Tensor") -> int | None:
    """References to ``t``'s storage (``None`` when this PyTorch cannot tell)."""
    import torch

    fn = getattr(torch._C, "_storage_Use_Count", None)
    if fn is None:
        return None
    try:
        return int(fn(t.untyped_storage()._cdata))
    except Exception:  # noqa: BLE001 - private API; fall back to the weakref check
        return None


@dataclass
class PoolStats:
    """Counters of a :class:`BufferPool`."""

    allocations: int = 0  # buffers created
    reuses: int = 0  # acquisitions served by a released buffer
    retired: int = 0  # released buffers dropped from the pool (more than ``max_free`` waiting)
    allocated_bytes: int = 0  # bytes of the buffers the pool owns now
    peak_bytes: int = 0


class Buffer:
    """One pooled tensor. ``tensor`` is the whole buffer; hand out views of it."""

    __slots__ = ("tensor", "key", "_event", "_base_count", "__weakref__")

    def __init__(self, tensor: "torch.Tensor", key: tuple) -> None:
        self.tensor = tensor
        self.key = key
        self._event: Any = None
        self._base_count = _use_count(tensor)

    def in_use_elsewhere(self) -> bool:
        """Whether a tensor outside the pool may still share this buffer's memory (``True`` when
        PyTorch cannot tell: never reuse what may be read)."""
        n = _use_count(self.tensor)
        if n is None or self._base_count is None:
            return True
        return n > self._base_count

    @property
    def countable(self) -> bool:
        """Whether this PyTorch reported the buffer's storage use count (reuse is possible)."""
        return self._base_count is not None

    def wait(self, stream: Any = None) -> None:
        """Order the next write after the last reader: ``stream`` (a CUDA stream; ``None``: the
        current one) waits for the reader's event; for a CPU writer (``stream`` ``None`` and a
        CPU buffer) the calling thread waits."""
        ev = self._event
        if ev is None:
            return
        import torch

        if self.tensor.device.type == "cuda":
            (stream if stream is not None else torch.cuda.current_stream(self.tensor.device)).wait_event(ev)
        elif stream is not None:
            stream.wait_event(ev)  # a GPU copy into this CPU buffer
        else:
            ev.synchronize()

    @property
    def nbytes(self) -> int:
        return self.tensor.numel() * self.tensor.element_size()


class BufferPool:
    """Tensors of fixed shapes on one device, recycled.

    Args:
        device: where buffers live (``torch.device`` or string).
        pin_memory: for CPU buffers, allocate page-locked memory (fast async uploads).
        max_free: most released buffers kept per shape; extra ones are dropped.
        oom_wait: seconds :meth:`acquire` waits for a released buffer when allocating a new one
            runs out of GPU memory, then raises :class:`~vidpipe.errors.GpuMemoryError` (``0``:
            PyTorch's error is raised as is).

    Thread-safe.
    """

    def __init__(
        self, device: "torch.device | str", *, pin_memory: bool = False, max_free: int = 8, oom_wait: float = 0.0
    ) -> None:
        import torch

        self.device = torch.device(device)
        self.pin_memory = bool(pin_memory) and self.device.type == "cpu"
        self.max_free = max_free
        self.oom_wait = float(oom_wait)
        self.stats = PoolStats()
        self._free: dict[tuple, list[Buffer]] = {}
        self._said_uncountable = False
        self._lock = threading.Lock()
        self._released = threading.Condition(self._lock)

    def acquire(self, shape: tuple[int, ...], dtype: "torch.dtype", *, stream: Any = None, wait: bool = True) -> Buffer:
        """A buffer of ``shape`` and ``dtype``, reused when one was released.

        With ``wait``, ``stream`` (the CUDA stream that will write the buffer; ``None``: the
        current stream, or the calling thread for CPU buffers) waits for the last reader's
        event (:meth:`Buffer.wait`). With ``wait=False`` every writer calls
        :meth:`Buffer.wait` itself (several writers on different streams).
        """
        import torch

        key = (tuple(int(s) for s in shape), dtype)
        with self._lock:
            buf = self._take_free(key)
        if buf is None:
            try:
                t = torch.empty(key[0], dtype=dtype, device=self.device, pin_memory=self.pin_memory)
            except torch.cuda.OutOfMemoryError as exc:
                if self.oom_wait <= 0:
                    raise
                buf = self._wait_for_release(key, exc)
        if buf is not None:
            if wait:
                buf.wait(stream)
            return buf
        buf = Buffer(t, key)
        if not buf.countable and not self._said_uncountable:
            self._said_uncountable = True
            logger.warning("buffer pool on %s: this PyTorch (%s) does not report storage use counts; buffers are "
                           "not reused (each batch allocates its own)", self.device, torch.__version__)  # fmt: skip
        with self._lock:
            self.stats.allocations += 1
            self.stats.allocated_bytes += buf.nbytes
            self.stats.peak_bytes = max(self.stats.peak_bytes, self.stats.allocated_bytes)
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "pool: new %s %s buffer on %s (%d bytes held)", key[0], dtype, self.device, self.stats.allocated_bytes
            )
        return buf

    def _take_free(self, key: tuple) -> "Buffer | None":
        """A released buffer of ``key`` nobody references any more (lock held)."""
        free = self._free.get(key, [])
        for i in range(len(free) - 1, -1, -1):  # oldest release first
            if not free[i].in_use_elsewhere():
                self.stats.reuses += 1
                return free.pop(i)
        return None

    def _wait_for_release(self, key: tuple, exc: BaseException) -> Buffer:
        """Out of GPU memory for a new buffer: wait up to ``oom_wait`` s for one to come back."""
        import time

        from vidpipe.errors import GpuMemoryError

        deadline = time.monotonic() + self.oom_wait
        with self._released:
            while True:
                buf = self._take_free(key)
                if buf is not None:
                    return buf
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._released.wait(min(left, 0.05))  # a kept buffer frees itself without a release
        nbytes = 1
        for s in key[0]:
            nbytes *= s
        raise GpuMemoryError(
            f"out of GPU memory for a {nbytes * key[1].itemsize >> 20} MiB batch buffer on {self.device}, and none "
            f"came back within {self.oom_wait:g} s ({self.stats.allocated_bytes >> 20} MiB held by this pool); "
            "lower max_gpu_memory's other parts, batch_size, or free GPU memory"
        ) from exc

    def release(self, buf: Buffer, event: Any = None) -> None:
        """Give ``buf`` back. ``event``: a CUDA event recorded after the last work reading it
        (``None``: nothing pending). A buffer still referenced elsewhere waits in the free list
        until it is not; beyond ``max_free`` buffers, the oldest are dropped."""
        buf._event = event
        with self._lock:
            free = self._free.setdefault(buf.key, [])
            free.insert(0, buf)
            while len(free) > self.max_free:
                old = free.pop()
                self.stats.allocated_bytes -= old.nbytes
                self.stats.retired += 1
            self._released.notify_all()

    def clear(self) -> None:
        """Drop every released buffer (their memory returns to PyTorch's allocator)."""
        with self._lock:
            for free in self._free.values():
                for b in free:
                    self.stats.allocated_bytes -= b.nbytes
            self._free.clear()
