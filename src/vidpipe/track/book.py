"""The trackers of a run's streams on packed host arrays: :class:`TrackBook`.

:class:`~vidpipe.track.stage.TrackerStage` packs the detections of one stream's frames into a
:class:`PackedFrames` (one device->host copy) and hands it to a book: its own (``worker="inline"``)
or the one in its helper process (:mod:`vidpipe.track.child`). Only numpy here, no torch: the
helper process starts in a fraction of a second.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vidpipe.track.bytetrack import ByteTrack
from vidpipe.track.config import TrackConfig

__all__ = ["PackedFrames", "StreamIds", "TrackBook"]


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
    """One :class:`~vidpipe.track.bytetrack.ByteTrack` per stream, made at the stream's first
    frames (ids from ``first_id``: the caller keeps counting across resets and helper processes)."""

    def __init__(self, config: TrackConfig) -> None:
        self.config = config
        self._trackers: dict[int, ByteTrack] = {}
        self._next: dict[int, int] = {}  # ids continue after a reset

    def track(self, frames: PackedFrames, *, first_id: int) -> StreamIds:
        """Track ``frames`` (after the stream's earlier frames). ``first_id``: where a stream this
        book has never seen starts its ids."""
        tracker = self._trackers.get(frames.stream_id)
        if tracker is None:
            first = self._next.get(frames.stream_id, first_id)
            tracker = self._trackers[frames.stream_id] = ByteTrack(self.config, first_id=first)
        emb = frames.embeddings
        rows = frames.rows.astype(np.float64)  # once per batch, not per frame (what the tracker computes in)
        boxes, scores, classes = rows[:, :4], rows[:, 4], rows[:, 5].astype(np.int64)
        ids = np.empty(rows.shape[0], dtype=np.int64)
        before = tracker.started
        start = 0
        for t, c in zip(frames.times.tolist(), frames.counts.tolist()):
            end = start + c
            ids[start:end] = tracker.update(
                boxes[start:end], scores[start:end], classes[start:end], t=t,
                embeddings=None if emb is None or not c else emb[start:end],
            )  # fmt: skip
            start = end
        return StreamIds(ids, tracker.next_id, tracker.started - before, tracker.active())

    def reset(self, stream_id: int) -> None:
        """Forget the stream's tracks (its next frames start a new tracker; ids go on counting)."""
        tracker = self._trackers.pop(stream_id, None)
        if tracker is not None:
            self._next[stream_id] = tracker.next_id
