"""Per-batch GPU buffers that every run shares, whatever CUDA stream it works on.

PyTorch's caching allocator keeps a freed block for the CUDA stream it was allocated on. A
buffer allocated on a run's own stream (a source's preprocessing stream, lent again to later
runs) is cached for that stream alone, and split to serve that stream's smaller allocations in
between, so the streams came to hold copies of it, and the process's GPU memory grew by one
buffer whenever a stream found none free. Seen in a 30-minute soak on an H200: the letterbox's
intermediate for 32 1080p frames (166 MiB) cached once more after ~2,000 runs
(``tools/bench-probes/segment_growth.py``).

:func:`empty` allocates from the default stream's cache instead and marks the block as used by
the current stream (``record_stream``): the allocator hands it out again only once that stream's
work on it is done, and then to any run on any stream. Because a block the allocator gives the
default stream may still be in use by work queued there (a caller's own, freed in stream order),
the current stream first waits for the default stream's queued work (one event; vidpipe itself
queues nothing there while it runs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["empty"]


def empty(shape: Sequence[int], *, dtype: "torch.dtype", device: "torch.device") -> "torch.Tensor":
    """``torch.empty(shape)`` on ``device``; on a CUDA device whose current stream is not the
    default one, from the default stream's cache, recorded as used by the current stream, which
    waits for the default stream's queued work first (see the module's text). For buffers that
    live for one batch's work on the current stream."""
    import torch

    if device.type != "cuda":
        return torch.empty(tuple(shape), dtype=dtype, device=device)
    current = torch.cuda.current_stream(device)
    default = torch.cuda.default_stream(device)
    if current == default:
        return torch.empty(tuple(shape), dtype=dtype, device=device)
    with torch.cuda.stream(default):
        out = torch.empty(tuple(shape), dtype=dtype, device=device)
    current.wait_stream(default)
    out.record_stream(current)
    return out
