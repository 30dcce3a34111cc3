"""The shapes of lines and zones, and the vectorised tests over all detections of a frame.

Coordinates are source pixels, ``x`` to the right and ``y`` down (the boxes' system).

- :class:`Line`: a segment ``A -> B``. Its **in** side is the one on the left of ``A -> B`` as
  drawn on the image (``cross(B - A, P - A) < 0`` with ``y`` down), the same convention as
  ``supervision.LineZone``: a line drawn left to right counts objects moving up the image as
  ``"in"``. Swap the two points to swap the sides.
- :class:`Zone`: a simple polygon (3 or more vertices, in order); inside is the even-odd rule.
- Anchors: the point of a box that stands for the object (:data:`ANCHORS`), bottom centre by
  default (where a person or a car touches the ground).

All functions take ``numpy`` arrays on the host: ``(N, 4)`` float boxes, ``(N, 2)`` float points.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
import numpy as np

from vidpipe.errors import ConfigError
from vidpipe.zones.anchors import ANCHORS, Anchor

__all__ = [
    "ANCHORS",
    "Anchor",
    "Line",
    "Zone",
    "anchor_points",
    "line_sides",
    "points_in_zones",
    "segments_cross",
]

def _finite_points(owner: str, points: object, minimum: int) -> tuple[tuple[float, float], ...]:
    try:
        pts = tuple((float(x), float(y)) for x, y in points)  # type: ignore[misc, union-attr]
    except (TypeError, ValueError):
        raise ConfigError(f"{owner}: expected points as (x, y) pairs of numbers, got {points!r}") from None
    if len(pts) < minimum:
        raise ConfigError(f"{owner}: expected at least {minimum} points, got {len(pts)}")
    if not all(math.isfinite(v) for p in pts for v in p):
        raise ConfigError(f"{owner}: the points must be finite numbers, got {pts}")
    return pts


def _classes(owner: str, classes: object) -> tuple[str | int, ...] | None:
    if classes is None:
        return None
    items = [c.strip() for c in classes.split(",")] if isinstance(classes, str) else list(classes)  # type: ignore[call-overload]
    out: list[str | int] = []
    for c in items:
        if isinstance(c, bool) or not isinstance(c, (str, int)) or (isinstance(c, str) and not c):
            raise ConfigError(f"{owner}: classes must be class names or ids, got {c!r}")
        out.append(c)
    if not out:
        raise ConfigError(f"{owner}: classes is empty; leave it out to count every class")
    return tuple(out)


@dataclass(frozen=True)
class Line:
    """A counting line: the segment from ``start`` to ``end`` (source pixels).

    Attributes:
        name: names its counts and events.
        start, end: ``(x, y)``; the **in** side is on the left of ``start -> end`` as drawn.
        classes: count only these classes (names or ids); ``None``: every class.
    """

    name: str
    start: tuple[float, float]
    end: tuple[float, float]
    classes: tuple[str | int, ...] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigError(f"Line: name must be a non-empty text, got {self.name!r}")
        a, b = _finite_points(f"line {self.name!r}", (self.start, self.end), 2)
        if a == b:
            raise ConfigError(f"line {self.name!r}: start and end are the same point {a}; a line needs two")
        object.__setattr__(self, "start", a)
        object.__setattr__(self, "end", b)
        object.__setattr__(self, "classes", _classes(f"line {self.name!r}", self.classes))


@dataclass(frozen=True)
class Zone:
    """A zone: a polygon (source pixels), vertices in order.

    Attributes:
        name: names its counts and events.
        points: 3 or more ``(x, y)``.
        classes: watch only these classes (names or ids); ``None``: every class.
        dwell: seconds in the zone after which a ``"dwell"`` event is sent (once per visit);
            ``None``: no dwell events (dwell times are still measured).
    """

    name: str
    points: tuple[tuple[float, float], ...]
    classes: tuple[str | int, ...] | None = None
    dwell: float | None = None
    _edges: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigError(f"Zone: name must be a non-empty text, got {self.name!r}")
        pts = _finite_points(f"zone {self.name!r}", self.points, 3)
        arr = np.asarray(pts, dtype=np.float64)
        area = 0.5 * float(np.sum(arr[:, 0] * np.roll(arr[:, 1], -1) - np.roll(arr[:, 0], -1) * arr[:, 1]))
        if abs(area) < 1e-9:
            raise ConfigError(f"zone {self.name!r}: the polygon {pts} encloses no area")
        object.__setattr__(self, "points", pts)
        object.__setattr__(self, "classes", _classes(f"zone {self.name!r}", self.classes))
        if self.dwell is not None:
            if isinstance(self.dwell, bool) or not isinstance(self.dwell, (int, float)) or not self.dwell > 0 \
                    or not math.isfinite(self.dwell):
                raise ConfigError(f"zone {self.name!r}: dwell must be a number of seconds > 0, got {self.dwell!r}")
            object.__setattr__(self, "dwell", float(self.dwell))
        object.__setattr__(self, "_edges", np.concatenate([arr, np.roll(arr, -1, axis=0)], axis=1))  # (E, 4)


def anchor_points(boxes: np.ndarray, anchor: str) -> np.ndarray:
    """``(N, 4)`` xyxy boxes -> ``(N, 2)`` float64 anchor points."""
    fx, fy = ANCHORS[anchor]
    b = np.asarray(boxes, dtype=np.float64)
    x = b[:, 0] + fx * (b[:, 2] - b[:, 0])
    y = b[:, 1] + fy * (b[:, 3] - b[:, 1])
    return np.stack([x, y], axis=1)


def line_array(lines: "tuple[Line, ...] | list[Line]") -> np.ndarray:
    """``(L, 4)`` float64 ``ax, ay, bx, by`` of ``lines``."""
    return np.asarray([(*ln.start, *ln.end) for ln in lines], dtype=np.float64).reshape(-1, 4)


def line_sides(points: np.ndarray, segs: np.ndarray) -> np.ndarray:
    """``(N, 2)`` points, ``(L, 4)`` segments -> ``(N, L)`` int8: ``+1`` on the in side, ``-1``
    on the out side, ``0`` exactly on the (infinite) line."""
    ax, ay, bx, by = (segs[:, i][None, :] for i in range(4))
    px, py = points[:, 0:1], points[:, 1:2]
    cross = (bx - ax) * (py - ay) - (by - ay) * (px - ax)
    return (-np.sign(cross)).astype(np.int8)  # cross < 0: in (+1)


def segments_cross(p: np.ndarray, q: np.ndarray, segs: np.ndarray) -> np.ndarray:
    """Whether the moves ``p[k] -> q[k]`` cross their segment ``segs[k]`` (``(K, 2)``,
    ``(K, 2)``, ``(K, 4)`` -> ``(K,)`` bool). ``p`` and ``q`` are on opposite sides of the
    infinite line (the caller knows); this checks the crossing point lies on the segment,
    its end points included."""
    a, b = segs[:, 0:2], segs[:, 2:4]
    d = q - p
    e = b - a
    denom = d[:, 0] * e[:, 1] - d[:, 1] * e[:, 0]
    w = a - p
    with np.errstate(divide="ignore", invalid="ignore"):
        u = (w[:, 0] * d[:, 1] - w[:, 1] * d[:, 0]) / denom  # position along the segment, 0..1
    return np.isfinite(u) & (u >= -1e-9) & (u <= 1 + 1e-9)


def zone_edges(zones: "tuple[Zone, ...] | list[Zone]") -> tuple[np.ndarray, np.ndarray]:
    """All edges of ``zones`` stacked, ``(E, 4)`` ``x1, y1, x2, y2``, and the index of each
    zone's first edge ``(Z,)`` (for :func:`points_in_edges`)."""
    if not zones:
        return np.zeros((0, 4)), np.zeros(0, dtype=np.int64)
    edges = np.concatenate([z._edges for z in zones])
    starts = np.cumsum([0] + [len(z._edges) for z in zones[:-1]]).astype(np.int64)
    return edges, starts


def points_in_edges(points: np.ndarray, edges: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """``(N, 2)`` points -> ``(N, Z)`` bool, inside each polygon of :func:`zone_edges` (even-odd
    rule, all zones in one pass; a point exactly on an edge may fall either way)."""
    n = points.shape[0]
    if n == 0 or not len(starts):
        return np.zeros((n, len(starts)), dtype=bool)
    px, py = points[:, 0:1], points[:, 1:2]  # (N, 1)
    x1, y1, x2, y2 = edges[:, 0][None], edges[:, 1][None], edges[:, 2][None], edges[:, 3][None]
    straddles = (y1 > py) != (y2 > py)  # (N, E)
    with np.errstate(divide="ignore", invalid="ignore"):
        x_at = x1 + (py - y1) * (x2 - x1) / (y2 - y1)
    hits = (straddles & (px < x_at)).view(np.int8)
    return (np.add.reduceat(hits, starts, axis=1) & 1).astype(bool)


def points_in_zones(points: np.ndarray, zones: "tuple[Zone, ...] | list[Zone]") -> np.ndarray:
    """``(N, 2)`` points -> ``(N, Z)`` bool, inside each zone (even-odd rule; a point exactly on
    an edge may fall either way)."""
    return points_in_edges(points, *zone_edges(zones))
