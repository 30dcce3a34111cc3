"""Per-stream table of the tracks a zones stage remembers: track id -> slot of its state arrays.

The line and zone states are arrays with one row per slot (:class:`~vidpipe.zones.lines.LineState`,
:class:`~vidpipe.zones.zones.ZoneState`), so a frame's update is a few numpy operations over all
its detections. A slot is freed when its track has not been seen for ``forget_after`` seconds of
the stream's time, so a stream that runs for days keeps only the tracks of the last seconds.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["TrackSlots"]


class TrackSlots:
    """Track ids -> slots, with the time each track was last seen and its last class.

    ``on_grow(capacity)`` is called when the arrays grow (the states grow theirs along).
    """

    def __init__(self, on_grow: Callable[[int], None], capacity: int = 64) -> None:
        self._on_grow = on_grow
        self.slot_of: dict[int, int] = {}
        self._free: list[int] = list(range(capacity - 1, -1, -1))
        self.capacity = capacity
        self.track_id = np.full(capacity, -1, dtype=np.int64)
        self.class_id = np.zeros(capacity, dtype=np.int64)
        self.last_seen = np.full(capacity, np.nan)
        on_grow(capacity)

    def __len__(self) -> int:
        return len(self.slot_of)

    def lookup(self, track_ids: np.ndarray, class_ids: np.ndarray, t: float) -> np.ndarray:
        """Slots of ``track_ids`` (``(n,)`` int64, unique, >= 0; new tracks get free slots), their
        last-seen time set to ``t`` and class to ``class_ids``. -> ``(n,)`` int64."""
        slots = np.empty(len(track_ids), dtype=np.int64)
        get = self.slot_of.get
        for i, tid in enumerate(track_ids.tolist()):
            s = get(tid)
            if s is None:
                if not self._free:
                    self._grow()
                s = self._free.pop()
                self.slot_of[tid] = s
                self.track_id[s] = tid
            slots[i] = s
        self.last_seen[slots] = t
        self.class_id[slots] = class_ids
        return slots

    def stale(self, t: float, forget_after: float) -> np.ndarray:
        """Slots of tracks not seen for more than ``forget_after`` seconds at time ``t``."""
        if not self.slot_of:
            return np.zeros(0, dtype=np.int64)
        with np.errstate(invalid="ignore"):
            return np.flatnonzero(t - self.last_seen > forget_after)

    def release(self, slots: np.ndarray) -> None:
        for s in slots.tolist():
            del self.slot_of[int(self.track_id[s])]
            self.track_id[s] = -1
            self.last_seen[s] = np.nan
            self._free.append(s)

    def _grow(self) -> None:
        old = self.capacity
        new = old * 2
        self.track_id = np.concatenate([self.track_id, np.full(old, -1, dtype=np.int64)])
        self.class_id = np.concatenate([self.class_id, np.zeros(old, dtype=np.int64)])
        self.last_seen = np.concatenate([self.last_seen, np.full(old, np.nan)])
        self._free.extend(range(new - 1, old - 1, -1))
        self.capacity = new
        self._on_grow(new)
