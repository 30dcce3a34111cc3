"""One bounded queue per source, between its worker thread and the batcher.

- a *finite* source's queue (files, images) holds ``queue_depth`` chunks; when full, the worker
  waits (backpressure): every frame is kept;
- a *live* source's queue holds ``live.queue_frames`` frames; when full, its oldest chunk is
  dropped (latest wins: the model always gets the newest frames) and the dropped frames are
  counted in ``state.drops`` (and taken off ``state.produced``, so a run's accounting still adds
  up: frames yielded = frames produced).

All queues of a run share the batcher's lock and its two conditions (``ready``: chunks arrived,
for the consumer; ``space``: chunks taken, for waiting workers). Methods whose name starts with
``_`` expect that lock held.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vidpipe.batching.pending import PendingFrame
    from vidpipe.pipeline_config import SourceState
    from vidpipe.types import ModelInput

__all__ = ["QueuedChunk", "SourceQueue", "split_input"]

#: how long a blocked worker waits between checks of its stop flag (seconds)
_POLL_S = 0.1
#: smoothing of a live queue's measured frame interval (exponential moving average weight)
_EWMA = 0.2


@dataclass
class QueuedChunk:
    """A chunk of one source waiting for the model.

    Attributes:
        stream_id: the source's stream id.
        inp: ``(B, 3, H, W)`` model input of ``B`` frames, on the run's device, or one
            :class:`~vidpipe.batching.pending.PendingFrame` (preprocessed with its batch).
        ready: ``torch.cuda.Event`` recorded after its preprocessing on the worker's stream, or
            ``None`` on the CPU.
        at: ``time.monotonic()`` when it was queued (the batcher's deadline counts from there).
    """

    stream_id: int
    inp: "ModelInput | PendingFrame"
    ready: Any = None
    at: float = field(default_factory=time.monotonic)

    def __len__(self) -> int:
        return len(self.inp)

    @property
    def shape(self) -> tuple:
        """``(3, H, W)``: chunks batch together only when this matches."""
        pending = getattr(self.inp, "input_shape", None)  # a PendingFrame (vidpipe.batching.pending)
        return pending if pending is not None else tuple(self.inp.tensor.shape[1:])

    def discard(self) -> None:
        """This chunk will never reach the model: let go of what it holds (a pending frame's
        buffer)."""
        release = getattr(self.inp, "release", None)
        if release is not None:
            release(None)


def split_input(inp: "ModelInput", m: int) -> "tuple[ModelInput, ModelInput]":
    """``inp``'s first ``m`` rows and the others (views: no copy), ``0 < m < len(inp)``."""
    from vidpipe.types import ModelInput

    kept = inp.images  # kept frames (a tensor or a tuple): sliced alike, views too
    return (
        ModelInput(inp.tensor[:m], inp.frames[:m], inp.scale[:m], inp.pad[:m], None if kept is None else kept[:m]),
        ModelInput(inp.tensor[m:], inp.frames[m:], inp.scale[m:], inp.pad[m:], None if kept is None else kept[m:]),
    )


class LiveTally:
    """Frames waiting in the live queues of one batcher, and its batch size (guarded by the
    batcher's lock). A live put wakes the consumer only when the frames waiting could make a full
    batch, or when they were none (the oldest one's deadline starts): otherwise the consumer,
    waiting for that deadline, would wake for every frame of every stream (at 64 cameras, about
    2,000 times a second, each time scanning every queue, while the streams' threads wait on the
    same lock)."""

    __slots__ = ("frames", "batch_size")

    def __init__(self, batch_size: int) -> None:
        self.frames = 0
        self.batch_size = batch_size


class SourceQueue:
    """The bounded FIFO of one source (see the module docstring for the two policies).

    Args:
        state: the source's state (``produced`` and ``drops`` are updated here).
        live: latest-wins (``True``) or blocking (``False``).
        capacity: chunks (finite sources) or frames (live sources), at least 1.
        lock, ready, space: the batcher's lock and conditions.
        tally: the batcher's count of live frames waiting (live queues only; see :class:`LiveTally`).
    """

    def __init__(
        self,
        state: "SourceState",
        *,
        live: bool,
        capacity: int,
        lock: threading.Lock,
        ready: threading.Condition,
        space: threading.Condition,
        tally: LiveTally | None = None,
    ) -> None:
        self.state = state
        self._tally = tally if live else None
        self.stream_id = state.stream_id
        self.live = live
        self.capacity = max(1, int(capacity))
        self._lock, self._ready, self._space = lock, ready, space
        self.chunks: deque[QueuedChunk] = deque()
        self.frames = 0  # frames in ``chunks``
        self.puts = 0  # chunks queued so far
        self.done = False  # the worker will put nothing more (ended, failed, stopped or removed)
        self.closed = False  # puts are refused (source removed, run closing)
        self.last_put: float | None = None
        self.interval: float | None = None  # live: smoothed seconds between puts (the stream's frame interval)

    # ----------------------------------------------------------------- worker side
    def put(self, inp: "ModelInput | PendingFrame", ready: Any, *, stop: threading.Event) -> bool:
        """Queue one chunk; ``False`` (nothing queued) once the queue is closed or ``stop`` is set.

        A finite source waits here while its queue is full; a live source never waits: its
        oldest chunks make room (counted as drops).
        """
        n = len(inp)
        with self._lock:
            if not self.live:
                while len(self.chunks) >= self.capacity:
                    if self.closed or stop.is_set():
                        return False
                    self._space.wait(_POLL_S)
            if self.closed or stop.is_set():
                return False
            now = time.monotonic()
            if self.live and self.last_put is not None:
                gap = now - self.last_put
                self.interval = gap if self.interval is None else (1 - _EWMA) * self.interval + _EWMA * gap
            self.last_put = now
            self.chunks.append(QueuedChunk(self.stream_id, inp, ready, now))
            before = self.frames
            self.frames += n
            self.puts += 1
            self.state.produced += n
            if self.live:
                while self.frames > self.capacity and len(self.chunks) > 1:
                    old = self.chunks.popleft()
                    old.discard()
                    self.frames -= len(old)
                    self.state.produced -= len(old)
                    self.state.drop("queue", len(old))
            tally = self._tally
            if tally is None:
                self._ready.notify()
            else:
                waiting = tally.frames
                tally.frames += self.frames - before
                if waiting == 0 or tally.frames >= tally.batch_size:
                    self._ready.notify()
        return True

    def finish(self) -> None:
        """The worker is done: nothing more will come (the batcher may flush what is left)."""
        with self._lock:
            self.done = True
            self._ready.notify()

    # ----------------------------------------------------------------- batcher side (lock held)
    def _pop(self) -> QueuedChunk:
        c = self.chunks.popleft()
        self.frames -= len(c)
        if self._tally is not None:
            self._tally.frames -= len(c)
        self._space.notify_all()
        return c

    def _pop_part(self, m: int) -> QueuedChunk:
        """The first ``m`` frames of the head chunk (views of its tensors); the rest stay queued
        with the same ready event and queue time."""
        c = self.chunks[0]
        head, rest = split_input(c.inp, m)
        self.chunks[0] = QueuedChunk(c.stream_id, rest, c.ready, c.at)
        self.frames -= m
        if self._tally is not None:
            self._tally.frames -= m
        self._space.notify_all()
        return QueuedChunk(c.stream_id, head, c.ready, c.at)

    def _close(self) -> int:
        """Refuse further puts and discard what is queued; returns the frames discarded."""
        dropped = self.frames
        self.closed = True
        self.done = True
        for c in self.chunks:
            c.discard()
        self.chunks.clear()
        self.frames = 0
        if self._tally is not None:
            self._tally.frames -= dropped
        self._space.notify_all()
        self._ready.notify()
        return dropped
