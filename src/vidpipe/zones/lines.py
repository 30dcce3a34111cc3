"""Line crossing per track, with hysteresis (:class:`LineState`, the state of one stream).

A track's anchor is on a line's **in** side (+1) or **out** side (-1). The first side a track is
seen on is its side. It has crossed when it is seen on the other side for ``hysteresis``
consecutive observations **and** its path, from its last point on the old side to its first
point on the new one, cuts the segment itself (not the infinite line: going round the end of a
line is no crossing). Observations exactly on the line, of a class the line ignores, or frames
where the track is missing neither extend nor break the run. A track that jitters across the
line and back within fewer than ``hysteresis`` observations never counts.

Compared with ``supervision.LineZone(minimum_crossing_threshold=k)``: the same sides and
hysteresis; supervision counts a move anywhere within the strip perpendicular to the segment
and ignores anchors outside that strip, this counts a move whose path cuts the segment. Both
use one anchor here (supervision's default is the four corners).
"""

from __future__ import annotations

import numpy as np

from vidpipe.zones.geometry import Line, line_array, line_sides, segments_cross

__all__ = ["LineState"]


class LineState:
    """Crossing state of the tracks of one stream over ``lines`` (arrays: one row per slot).

    Attributes:
        side: ``(S, L)`` int8, the confirmed side (+1 in, -1 out, 0 not seen yet).
        pending: ``(S, L)`` int16, consecutive observations on the other side.
        ref: ``(S, L, 2)`` float64, the last point on the confirmed side.
        valid: ``(S, L)`` bool, the move onto the other side cut the segment.
    """

    def __init__(self, lines: "tuple[Line, ...]", hysteresis: int) -> None:
        self.lines = lines
        self.segs = line_array(lines)
        self.hysteresis = hysteresis
        n = len(lines)
        self.side = np.zeros((0, n), dtype=np.int8)
        self.pending = np.zeros((0, n), dtype=np.int16)
        self.ref = np.zeros((0, n, 2))
        self.valid = np.zeros((0, n), dtype=bool)

    def grow(self, capacity: int) -> None:
        extra = capacity - self.side.shape[0]
        n = len(self.lines)
        self.side = np.concatenate([self.side, np.zeros((extra, n), dtype=np.int8)])
        self.pending = np.concatenate([self.pending, np.zeros((extra, n), dtype=np.int16)])
        self.ref = np.concatenate([self.ref, np.zeros((extra, n, 2))])
        self.valid = np.concatenate([self.valid, np.zeros((extra, n), dtype=bool)])

    def clear(self, slots: np.ndarray) -> None:
        self.side[slots] = 0
        self.pending[slots] = 0
        self.valid[slots] = False

    def update(self, slots: np.ndarray, points: np.ndarray, sides: np.ndarray | None,
               applies: np.ndarray) -> list[tuple[int, int, int]]:
        """One frame: ``slots`` ``(n,)`` of its tracks, their anchor ``points`` ``(n, 2)``, their
        ``sides`` ``(n, L)`` (:func:`~vidpipe.zones.geometry.line_sides`; ``None``: computed
        here), and ``applies`` ``(n, L)`` (the line counts the detection's class).

        Returns:
            The crossings, ``(row, line index, direction)`` with direction +1 (in) or -1 (out),
            in line then row order.
        """
        if not len(self.lines) or not len(slots):
            return []
        s = line_sides(points, self.segs) if sides is None else sides  # (n, L)
        cur = self.side[slots]
        pend = self.pending[slots].astype(np.int32)
        obs = (s != 0) & applies
        first_seen = obs & (cur == 0)
        same = obs & (cur == s)
        other = obs & (cur != 0) & (cur != s)
        starting = other & (pend == 0)
        if starting.any():
            r, c = np.nonzero(starting)
            ok = segments_cross(self.ref[slots[r], c], points[r], self.segs[c])
            self.valid[slots[r], c] = ok
        pend = np.where(other, pend + 1, np.where(same, 0, pend))
        confirm = other & (pend >= self.hysteresis)
        crossed: list[tuple[int, int, int]] = []
        if confirm.any():
            r, c = np.nonzero(confirm)
            counted = self.valid[slots[r], c]
            order = np.lexsort((r, c))
            for k in order.tolist():
                if counted[k]:
                    crossed.append((int(r[k]), int(c[k]), int(s[r[k], c[k]])))
        settle = first_seen | same | confirm
        new_side = np.where(settle, s, cur)
        pend = np.where(confirm, 0, pend)
        self.side[slots] = new_side
        self.pending[slots] = pend
        if settle.any():
            r, c = np.nonzero(settle)
            self.ref[slots[r], c] = points[r]
        return crossed
