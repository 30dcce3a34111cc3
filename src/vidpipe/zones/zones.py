"""Zone membership per track, with hysteresis, and dwell time (:class:`ZoneState`, one stream).

A track **enters** a zone when its anchor is seen inside for ``hysteresis`` consecutive
observations (a track first seen inside enters too: it is now there), and **leaves** when it is
seen outside for ``hysteresis`` consecutive observations, or when it is forgotten (not seen for
the stage's ``forget_after`` seconds). Observations of a class the zone ignores, or frames where
the track is missing, neither extend nor break a run.

Dwell time is the stream's time (capture clock live, else pts, else index / fps) from the first
observation inside of the run that entered, to the last observation inside: dropped frames do
not shorten it and a slow stream does not stretch it. A ``"dwell"`` event is due once per visit,
at the first observation inside at which the dwell time reaches the zone's ``dwell`` threshold.

Occupancy now: the tracks that have entered and not left (a track that vanished inside a zone
counts until it is forgotten).
"""

from __future__ import annotations

import numpy as np

from vidpipe.zones.geometry import Zone, zone_edges

__all__ = ["ZoneState", "ZoneChange"]

#: (kind, row or slot, zone index, dwell seconds); ``row`` indexes the frame's tracks for
#: "enter"/"leave"/"dwell" from :meth:`ZoneState.update`, a slot for :meth:`ZoneState.forget`
ZoneChange = tuple[str, int, int, float]


class ZoneState:
    """Membership of the tracks of one stream in ``zones`` (arrays: one row per slot).

    Attributes:
        inside: ``(S, Z)`` bool, entered and not left.
        pending: ``(S, Z)`` int16, consecutive observations contradicting ``inside``.
        mark: ``(S, Z)`` float64, time of the first observation of the pending run.
        start: ``(S, Z)`` float64, when the current visit began (its first inside observation).
        last_in: ``(S, Z)`` float64, last observation inside.
        dwelled: ``(S, Z)`` bool, the visit's dwell event was sent.
    """

    def __init__(self, zones: "tuple[Zone, ...]", hysteresis: int) -> None:
        self.zones = zones
        self.hysteresis = hysteresis
        self.edges, self.starts = zone_edges(zones)
        self.thresholds = np.array([z.dwell if z.dwell is not None else np.inf for z in zones], dtype=np.float64)
        n = len(zones)
        self.inside = np.zeros((0, n), dtype=bool)
        self.pending = np.zeros((0, n), dtype=np.int16)
        self.mark = np.zeros((0, n))
        self.start = np.zeros((0, n))
        self.last_in = np.zeros((0, n))
        self.dwelled = np.zeros((0, n), dtype=bool)

    def grow(self, capacity: int) -> None:
        extra = capacity - self.inside.shape[0]
        n = len(self.zones)
        for name in ("inside", "pending", "mark", "start", "last_in", "dwelled"):
            arr = getattr(self, name)
            setattr(self, name, np.concatenate([arr, np.zeros((extra, n), dtype=arr.dtype)]))

    def clear(self, slots: np.ndarray) -> None:
        self.inside[slots] = False
        self.pending[slots] = 0
        self.dwelled[slots] = False

    def occupancy(self) -> np.ndarray:
        """``(Z,)`` int64: tracks in each zone now."""
        return np.count_nonzero(self.inside, axis=0).astype(np.int64)

    def open_dwell(self) -> list[tuple[int, float]]:
        """``(zone index, dwell so far)`` of every visit still open."""
        r, c = np.nonzero(self.inside)
        return list(zip(c.tolist(), (self.last_in[r, c] - self.start[r, c]).tolist()))

    def update(self, slots: np.ndarray, inside: np.ndarray, applies: np.ndarray, t: float) -> list[ZoneChange]:
        """One frame at time ``t``: ``slots`` ``(n,)``, whether each anchor is ``inside`` each zone
        ``(n, Z)`` (:func:`~vidpipe.zones.geometry.points_in_edges`), ``applies`` ``(n, Z)``.
        Returns enters, leaves and dwells, ``(kind, row, zone index, dwell_s)``."""
        if not len(self.zones) or not len(slots):
            return []
        now_in = inside
        was = self.inside[slots]
        pend = self.pending[slots].astype(np.int32)
        agree = applies & (now_in == was)
        differ = applies & (now_in != was)
        starting = differ & (pend == 0)
        if starting.any():
            r, c = np.nonzero(starting)
            self.mark[slots[r], c] = t
        pend = np.where(differ, pend + 1, np.where(agree, 0, pend))
        flip = differ & (pend >= self.hysteresis)
        pend = np.where(flip, 0, pend)
        self.pending[slots] = pend
        seen_in = applies & now_in
        if seen_in.any():
            r, c = np.nonzero(seen_in)
            self.last_in[slots[r], c] = t
        changes: list[ZoneChange] = []
        if flip.any():
            r, c = np.nonzero(flip)
            entering = now_in[r, c]
            for k in np.lexsort((r, c)).tolist():
                row, z = int(r[k]), int(c[k])
                s = slots[row]
                if entering[k]:
                    self.inside[s, z] = True
                    self.start[s, z] = self.mark[s, z]
                    self.dwelled[s, z] = False
                    changes.append(("enter", row, z, 0.0))
                else:
                    self.inside[s, z] = False
                    changes.append(("leave", row, z, float(self.last_in[s, z] - self.start[s, z])))
        due = seen_in & self.inside[slots] & ~self.dwelled[slots]
        if due.any():
            r, c = np.nonzero(due)
            dwell = t - self.start[slots[r], c]
            over = dwell >= self.thresholds[c]
            for k in np.flatnonzero(over).tolist():
                self.dwelled[slots[r[k]], c[k]] = True
                changes.append(("dwell", int(r[k]), int(c[k]), float(dwell[k])))
        return changes

    def forget(self, slots: np.ndarray) -> list[ZoneChange]:
        """Tracks that ended: a leave for each zone they were in, ``(kind, slot, zone, dwell_s)``."""
        if not len(self.zones) or not len(slots):
            return []
        r, c = np.nonzero(self.inside[slots])
        out = [("leave", int(slots[i]), int(z), float(self.last_in[slots[i], z] - self.start[slots[i], z]))
               for i, z in zip(r.tolist(), c.tolist())]
        self.clear(slots)
        return out
