"""A work buffer for a batch's kernels that does not make GPU memory depend on timing.

The fused letterbox (:mod:`vidpipe.ops.fused`) writes each batch through a float32 intermediate
(32 1080p frames: 164.5 MiB) that lives for two kernel launches. Allocated per batch from
PyTorch's caching allocator, how many of them exist at once depends on timing: a freed block is
handed out again only once the GPU work queued on it is done, so a source's thread that runs a
batch ahead of the GPU, or two sources that preprocess at the same moment, make the allocator
reserve one more. That happened after 1.35 minutes of a 26.5-minute soak on an H200
(``vidpipe bench soak``: one new 166 MiB segment, +4.2% of the process's GPU memory, flat
afterwards; the stack from ``tools/bench-probes/segment_growth.py``), and after ~2,000 runs in an
earlier one: a service's memory would step up at a moment nobody can predict.

A :class:`ScratchArena` holds one buffer on its device and lends it to one caller at a time
(:meth:`ScratchArena.borrow`), for as long as the caller takes to queue its kernels. Whoever
borrows next queues a wait, on the GPU, for the previous borrower's kernels (one CUDA event
re-recorded per borrow), instead of asking for new memory: the memory is one buffer, the size of
the largest request, whatever the timing, the number of sources or of runs. The cost: sources'
preprocessing kernels run one after another on the GPU (0.4 ms per 32 1080p frames) and their
threads take turns queuing them (two launches). A :class:`~vidpipe.models.detector.Detector`
owns one arena, kept across its runs (``Detector.scratch``).
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = ["ScratchArena"]


class ScratchArena:
    """One work buffer on ``device``, lent to one caller at a time.

    On the CPU every :meth:`borrow` is a fresh ``torch.empty`` (nothing is queued, so nothing to
    order). On CUDA the buffer grows to the largest request and is kept; :attr:`nbytes` is its size.
    """

    def __init__(self, device: "torch.device | str") -> None:
        import torch

        self.device = torch.device(device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self._lock = threading.Lock()
        self._buffer: torch.Tensor | None = None
        self._done: Any = None  # CUDA event after the last borrower's kernels

    @property
    def nbytes(self) -> int:
        """Bytes of GPU memory the arena holds now (0 on the CPU or before the first borrow)."""
        buf = self._buffer
        return 0 if buf is None else buf.numel()

    @contextlib.contextmanager
    def borrow(self, shape: Sequence[int], *, dtype: "torch.dtype") -> Iterator["torch.Tensor"]:
        """A ``shape`` ``dtype`` tensor on the arena's device (contents undefined) for kernels
        queued on the current CUDA stream inside the ``with`` block; it must not be used after it.

        The block holds the arena's lock: queue the kernels, nothing slow. Its kernels start after
        the previous borrower's (the current stream waits for them on the GPU)."""
        import torch

        shape = tuple(int(s) for s in shape)
        if self.device.type != "cuda":
            yield torch.empty(shape, dtype=dtype, device=self.device)
            return
        nbytes = math.prod(shape) * dtype.itemsize
        with self._lock:
            stream = torch.cuda.current_stream(self.device)
            if self._buffer is None or self._buffer.numel() < nbytes:
                self._grow(nbytes, stream)
            buf = self._buffer
            if self._done is not None:
                stream.wait_event(self._done)
            buf.record_stream(stream)  # when it is freed, the allocator waits for this stream's work
            try:
                yield buf[:nbytes].view(dtype).view(shape)
            finally:
                if self._done is None:
                    self._done = torch.cuda.Event()
                self._done.record(stream)

    def _grow(self, nbytes: int, stream: "torch.cuda.Stream") -> None:
        """A buffer of ``nbytes`` in place of the smaller one, once the kernels queued on that one
        are done (a wait on this thread: it happens when a larger frame size is first seen).
        Allocated from the default stream's cache, which every run shares; ``stream`` waits for
        the default stream's queued work first, since the allocator may hand out a block that work
        still uses (it frees in the default stream's order)."""
        import torch

        if self._done is not None:
            self._done.synchronize()
        self._buffer = None
        default = torch.cuda.default_stream(self.device)
        with torch.cuda.stream(default):
            buf = torch.empty(nbytes, dtype=torch.uint8, device=self.device)
        if stream != default:
            stream.wait_stream(default)
        self._buffer = buf
