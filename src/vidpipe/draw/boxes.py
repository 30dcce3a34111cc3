"""Box outlines and filled rectangles as flat pixel writes, for all boxes at once (no host sync).

Outlines follow OpenCV's ``cv2.rectangle(img, (x1, y1), (x2, y2), colour, thickness)`` pixel for
pixel (checked in the tests): thickness 1 is a one-pixel line; thickness ``t > 1`` is a band of
``2 * h + 1`` pixels with ``h = (t + 1) // 2`` centred on each edge, plus a filled disc of radius
``h`` (``dx**2 + dy**2 <= h**2``) at each corner, as OpenCV's thick lines have round caps.

Shapes are fixed per frame size (each edge is laid out over the whole frame width or height and
masked), so the number of writes never depends on the data and nothing waits for the GPU.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["half_width", "outline_writes", "rect_writes"]


def half_width(thickness: int) -> int:
    """Pixels each side of an edge that a line of ``thickness`` covers (OpenCV's rule)."""
    return 0 if thickness <= 1 else (thickness + 1) // 2


def _flat(ys: "torch.Tensor", xs: "torch.Tensor", ok: "torch.Tensor", h: int, w: int):
    ok = ok & (ys >= 0) & (ys < h) & (xs >= 0) & (xs < w)
    return (ys * w + xs) * ok, ok  # writes outside point at pixel 0 (their key will be -1)


def outline_writes(boxes: "torch.Tensor", thickness: int, height: int, width: int, *, span: tuple[int, int] | None = None):
    """Pixels of the outlines of ``boxes``.

    Args:
        boxes: ``(N, 4)`` int64 ``x1, y1, x2, y2`` (inclusive corners, any order within a box).
        span: ``(max_w, max_h)``: no box is longer than this along x and y (the default, the
            frame size, needs no look at the data; a tighter bound only saves work).

    Returns:
        ``(index, ok)``: ``(N, M)`` int64 flat pixel indices and ``(N, M)`` bool (inside the frame
        and part of the outline), ``M`` fixed by ``thickness`` and the frame size.
    """
    import torch

    dev = boxes.device
    x1 = torch.minimum(boxes[:, 0], boxes[:, 2])[:, None]
    x2 = torch.maximum(boxes[:, 0], boxes[:, 2])[:, None]
    y1 = torch.minimum(boxes[:, 1], boxes[:, 3])[:, None]
    y2 = torch.maximum(boxes[:, 1], boxes[:, 3])[:, None]
    n = boxes.shape[0]
    hw = half_width(thickness)
    d = torch.arange(-hw, hw + 1, device=dev)  # (2h+1,)
    sw, sh = span if span is not None else (width, height)
    span_x = torch.arange(min(sw, width), device=dev)
    span_y = torch.arange(min(sh, height), device=dev)
    parts = []
    # horizontal bands (top, bottom): rows y + d, columns x1..x2
    for y in (y1, y2):
        ys = (y + d)[:, :, None].expand(n, d.numel(), span_x.numel())
        xs = (x1.clamp(min=0) + span_x)[:, None, :].expand(n, d.numel(), span_x.numel())
        parts.append(_flat(ys, xs, xs <= x2[:, :, None], height, width))
    # vertical bands (left, right): columns x + d, rows y1..y2
    for x in (x1, x2):
        xs = (x + d)[:, :, None].expand(n, d.numel(), span_y.numel())
        ys = (y1.clamp(min=0) + span_y)[:, None, :].expand(n, d.numel(), span_y.numel())
        parts.append(_flat(ys, xs, ys <= y2[:, :, None], height, width))
    if hw > 0:  # round corners
        g = torch.arange(-hw, hw + 1, device=dev)
        dy, dx = torch.meshgrid(g, g, indexing="ij")
        inside = (dx * dx + dy * dy <= hw * hw).reshape(-1)
        dy, dx = dy.reshape(-1), dx.reshape(-1)
        for y in (y1, y2):
            for x in (x1, x2):
                ys, xs = y + dy, x + dx  # (N, D)
                parts.append(_flat(ys, xs, inside.expand_as(ys), height, width))
    index = torch.cat([p[0].reshape(n, -1) for p in parts], 1)
    ok = torch.cat([p[1].reshape(n, -1) for p in parts], 1)
    return index, ok


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
