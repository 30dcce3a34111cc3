"""CUDA-graph twins of one detector, lent to one run at a time and kept for the next.

A run on a GPU calls the model through a CUDA graph captured at its batch size (a *twin* of the
detector: :func:`vidpipe.models.backends.accel.accelerate`). Capturing takes time (warm-up
passes, the capture) and each graph holds a private pool of GPU memory for its activations
(yolov3-tiny at batch 32: about 0.5 GiB). Captured anew for every run of the same detector, the
graphs piled up until Python's cycle collector freed them: on an H100, 250 runs of one
detector on a small clip took the caching allocator's reserve from 4 to 16 GiB and back.

:class:`GraphTwins` keeps them instead: a run takes the twin of its key (batch size, mode) when
one is idle, captures a new one only when every twin of that key is in use (runs of one detector
at the same time in several threads: a graph's static buffers serve one caller at a time), and
gives it back when it ends. At most :data:`KEEP_IDLE` idle twins per key are kept.

The same pool lends a detector's runs their CUDA streams (:attr:`Detector.cuda_streams`): the
caching allocator keeps freed blocks per stream, and ``torch.cuda.Stream()`` hands out PyTorch's
32 pooled streams in turn, so runs that each took fresh streams left cached blocks on every one
of them, and the reserve crept up (an H100 soak: 17.5 -> 19.8 GiB reserved over 8 minutes of
runs, 75 MiB allocated). Runs that reuse the same streams reuse their cached blocks. Streams are
lent per role (key ``(device, "source" | "model" | "post")``): a stream that served as a
source's stream in one run and as the model's in the next came to cache the blocks of both, and
a stream's first turn in a new role grew the reserve late (an H200 soak: one 166 MiB step after
~2,000 runs, the letterbox's scratch of 32 1080p frames; ``tools/bench-probes/segment_growth.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["GraphTwins", "KEEP_IDLE"]

#: idle twins kept per key; more (after several concurrent runs) are dropped when given back
KEEP_IDLE = 2

T = TypeVar("T")


class GraphTwins(Generic[T]):
    """A lending pool of twins per key. Thread-safe; ``make`` runs outside the lock."""

    def __init__(self, *, keep_idle: int = KEEP_IDLE) -> None:
        self.keep_idle = keep_idle
        self._idle: dict[Hashable, list[T]] = {}
        self._lock = threading.Lock()
        self.made = 0  # twins captured so far (tests and diagnostics)

    def take(self, key: Hashable, make: Callable[[], T]) -> T:
        """An idle twin of ``key``, or a new one from ``make()``; the caller owns it until
        :meth:`give`."""
        with self._lock:
            idle = self._idle.get(key)
            if idle:
                return idle.pop()
        twin = make()
        with self._lock:
            self.made += 1
        return twin

    def give(self, key: Hashable, twin: T) -> None:
        """Return a twin taken with :meth:`take` (never one in use by another caller)."""
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if len(idle) < self.keep_idle and all(t is not twin for t in idle):
                idle.append(twin)

    def clear(self) -> None:
        """Drop every idle twin (their graphs and memory go with the last reference)."""
        with self._lock:
            self._idle.clear()
