"""A stream tracker's whole state, as arrays: :class:`TrackerSnapshot`.

Both ByteTrack implementations give one (``snapshot()``) and
:meth:`~vidpipe.track.compiled.CompiledByteTrack.from_snapshot` continues from one: a run's first
frames are tracked by the numpy tracker while the compiled one is built (seconds, the first time
on a machine), which then takes over with the same tracks and ids.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["TrackerSnapshot"]


@dataclass(frozen=True)
class TrackerSnapshot:
    """The live tracks (``T`` rows, in birth order) and the clock of one stream's tracker (copies).

    Attributes:
        kf: ``(T, 20)`` float64 Kalman mean and covariance, packed (:mod:`vidpipe.track.kalman`).
        state: ``(T,)`` int8 tentative / tracked / lost (``vidpipe.track.bytetrack.TENTATIVE`` ...).
        ids: ``(T,)`` int64, ``-1`` until confirmed.
        hits: ``(T,)`` int64 detections matched so far.
        last_t: ``(T,)`` float64 time of each track's last match, seconds.
        cls: ``(T,)`` int64 class.
        emb: ``(T, D)`` float32 unit embeddings, or ``None`` (none given yet).
        t: the last frame's time (``None``: no frame yet).
        frames: frames tracked.
        first_id: the first id this tracker handed out; next_id: the next one.
    """

    kf: np.ndarray
    state: np.ndarray
    ids: np.ndarray
    hits: np.ndarray
    last_t: np.ndarray
    cls: np.ndarray
    emb: np.ndarray | None
    t: float | None
    frames: int
    first_id: int
    next_id: int

    def __len__(self) -> int:
        return int(self.state.shape[0])
