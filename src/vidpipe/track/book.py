"""The trackers of a run's streams on packed host arrays: :class:`TrackBook`.

:class:`~vidpipe.track.stage.TrackerStage` packs the detections of one stream's frames into a
:class:`PackedFrames` (one device->host copy) and hands it to a book: its own (``worker="inline"``)
or the one in its helper process (:mod:`vidpipe.track.child`). Only numpy here, no torch: the
helper process starts in a fraction of a second.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np

from vidpipe.track.compiled import Engine, Tracker, new_tracker, resolve_engine
from vidpipe.track.config import TrackConfig

__all__ = ["PackedFrames", "StreamIds", "TrackBook"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PackedFrames:
    """Consecutive frames of one stream, their detections packed in frame order (host arrays).

    Attributes:
        stream_id: the stream.
        times: ``(F,)`` float64, each frame's time in seconds (see :func:`~vidpipe.track.stage.frame_time`).
        counts: ``(F,)`` int64, detections per frame.
        rows: ``(N, 6)`` float32, ``N = counts.sum()``: x1, y1, x2, y2, score, class.
        embeddings: ``(N, D)`` float32 appearance vectors, or ``None``.
    """

    stream_id: int
    times: np.ndarray
    counts: np.ndarray
    rows: np.ndarray
    embeddings: np.ndarray | None = None


@dataclass(frozen=True)
class StreamIds:
    """What tracking one :class:`PackedFrames` gave.

    Attributes:
        ids: ``(N,)`` int64 track id per detection row, ``-1`` where not in a confirmed track.
        next_id: the id the stream's next confirmed track gets.
        started: tracks confirmed during this call.
        active: confirmed tracks followed after the last frame (not lost).
    """

    ids: np.ndarray
    next_id: int
    started: int
    active: int


class TrackBook:
    """One tracker per stream (:func:`~vidpipe.track.compiled.new_tracker`: compiled with numba
    where it imports, else the numpy :class:`~vidpipe.track.bytetrack.ByteTrack`), made at the
    stream's first frames (ids from ``first_id``: the caller keeps counting across resets and
    helper processes)."""

    def __init__(self, config: TrackConfig, *, engine: Engine = "auto") -> None:
        self.config = config
        self.engine = resolve_engine(engine)
        self._trackers: dict[int, Tracker] = {}
        self._next: dict[int, int] = {}  # ids continue after a reset

    def warm_up(self) -> None:
        """Compile the tracker now (or load it from numba's cache) rather than on the first frames;
        where that fails, track with the numpy one (logged)."""
        if self.engine == "compiled" and not self._trackers:
            t0 = time.perf_counter()
            try:
                new_tracker(self.config, engine="compiled").warm_up()
                if time.perf_counter() - t0 > 2.0:  # loading from the cache takes well under a second
                    logger.info("compiled the tracker in %.1f s (its first use here; numba caches it for the next runs)",
                                time.perf_counter() - t0)  # fmt: skip
            except Exception as exc:  # noqa: BLE001 - numba broken here: the numpy tracker does the same job
                logger.warning("the compiled tracker failed to build (%s: %s); tracking with the numpy one",
                               type(exc).__name__, exc)  # fmt: skip
                self.engine = "numpy"

    def track(self, frames: PackedFrames, *, first_id: int) -> StreamIds:
        """Track ``frames`` (after the stream's earlier frames). ``first_id``: where a stream this
        book has never seen starts its ids."""
        tracker = self._trackers.get(frames.stream_id)
        if tracker is None:
            first = self._next.get(frames.stream_id, first_id)
            tracker = self._trackers[frames.stream_id] = new_tracker(self.config, first_id=first, engine=self.engine)
        rows = frames.rows.astype(np.float64)  # once per batch (what the trackers compute in)
        before = tracker.started
        ids = tracker.update_frames(
            frames.times, frames.counts, rows[:, :4], rows[:, 4], rows[:, 5].astype(np.int64), frames.embeddings
        )
        return StreamIds(ids, tracker.next_id, tracker.started - before, tracker.active())

    def reset(self, stream_id: int) -> None:
        """Forget the stream's tracks (its next frames start a new tracker; ids go on counting)."""
        tracker = self._trackers.pop(stream_id, None)
        if tracker is not None:
            self._next[stream_id] = tracker.next_id
