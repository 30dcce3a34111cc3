"""The trackers of a run's streams on packed host arrays: :class:`TrackBook`.

:class:`~vidpipe.track.stage.TrackerStage` packs the detections of one stream's frames into a
:class:`PackedFrames` (one device->host copy) and hands it to a book: its own (``worker="inline"``)
or the one in its helper process (:mod:`vidpipe.track.child`). numpy and numba here, no torch:
the helper process starts in a fraction of a second.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

import numpy as np

from vidpipe.track.bytetrack import ByteTrack
from vidpipe.track.compiled import CompiledByteTrack, Engine, Tracker, resolve_engine
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
    """One tracker per stream, made at the stream's first frames (ids from ``first_id``: the
    caller keeps counting across resets and helper processes).

    With the compiled engine (:mod:`vidpipe.track.compiled`) the trackers are built in a thread
    (:meth:`start_building`: numba loads them from its cache, or the first time on a machine
    compiles them, in a child process where it can: :mod:`vidpipe.track.prebuild`); until they
    are ready the numpy :class:`~vidpipe.track.bytetrack.ByteTrack` tracks, and each stream's
    tracker then hands its tracks over (:class:`~vidpipe.track.snapshot.TrackerSnapshot`): the
    same ids as if the compiled one had tracked from the start, and no run waits for the build.
    """

    def __init__(self, config: TrackConfig, *, engine: Engine = "auto") -> None:
        self.config = config
        self.engine = resolve_engine(engine)
        self._trackers: dict[int, Tracker] = {}
        self._next: dict[int, int] = {}  # ids continue after a reset
        self._built = threading.Event()  # the compiled trackers can run (or never will: numpy)
        if self.engine == "numpy":
            self._built.set()
        self._building: threading.Thread | None = None

    def start_building(self) -> None:
        """Build the compiled trackers in a thread (no-op when built, building, or numpy); where
        that fails, the numpy ones go on (logged)."""
        if not self._built.is_set() and self._building is None:
            self._building = threading.Thread(target=self._build, name="vidpipe-track-build", daemon=True)
            self._building.start()

    def wait_built(self, timeout: float | None = None) -> bool:
        """Wait until the trackers are in their final form (compiled, or numpy for good)."""
        self.start_building()
        return self._built.wait(timeout)

    def _build(self) -> None:
        t0 = time.perf_counter()
        try:
            from vidpipe.track import _kernel
            from vidpipe.track.prebuild import build_in_child, needs_compile

            child = build_in_child() if needs_compile(_kernel) else None  # the compile's GIL is the child's
            if child == "killed":  # (Ctrl-C reaches the child too: the run is ending)
                self.engine = "numpy"
                return
            CompiledByteTrack(self.config).warm_up()  # loaded from numba's cache, or compiled here
            took = time.perf_counter() - t0
            if child == "built" or took > 2.0:  # loading from the cache takes well under a second
                logger.info("compiled the tracker%s in %.1f s (its first use here; numba caches it for the next runs)",
                            " in a child process" if child == "built" else "", took)  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - numba broken here: the numpy tracker does the same job
            logger.warning("the compiled tracker failed to build (%s: %s); tracking with the numpy one",
                           type(exc).__name__, exc)  # fmt: skip
            self.engine = "numpy"
        finally:
            self._built.set()

    def track(self, frames: PackedFrames, *, first_id: int) -> StreamIds:
        """Track ``frames`` (after the stream's earlier frames). ``first_id``: where a stream this
        book has never seen starts its ids."""
        self.start_building()  # (a book used without warm-up builds them now, in the background)
        compiled = self._built.is_set() and self.engine == "compiled"
        sid = frames.stream_id
        tracker = self._trackers.get(sid)
        if tracker is None:
            first = self._next.get(sid, first_id)
            tracker = CompiledByteTrack(self.config, first_id=first) if compiled else ByteTrack(self.config, first_id=first)
        elif compiled and isinstance(tracker, ByteTrack):
            tracker = CompiledByteTrack.from_snapshot(self.config, tracker.snapshot())
            logger.info("stream %d: the compiled tracker takes over after %d frames", sid, tracker.frames)
        self._trackers[sid] = tracker
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
