"""Box outlines and filled rectangles as flat pixel writes, for all boxes at once (no host sync).

Outlines follow OpenCV's ``cv2.rectangle(img, (x1, y1), (x2, y2), colour, thickness)`` pixel for
pixel (checked in the tests): thickness 1 is a one-pixel line; thickness ``t > 1`` is a band of
``2 * h + 1`` pixels with ``h = (t + 1) // 2`` centred on each edge, plus a filled disc of radius
``h`` (``dx**2 + dy**2 <= h**2``) at each corner, as OpenCV's thick lines have round caps.

Shapes are fixed per frame size (each edge is laid out over the whole frame width or height and
masked), so the number of writes never depends on the data and nothing waits for the GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["half_width", "OutlineTemplate", "outline_template", "outline_writes", "rect_writes"]


def half_width(thickness: int) -> int:
    """Pixels each side of an edge that a line of ``thickness`` covers (OpenCV's rule)."""
    return 0 if thickness <= 1 else (thickness + 1) // 2


def _flat(ys: "torch.Tensor", xs: "torch.Tensor", ok: "torch.Tensor", h: int, w: int):
    ok = ok & (ys >= 0) & (ys < h) & (xs >= 0) & (xs < w)
    return (ys * w + xs) * ok, ok  # writes outside point at pixel 0 (their key will be -1)


@dataclass(frozen=True, repr=False)
class OutlineTemplate:
    """The pixels of one box outline relative to its corners, ``(K,)`` int64 each: a pixel is
    ``(anchor_x[ax] + dx, anchor_y[ay] + dy)`` with anchors ``(x1, x2, max(x1, 0))`` and
    ``(y1, y2, max(y1, 0))``, kept when ``step <= limit[along]`` (limits: the visible length
    along x, along y, none). Built once per thickness and span, reused for every frame."""

    ax: "torch.Tensor"
    dx: "torch.Tensor"
    ay: "torch.Tensor"
    dy: "torch.Tensor"
    along: "torch.Tensor"
    step: "torch.Tensor"


def outline_template(thickness: int, span_x: int, span_y: int, device: "torch.device | str" = "cpu") -> OutlineTemplate:
    """The template of outlines of ``thickness`` for boxes at most ``span_x`` x ``span_y`` pixels
    (the frame size needs no look at the data; a tighter bound only saves work)."""
    import torch

    hw = half_width(thickness)
    d = torch.arange(-hw, hw + 1)
    cols = {k: [] for k in ("ax", "dx", "ay", "dy", "along", "step")}

    def add(ax, dx, ay, dy, along, step) -> None:
        for k, v in zip(cols, (ax, dx, ay, dy, along, step)):
            cols[k].append(torch.as_tensor(v).expand_as(step).reshape(-1) if isinstance(v, int) else v.reshape(-1))

    off, i = torch.meshgrid(d, torch.arange(span_x), indexing="ij")
    for ay in (0, 1):  # top and bottom bands: rows y + d, columns max(x1, 0) + i up to x2
        add(2, i, ay, off, 0, i)
    off, i = torch.meshgrid(d, torch.arange(span_y), indexing="ij")
    for ax in (0, 1):  # left and right bands
        add(ax, off, 2, i, 1, i)
    if hw > 0:  # round corners: the disc dx**2 + dy**2 <= h**2
        gy, gx = torch.meshgrid(d, d, indexing="ij")
        inside = gx * gx + gy * gy <= hw * hw
        gy, gx = gy[inside], gx[inside]
        for ay in (0, 1):
            for ax in (0, 1):
                add(ax, gx, ay, gy, 2, torch.zeros_like(gx))
    return OutlineTemplate(**{k: torch.cat(v).to(device) for k, v in cols.items()})


def outline_writes(boxes: "torch.Tensor", template: OutlineTemplate, height: int, width: int):
    """Pixels of the outlines of ``boxes``.

    Args:
        boxes: ``(N, 4)`` int64 ``x1, y1, x2, y2`` (inclusive corners, any order within a box).
        template: :func:`outline_template` of the thickness, on ``boxes``' device.

    Returns:
        ``(index, ok)``: ``(N, K)`` int64 flat pixel indices and ``(N, K)`` bool (inside the frame
        and part of the outline; where not, the index is 0).
    """
    import torch

    x1 = torch.minimum(boxes[:, 0], boxes[:, 2])
    x2 = torch.maximum(boxes[:, 0], boxes[:, 2])
    y1 = torch.minimum(boxes[:, 1], boxes[:, 3])
    y2 = torch.maximum(boxes[:, 1], boxes[:, 3])
    x1c, y1c = x1.clamp(min=0), y1.clamp(min=0)
    ax = torch.stack((x1, x2, x1c), 1)
    ay = torch.stack((y1, y2, y1c), 1)
    limit = torch.stack((x2 - x1c, y2 - y1c, torch.full_like(x1, 1 << 40)), 1)
    t = template
    xs = ax[:, t.ax] + t.dx
    ys = ay[:, t.ay] + t.dy
    return _flat(ys, xs, t.step <= limit[:, t.along], height, width)


def rect_writes(x: "torch.Tensor", y: "torch.Tensor", w: "torch.Tensor", h: int, max_w: int, height: int, width: int):
    """Pixels of filled rectangles ``[x, x + w) x [y, y + h)`` (``w <= max_w``), for all at once.

    Args:
        x, y, w: ``(N,)`` int64 left, top and width of each rectangle; ``h``: the height (same for all).

    Returns:
        ``(index, ok)``: ``(N, h, max_w)`` flat pixel indices and mask (inside the rectangle and the frame).
    """
    import torch

    dev = x.device
    ry = torch.arange(h, device=dev)[None, :, None]
    rx = torch.arange(max_w, device=dev)[None, None, :]
    ys = y[:, None, None] + ry
    xs = x[:, None, None] + rx
    return _flat(ys.expand(-1, h, max_w), xs.expand(-1, h, max_w), (rx < w[:, None, None]).expand(-1, h, max_w), height, width)
