"""Decode buffers under a memory bound, with an out-of-memory back-off.

A segment-parallel decoder (:mod:`vidpipe.decode.parallel`) holds a window of batch buffers on
the GPU: ``window // batch + 2`` buffers of ``batch`` frames (the window ahead of the consumer,
the batch being handed over, the one being recycled). This module

- fits the decode batch to a byte bound (``gpu_buffer_bytes``, from ``max_gpu_memory``):
  the largest batch whose fewest buffers (:data:`~vidpipe.gpu_memory.MIN_DECODE_BUFFERS`) fit;
- allocates the window's buffers when a run starts (:func:`reserve_buffers`) and, on a CUDA
  out-of-memory error, halves the window (down to two batches), then the batch (down to 1),
  with one warning, as the model's :class:`~vidpipe.models.backends.batching.OomBackoff` does;
  only when batch 1 with the fewest buffers fails it raises
  :class:`~vidpipe.errors.GpuMemoryError` (one line, the sizes in it);
- sizes the decoder processes' ring (:func:`ring_with_backoff`) the same way.

Frames decoded are the same whatever the window and batch: only how many are held ahead and how
they are grouped change.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from vidpipe.errors import GpuMemoryError
from vidpipe.gpu_memory import MIN_DECODE_BUFFERS, mib

if TYPE_CHECKING:
    import torch

    from vidpipe.ops.pool import BufferPool

__all__ = ["fit_batch", "reserve_buffers", "ring_with_backoff", "is_cuda_oom"]

logger = logging.getLogger(__name__)


def is_cuda_oom(exc: BaseException) -> bool:
    """A CUDA out-of-memory error from PyTorch's allocator (or a driver allocation)."""
    from vidpipe.models.backends.common import is_oom

    return is_oom(exc)


def fit_batch(batch_size: int, buffer_bytes: int, frame_bytes: int, *, source: str) -> int:
    """The largest decode batch at most ``batch_size`` whose fewest buffers fit in
    ``buffer_bytes``; :class:`GpuMemoryError` when not even one frame per buffer does."""
    per_batch = buffer_bytes // max(1, MIN_DECODE_BUFFERS * frame_bytes)
    if per_batch < 1:
        raise GpuMemoryError(
            f"{source}: the decoder's GPU memory ({mib(buffer_bytes)} MiB) cannot hold "
            f"{MIN_DECODE_BUFFERS} frames of {mib(frame_bytes * 10) / 10:g} MiB; raise max_gpu_memory "
            f"(decode needs at least {mib(MIN_DECODE_BUFFERS * frame_bytes) + 1} MiB per open source)"
        )
    return max(1, min(batch_size, per_batch))


def _halve(batch: int, window: int) -> tuple[int, int] | None:
    """The next smaller (batch, window) after an out-of-memory error, or ``None`` at the floor."""
    if window > 2 * batch:
        return batch, max(2 * batch, (window // 2) // batch * batch)
    if batch > 1:
        b = batch // 2
        return b, 2 * b
    return None


def _fail(source: str, exc: BaseException, batch: int, window: int, frame_bytes: int) -> GpuMemoryError:
    return GpuMemoryError(
        f"{source}: out of GPU memory for the decoder's buffers even at batch {batch} with a window of "
        f"{window} frames ({mib((window // batch + 2) * batch * frame_bytes)} MiB); free GPU memory or "
        f"lower max_gpu_memory's other parts (batch_size) ({type(exc).__name__})"
    )


def reserve_buffers(
    pool: "BufferPool", row_shape: tuple[int, ...], dtype: "torch.dtype", batch: int, window: int, *, source: str,
) -> tuple[int, int]:  # fmt: skip
    """Allocate the ``window // batch + 2`` batch buffers of a run in ``pool`` (then hand them
    back to it for reuse), backing off on out-of-memory errors; returns the ``(batch, window)``
    that fit. Buffers already in the pool from an earlier run are reused."""
    import contextlib

    import torch

    frame_bytes = dtype.itemsize
    for s in row_shape:
        frame_bytes *= s
    # on the device's default stream, which every run shares: the caching allocator keeps freed
    # blocks per stream, and a run's own (pooled, rotating) streams would strand them between runs
    cuda = pool.device.type == "cuda"
    scope = torch.cuda.stream(torch.cuda.default_stream(pool.device)) if cuda else contextlib.nullcontext()
    first = (batch, window)
    while True:
        held: list[Any] = []
        try:
            with scope:
                for _ in range(window // batch + 2):
                    held.append(pool.acquire((batch, *row_shape), dtype, wait=False))
        except Exception as exc:  # noqa: BLE001 - only out-of-memory is handled
            if not is_cuda_oom(exc):
                raise
            for buf in held:
                pool.release(buf, None)
            pool.clear()
            del held
            smaller = _halve(batch, window)
            if smaller is None:
                raise _fail(source, exc, batch, window, frame_bytes) from None
            batch, window = smaller
            continue
        for buf in held:
            pool.release(buf, None)
        if (batch, window) != first:
            logger.warning(
                "%s: out of GPU memory for %d decode buffers of %d frames; continuing with a window of %d "
                "frames in batches of %d (%d MiB)",
                source, first[1] // first[0] + 2, first[0], window, batch, mib(len(held) * batch * frame_bytes),
            )  # fmt: skip
        return batch, window


def ring_with_backoff(
    make: Callable[[int, int], Any], batch: int, slots: int, frame_bytes: int, *, source: str, min_slots: int = 3,
) -> tuple[Any, int]:  # fmt: skip
    """``make(batch, slots)`` (a decoder processes' ring), halving the slots (to ``min_slots``)
    and then the batch on out-of-memory errors; returns ``(ring, batch)``."""
    first = (batch, slots)
    while True:
        try:
            ring = make(batch, slots)
        except Exception as exc:  # noqa: BLE001 - only out-of-memory is handled
            if not is_cuda_oom(exc):
                raise
            import torch

            torch.cuda.empty_cache()
            if slots > min_slots:
                slots = max(min_slots, slots // 2)
            elif batch > 1:
                batch //= 2
            else:
                raise _fail(source, exc, batch, slots * batch, frame_bytes) from None
            continue
        if (batch, slots) != first:
            logger.warning(
                "%s: out of GPU memory for the decoder processes' ring (%d slots of %d frames); continuing "
                "with %d slots of %d", source, first[1], first[0], slots, batch,
            )  # fmt: skip
        return ring, batch
