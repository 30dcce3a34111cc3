"""Lines and polygons rasterised as masks, for the static layer of an annotator (built once per
frame size and device, so speed matters less than being right).

Pixel ``(x, y)`` is the point at integer coordinates (OpenCV's convention). A line of
``thickness`` covers the pixels within ``h + 0.5`` of the segment, ``h = (thickness + 1) // 2``
(0 for thickness 1): a band of about ``2 * h + 1`` pixels with round caps, close to OpenCV's
``cv2.polylines`` (IoU >= 0.96 in the tests). A polygon's fill is the
even-odd rule at pixel points.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from vidpipe.draw.boxes import half_width

if TYPE_CHECKING:
    import torch

__all__ = ["segment_mask", "polyline_mask", "polygon_mask"]

Point = tuple[float, float]


def _radius(thickness: int) -> float:
    return half_width(thickness) + 0.5


def segment_mask(mask: "torch.Tensor", p0: Point, p1: Point, thickness: int) -> None:
    """Set the pixels of the segment ``p0 -> p1`` in the ``(H, W)`` bool ``mask`` (in place)."""
    import torch

    h, w = mask.shape
    r = _radius(thickness)
    xa, xb = sorted((p0[0], p1[0]))
    ya, yb = sorted((p0[1], p1[1]))
    x0, x1 = max(0, math.floor(xa - r)), min(w - 1, math.ceil(xb + r))
    y0, y1 = max(0, math.floor(ya - r)), min(h - 1, math.ceil(yb + r))
    if x0 > x1 or y0 > y1:
        return
    dev = mask.device
    ys = torch.arange(y0, y1 + 1, device=dev, dtype=torch.float64)[:, None]
    xs = torch.arange(x0, x1 + 1, device=dev, dtype=torch.float64)[None, :]
    dx, dy = p1[0] - p0[0], p1[1] - p0[1]
    ll = dx * dx + dy * dy
    t = ((xs - p0[0]) * dx + (ys - p0[1]) * dy) / ll if ll > 0 else torch.zeros_like(xs + ys)
    t = t.clamp(0, 1)
    ex, ey = xs - p0[0] - t * dx, ys - p0[1] - t * dy
    d2 = ex * ex + ey * ey
    mask[y0 : y1 + 1, x0 : x1 + 1] |= d2 <= r * r + 1e-9


def polyline_mask(mask: "torch.Tensor", points: Sequence[Point], thickness: int, *, closed: bool) -> None:
    """Set the pixels of the polyline through ``points`` (closed: back to the first) in ``mask``."""
    pts = list(points)
    pairs = list(zip(pts, pts[1:] + pts[:1])) if closed else list(zip(pts, pts[1:]))
    for a, b in pairs:
        segment_mask(mask, a, b, thickness)


def polygon_mask(mask: "torch.Tensor", points: Sequence[Point]) -> None:
    """Set the pixels inside the polygon (even-odd rule at pixel points, its bounding box only)."""
    import torch

    h, w = mask.shape
    xs_, ys_ = [p[0] for p in points], [p[1] for p in points]
    x0, x1 = max(0, math.ceil(min(xs_))), min(w - 1, math.floor(max(xs_)))
    y0, y1 = max(0, math.ceil(min(ys_))), min(h - 1, math.floor(max(ys_)))
    if x0 > x1 or y0 > y1:
        return
    dev = mask.device
    py = torch.arange(y0, y1 + 1, device=dev, dtype=torch.float64)[:, None]
    px = torch.arange(x0, x1 + 1, device=dev, dtype=torch.float64)[None, :]
    inside = torch.zeros((y1 - y0 + 1, x1 - x0 + 1), dtype=torch.bool, device=dev)
    for (ax, ay), (bx, by) in zip(points, list(points[1:]) + [points[0]]):
        if ay == by:
            continue
        crosses = (ay > py) != (by > py)
        x_at = ax + (py - ay) * (bx - ax) / (by - ay)
        inside ^= crosses & (px < x_at)
    mask[y0 : y1 + 1, x0 : x1 + 1] |= inside
