"""The batcher: forms model batches from the per-source queues of a run.

A batch is ready when

- it is **full**: ``batch_size`` frames can be taken (whole chunks of one input shape);
- or, in **deadline** mode (the run has live sources, or ``batch_timeout`` was given), the oldest
  waiting chunk has waited ``batch_timeout`` seconds (default: about one frame interval of the
  fastest live stream, measured from its arrivals; 1/30 s until measured);
- or, in **lull** mode (files and images only: today's throughput behaviour), nothing new has
  arrived for :data:`LULL_S` while the consumer waited;
- or no source can add more (every queue is done): what is left is flushed.

Chunks are taken **round-robin** across sources, one chunk per source per round, continuing
after the source that was served last, so a busy source cannot delay the others by more than
its share. A deadline-triggered batch starts with the source of the oldest chunk. The last chunk
of a full batch may be split (its other frames stay at the head of its queue), so batches are
full whenever enough frames wait. Chunks of another input shape than the batch's first (inputs
of another aspect ratio with ``rect`` letterboxing) wait for a later batch; a source's frames
leave in order.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from vidpipe.batching.queues import LiveTally, QueuedChunk, SourceQueue

if TYPE_CHECKING:
    from vidpipe.pipeline_config import SourceState

__all__ = ["Batcher", "END", "LULL_S", "DEFAULT_FRAME_INTERVAL_S"]

#: files-only runs: a partial batch leaves after this long without a new chunk
LULL_S = 0.05
#: the deadline before a live stream's frame interval is measured
DEFAULT_FRAME_INTERVAL_S = 1 / 30
#: the measured deadline is kept within these bounds (seconds)
_DEADLINE_RANGE = (1 / 240, 0.2)
#: the longest a waiting consumer sleeps between checks of its stop flag (seconds)
_POLL_S = 0.1


class _End:
    def __repr__(self) -> str:
        return "END"


#: returned by :meth:`Batcher.next` when every source is done and drained (and not keep_alive)
END: Any = _End()


class Batcher:
    """Per-source queues and the batches formed from them (thread-safe).

    Args:
        batch_size: frames per model call.
        batch_timeout: deadline in seconds (``None``: automatic, see the module docstring).
        keep_alive: never report :data:`END` (a serving run waits for sources added later).
    """

    def __init__(self, batch_size: int, *, batch_timeout: float | None = None, keep_alive: bool = False) -> None:
        self.batch_size = batch_size
        self.batch_timeout = batch_timeout
        self.keep_alive = keep_alive
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        self._space = threading.Condition(self._lock)
        self._queues: list[SourceQueue] = []
        self._tally = LiveTally(batch_size)
        self._next = 0  # round-robin position in _queues
        self._closed = False

    # ----------------------------------------------------------------- queues
    def add_queue(self, state: "SourceState", *, live: bool, capacity: int) -> SourceQueue:
        """A new queue for ``state``'s source (``capacity`` in chunks, or frames when ``live``)."""
        q = SourceQueue(state, live=live, capacity=capacity, lock=self._lock, ready=self._ready, space=self._space,
                        tally=self._tally)
        with self._lock:
            if self._closed:
                q._close()
            self._queues.append(q)
            self._ready.notify()
        return q

    def remove_queue(self, q: SourceQueue) -> int:
        """Close ``q`` (its worker's puts are refused) and forget it; returns frames discarded."""
        with self._lock:
            dropped = q._close()
            if q in self._queues:
                i = self._queues.index(q)
                self._queues.pop(i)
                if i < self._next:
                    self._next -= 1
                if self._next >= len(self._queues):
                    self._next = 0
            return dropped

    def close(self) -> None:
        """Close every queue (the run is ending): blocked workers and the consumer return."""
        with self._lock:
            self._closed = True
            for q in self._queues:
                q._close()
            self._ready.notify_all()

    def wake(self) -> None:
        """Wake a waiting consumer (after a stop). Never blocks, so it is safe in a signal
        handler; without the lock the consumer notices within its polling interval anyway."""
        if self._lock.acquire(blocking=False):
            try:
                self._ready.notify_all()
                self._space.notify_all()
            finally:
                self._lock.release()

    # ----------------------------------------------------------------- consumer
    @property
    def deadline_mode(self) -> bool:
        return self.batch_timeout is not None or any(q.live for q in self._queues)

    def timeout(self) -> float | None:
        """The deadline in seconds now (``None`` in lull mode)."""
        with self._lock:
            return self._timeout_locked()

    def _timeout_locked(self) -> float | None:
        if self.batch_timeout is not None:
            return self.batch_timeout
        intervals = [q.interval for q in self._queues if q.live]
        if not intervals and not any(q.live for q in self._queues):
            return None
        measured = [i for i in intervals if i is not None]
        t = min(measured) if measured else DEFAULT_FRAME_INTERVAL_S
        lo, hi = _DEADLINE_RANGE
        return min(max(t, lo), hi)

    def next(self, *, in_flight: bool, stop: threading.Event) -> "list[QueuedChunk] | None":
        """The next batch (a list of chunks), ``None`` when there is none to run now, or
        :data:`END`.

        ``None`` comes back when ``stop`` is set, when the run is idle while a batch is in flight
        (the caller finishes that batch first), and after a quiet wait (the caller loops).
        """
        with self._lock:
            arrivals = self._arrivals_locked()
            quiet_since = time.monotonic()
            while True:
                if stop.is_set() or self._closed:
                    return None
                now = time.monotonic()
                seen = self._arrivals_locked()
                if seen != arrivals:
                    arrivals, quiet_since = seen, now
                timeout = self._timeout_locked()
                batch, full = self._form(start=self._next)
                if batch and not full and (start := self._full_start()) is not None:
                    batch, full = self._form(start=start)
                if not batch:
                    if not self.keep_alive and all(q.done for q in self._queues):
                        return END
                    if in_flight:
                        # lull mode: give the next chunk LULL_S to arrive, so its model call is
                        # queued before the batch in flight is finished (the GPU stays busy)
                        wait = quiet_since + LULL_S - now if timeout is None else 0.0
                        if wait <= 0:
                            return None
                        self._ready.wait(min(wait, _POLL_S))
                        continue
                    self._ready.wait(_POLL_S)
                    continue
                if full or all(q.done for q in self._queues):
                    return self._take(batch)
                if timeout is None:  # lull mode: wait for more unless quiet for LULL_S
                    wait = quiet_since + LULL_S - now
                    if wait <= 0:
                        return self._take(batch)
                else:  # deadline mode
                    oldest = min((q.chunks[0] for q in self._queues if q.chunks), key=lambda c: c.at)
                    wait = oldest.at + timeout - now
                    if wait <= 0:
                        start = next(i for i, q in enumerate(self._queues) if q.chunks and q.chunks[0] is oldest)
                        return self._take(self._form(start=start)[0])
                    if in_flight:  # nothing due yet: finish the batch in flight first
                        return None
                self._ready.wait(min(wait, _POLL_S))

    def _arrivals_locked(self) -> int:
        return sum(q.puts for q in self._queues) + sum(1 for q in self._queues if q.done)

    def _form(self, *, start: int) -> "tuple[list[tuple[int, QueuedChunk, int]], bool]":
        """The chunks of one batch, round-robin from queue ``start``: ``[(queue index, chunk,
        frames taken)]`` in batch order (the last chunk of a full batch may be taken in part), and
        whether the batch is full. Nothing is taken off the queues."""
        qs = self._queues
        n_q = len(qs)
        if not n_q:
            return [], False
        shape = None
        taken: list[tuple[int, QueuedChunk, int]] = []
        depth = [0] * n_q  # chunks taken from each queue so far
        open_ = [True] * n_q  # the queue may still give a chunk to this batch
        n = 0
        progress = True
        while progress and n < self.batch_size:
            progress = False
            for k in range(n_q):
                i = (start + k) % n_q
                q = qs[i]
                if not open_[i] or depth[i] >= len(q.chunks):
                    continue
                c = q.chunks[depth[i]]
                if shape is None:
                    shape = c.shape
                if c.shape != shape:
                    open_[i] = False  # its next chunk waits: a source's order is kept
                    continue
                m = min(len(c), self.batch_size - n)
                taken.append((i, c, m))
                depth[i] += 1
                n += m
                progress = True
                if n >= self.batch_size:
                    break
        return taken, n >= self.batch_size

    def _full_start(self) -> int | None:
        """A queue to start from for a full batch when the round-robin start gives none (inputs of
        several shapes): the first, from the round-robin position, whose next chunk's shape has
        ``batch_size`` frames waiting."""
        frames: dict[tuple, int] = {}
        for q in self._queues:
            for c in q.chunks:
                frames[c.shape] = frames.get(c.shape, 0) + len(c)
        n_q = len(self._queues)
        for k in range(n_q):
            i = (self._next + k) % n_q
            q = self._queues[i]
            if q.chunks and frames[q.chunks[0].shape] >= self.batch_size:
                return i
        return None

    def _take(self, batch: "list[tuple[int, QueuedChunk, int]]") -> "list[QueuedChunk]":
        """Take the chunks of ``batch`` off their queues (a chunk taken in part leaves its other
        frames at the head of its queue); the next batch starts after the queue served last."""
        out = []
        for i, c, m in batch:
            q = self._queues[i]
            out.append(q._pop() if m == len(c) else q._pop_part(m))
        if batch and self._queues:
            self._next = (batch[-1][0] + 1) % len(self._queues)
        return out
