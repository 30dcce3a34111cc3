"""ByteTrack compiled with numba: :class:`CompiledByteTrack`, the tracker a run uses.

The same tracker as :class:`vidpipe.track.bytetrack.ByteTrack` (the readable numpy one, kept as
the reference and as the fallback where numba cannot be imported), the same ids up to floating
point rounding (the tests hold the two against each other on generated scenes; ``vidpipe bench
track`` scores both against ``trackers``' ByteTrack). The steps are loops compiled by numba
(:mod:`vidpipe.track._kernel`), a whole batch of frames per call: a frame costs microseconds
instead of the numpy tracker's hundred-odd numpy calls.

One difference: a track born before any embeddings were given, met by the first detections that
have one, counts as cosine distance 1 (as it does on every later frame in both); the numpy
tracker leaves the appearance term out on that one frame.

numba compiles the kernel on first use and caches it on disk (``NUMBA_CACHE_DIR``, else beside
the module or in the user's cache directory): the first run on a machine pays 8-16 s, in a
thread of :class:`~vidpipe.track.book.TrackBook`, while the numpy tracker tracks the first frames
and then hands its tracks over (:meth:`CompiledByteTrack.from_snapshot`); later runs load it in
under a second.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Literal, Protocol

import numpy as np

from vidpipe.errors import ConfigError
from vidpipe.track.config import TrackConfig
from vidpipe.track.snapshot import TrackerSnapshot

__all__ = ["CompiledByteTrack", "Engine", "Tracker", "available", "resolve_engine"]

log = logging.getLogger(__name__)

#: which tracker implementation: ``"compiled"`` (numba), ``"numpy"``, or ``"auto"`` (compiled
#: where numba imports)
Engine = Literal["auto", "compiled", "numpy"]


class Tracker(Protocol):
    """What :class:`~vidpipe.track.book.TrackBook` needs of a stream's tracker (both engines)."""

    @property
    def next_id(self) -> int: ...

    @property
    def started(self) -> int: ...

    def active(self) -> int: ...

    def update_frames(self, times: np.ndarray, counts: np.ndarray, boxes: np.ndarray, scores: np.ndarray,
                      classes: np.ndarray, embeddings: np.ndarray | None = None) -> np.ndarray: ...  # fmt: skip


def available() -> bool:
    """Whether numba is installed here (without importing it: that takes a few tenths of a second,
    which the tracker's build thread spends instead; a numba that is installed but fails to import
    is found there, and the numpy tracker goes on)."""
    from importlib.util import find_spec

    try:
        return find_spec("numba") is not None
    except (ImportError, ValueError):
        return False


def resolve_engine(engine: Engine) -> Literal["compiled", "numpy"]:
    """``"auto"`` -> ``"compiled"`` where numba is installed, else ``"numpy"`` (logged).

    Raises:
        ConfigError: an unknown engine, or ``"compiled"`` without numba.
    """
    if engine not in ("auto", "compiled", "numpy"):
        raise ConfigError(f"invalid engine={engine!r}; expected 'auto', 'compiled' or 'numpy'")
    if engine == "numpy":
        return "numpy"
    if available():
        return "compiled"
    if engine == "compiled":
        raise ConfigError("engine='compiled' needs numba, which is not installed here: pip install numba")
    log.info("numba is not installed here: tracking with the numpy ByteTrack (slower on crowded footage)")
    return "numpy"


class CompiledByteTrack:
    """The tracker of one stream, compiled (:class:`~vidpipe.track.bytetrack.ByteTrack`'s
    interface, plus :meth:`update_frames` for many frames per call).

    Args:
        config: the options (:class:`~vidpipe.track.TrackConfig`); or pass them as keywords.
        first_id: the id the first confirmed track gets (ids then count up).

    Raises:
        ImportError: numba is not importable.
    """

    def __init__(self, config: TrackConfig | None = None, *, first_id: int = 1, **options: object) -> None:
        from vidpipe.track import _kernel  # numba: imported here, compiled or loaded on first call

        if config is None:
            config = TrackConfig(**options)  # type: ignore[arg-type]
        elif options:
            config = replace(config, **options)  # type: ignore[arg-type]
        self.config = config
        self._kernel = _kernel
        self._params = np.array([float(getattr(config, name)) for name in _kernel.PARAMS])
        self._first_id = self._next_id = int(first_id)
        self._emb_dim = 0
        self.reset()

    # ------------------------------------------------------------------ state
    def reset(self) -> None:
        """Drop every track (ids keep counting up, so an id is never reused by this tracker)."""
        self._n = 0
        self._alloc(16, self._emb_dim)
        self._t = float("nan")
        self.frames = 0

    def _alloc(self, capacity: int, dim: int) -> None:
        n = getattr(self, "_n", 0)
        old = getattr(self, "_kf", None)
        kf = np.zeros((capacity, 20))
        state = np.zeros(capacity, np.int8)
        ids = np.full(capacity, -1, np.int64)
        hits = np.zeros(capacity, np.int64)
        last_t = np.zeros(capacity)
        cls = np.zeros(capacity, np.int64)
        emb = np.zeros((capacity, dim), np.float32)
        if old is not None and n:
            kf[:n], state[:n], ids[:n] = self._kf[:n], self._state[:n], self._ids[:n]
            hits[:n], last_t[:n], cls[:n] = self._hits[:n], self._last_t[:n], self._cls[:n]
            if dim == self._emb.shape[1]:
                emb[:n] = self._emb[:n]
        self._kf, self._state, self._ids, self._hits = kf, state, ids, hits
        self._last_t, self._cls, self._emb = last_t, cls, emb
        self._emb_dim = dim

    @property
    def next_id(self) -> int:
        return self._next_id

    def snapshot(self) -> TrackerSnapshot:
        """The tracks and clock now, as arrays (copies; see :mod:`vidpipe.track.snapshot`)."""
        n = self._n
        return TrackerSnapshot(
            self._kf[:n].copy(), self._state[:n].copy(), self._ids[:n].copy(), self._hits[:n].copy(),
            self._last_t[:n].copy(), self._cls[:n].copy(), self._emb[:n].copy() if self._emb_dim else None,
            None if self._t != self._t else self._t, self.frames, self._first_id, self._next_id,
        )  # fmt: skip

    @classmethod
    def from_snapshot(cls, config: TrackConfig, snap: TrackerSnapshot) -> "CompiledByteTrack":
        """A tracker that goes on from ``snap`` (another tracker's state: the same tracks and ids)."""
        out = cls(config, first_id=snap.first_id)
        n = len(snap)
        out._alloc(max(16, n), 0 if snap.emb is None else int(snap.emb.shape[1]))
        out._kf[:n], out._state[:n], out._ids[:n], out._hits[:n] = snap.kf, snap.state, snap.ids, snap.hits
        out._last_t[:n], out._cls[:n] = snap.last_t, snap.cls
        if snap.emb is not None:
            out._emb[:n] = snap.emb
        out._n = n
        out._t = float("nan") if snap.t is None else float(snap.t)
        out.frames = snap.frames
        out._next_id = snap.next_id
        return out

    @property
    def started(self) -> int:
        """Tracks confirmed so far (ids handed out since creation)."""
        return self._next_id - self._first_id

    def active(self) -> int:
        """Confirmed tracks being followed now (not lost)."""
        from vidpipe.track._kernel import TRACKED

        return int(np.count_nonzero(self._state[: self._n] == TRACKED))

    def __len__(self) -> int:
        """Tracks held (tentative, followed and lost)."""
        return self._n

    def warm_up(self) -> None:
        """Compile (or load from numba's cache) the kernel now, on a throwaway state."""
        probe = CompiledByteTrack(self.config)
        box = np.array([[10.0, 10.0, 50.0, 90.0]])
        for k in range(3):
            probe.update_frames(np.array([k / 30.0]), np.array([1]), box + k, np.array([0.9]), np.zeros(1, np.int64))
        self._kernel._unit_rows(np.ones((1, 4), np.float32))  # (embeddings' normalisation)

    # ------------------------------------------------------------------ update
    def update(
        self,
        boxes: np.ndarray,
        scores: np.ndarray,
        class_ids: np.ndarray | None = None,
        *,
        t: float | None = None,
        embeddings: np.ndarray | None = None,
    ) -> np.ndarray:
        """Track one frame's detections (as :meth:`ByteTrack.update <vidpipe.track.ByteTrack.update>`).

        Returns:
            ``(N,)`` int64: each detection's track id, ``-1`` where it is not in a confirmed track.
        """
        boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
        n = boxes.shape[0]
        if t is None:
            t = 0.0 if self._t != self._t else self._t + 1.0 / self.config.nominal_fps
        return self.update_frames(
            np.array([float(t)]), np.array([n]), boxes, np.asarray(scores, dtype=np.float64).reshape(n),
            np.zeros(n, np.int64) if class_ids is None else np.asarray(class_ids, dtype=np.int64).reshape(n),
            embeddings=None if embeddings is None else np.asarray(embeddings, dtype=np.float32).reshape(n, -1),
        )  # fmt: skip

    def update_frames(
        self,
        times: np.ndarray,
        counts: np.ndarray,
        boxes: np.ndarray,
        scores: np.ndarray,
        classes: np.ndarray,
        embeddings: np.ndarray | None = None,
    ) -> np.ndarray:
        """Track consecutive frames in one call.

        Args:
            times: ``(F,)`` each frame's time in seconds.
            counts: ``(F,)`` detections per frame.
            boxes: ``(N, 4)`` xyxy, ``N = counts.sum()``, the frames' detections in order.
            scores: ``(N,)``; classes: ``(N,)`` integers.
            embeddings: ``(N, D)`` appearance vectors, or ``None``.

        Returns:
            ``(N,)`` int64 track ids, ``-1`` where not in a confirmed track.
        """
        k = self._kernel
        cfg = self.config
        boxes = np.ascontiguousarray(boxes, dtype=np.float64).reshape(-1, 4)
        total = boxes.shape[0]
        times = np.ascontiguousarray(times, dtype=np.float64)
        counts = np.ascontiguousarray(counts, dtype=np.int64)
        if int(counts.sum()) != total:
            raise ValueError(f"counts add up to {int(counts.sum())}, but there are {total} boxes")
        if not np.isfinite(times).all():
            raise ValueError(f"times must be finite times in seconds, got {times[~np.isfinite(times)][0]!r}")
        has_emb = embeddings is not None and cfg.appearance_weight > 0 and total > 0
        if has_emb:
            det_emb = np.array(embeddings, dtype=np.float32).reshape(total, -1)
            k._unit_rows(det_emb)
        else:
            det_emb = np.zeros((total, self._emb_dim), np.float32)
        dim = det_emb.shape[1] if has_emb else self._emb_dim
        if self._n + total > self._kf.shape[0] or dim != self._emb_dim:
            self._alloc(max(2 * self._kf.shape[0], self._n + total), dim)
        out = np.empty(total, np.int64)
        self._n, self._next_id, self._t = k.track_batch(
            self._kf, self._state, self._ids, self._hits, self._last_t, self._cls, self._emb,
            self._n, self._next_id, self._t, times, counts, boxes,
            np.ascontiguousarray(scores, dtype=np.float64), np.ascontiguousarray(classes, dtype=np.int64),
            det_emb, has_emb, self._params, k.NOISE, cfg.min_hits, cfg.per_class, cfg.fuse_score, out,
        )  # fmt: skip
        self.frames += times.shape[0]
        return out
