"""Privacy blur: box regions pixelated on the image's device, all boxes at once, no host sync.

Each box (widened to whole pixels: ``floor(x1), floor(y1)`` to ``ceil(x2), ceil(y2)``, clipped to
the frame) is cut into ``cells x cells`` blocks (8 x 8 by default: a face becomes 64 flat
patches) and every pixel takes the mean colour of its block (rounded, exact integer arithmetic
over an integral image, so CPU and CUDA give the same bytes). Where boxes overlap, the first box
in row order wins. Pixels outside every box are not touched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vidpipe.draw.paint import host_reads_free
from vidpipe.errors import ConfigError

if TYPE_CHECKING:
    import torch

__all__ = ["blur_boxes", "pixelate"]

_CHUNK = 62  # boxes per int64 bit mask


def _owner(rows_in: "torch.Tensor", cols_in: "torch.Tensor") -> "torch.Tensor":
    """``(H, W)`` int64: the first box covering each pixel, -1 for none (``rows_in`` ``(N, H)``,
    ``cols_in`` ``(N, W)`` bool): one bit per box, lowest set bit, in chunks of 62 boxes."""
    import torch

    n, h = rows_in.shape
    w = cols_in.shape[1]
    owner = torch.full((h, w), -1, dtype=torch.int64, device=rows_in.device)
    for c in range(0, n, _CHUNK):
        r, cl = rows_in[c : c + _CHUNK].long(), cols_in[c : c + _CHUNK].long()
        shift = torch.arange(r.shape[0], device=r.device)[:, None]
        bits = (r << shift).sum(0)[:, None] & (cl << shift).sum(0)[None, :]
        first = torch.frexp((bits & -bits).double()).exponent.long() - 1  # -1 where no bit
        owner = torch.where((owner < 0) & (first >= 0), first + c, owner)
    return owner


def pixelate(image: "torch.Tensor", boxes: "torch.Tensor", active: "torch.Tensor | None" = None, *, cells: int = 8):
    """A copy of ``image`` ``(3, H, W)`` uint8 with the ``boxes`` ``(N, 4)`` (float, same device)
    pixelated; ``active`` ``(N,)`` bool picks which boxes (default: all).

    On CUDA: fixed-shape ops over the whole frame (no look at the data, no sync). On the CPU,
    where reading the boxes costs nothing: one small block of ops per active box (same bytes).
    """
    if boxes.shape[0] == 0:
        return image.clone()
    b = boxes.double()
    if not host_reads_free(image.device):
        return _pixelate(image, b, active, cells)
    return _pixelate_each(image, b, active, cells)


def _edges(b: "torch.Tensor", active: "torch.Tensor | None", h: int, w: int, cells: int):
    """Whole-pixel boxes clipped to the frame (inactive ones empty) and their block edges
    ``(N, cells + 1)`` along x and y."""
    import torch

    x1 = b[:, 0].floor().clamp(0, w).long()
    y1 = b[:, 1].floor().clamp(0, h).long()
    x2 = torch.maximum(b[:, 2].ceil().clamp(0, w).long(), x1)
    y2 = torch.maximum(b[:, 3].ceil().clamp(0, h).long(), y1)
    if active is not None:
        x2 = torch.where(active, x2, x1)
    k = torch.arange(cells + 1, device=b.device)
    xb = x1[:, None] + (k * (x2 - x1)[:, None]) // cells
    yb = y1[:, None] + (k * (y2 - y1)[:, None]) // cells
    return x1, y1, x2, y2, xb, yb


def _block_means(ii: "torch.Tensor", xb: "torch.Tensor", yb: "torch.Tensor") -> "torch.Tensor":
    """``(3, N, G, G)`` rounded block means from an integral image ``ii`` ``(3, H + 1, W + 1)``."""
    ya, yz = yb[:, :-1, None], yb[:, 1:, None]
    xa, xz = xb[:, None, :-1], xb[:, None, 1:]
    sums = ii[:, yz, xz] - ii[:, ya, xz] - ii[:, yz, xa] + ii[:, ya, xa]
    area = ((yz - ya) * (xz - xa)).clamp(min=1)
    return (sums + area // 2) // area


def _integral(image: "torch.Tensor") -> "torch.Tensor":
    import torch

    _, h, w = image.shape
    ii = torch.zeros((3, h + 1, w + 1), dtype=torch.int32, device=image.device)
    ii[:, 1:, 1:] = image.to(torch.int32).cumsum(1, dtype=torch.int32).cumsum(2, dtype=torch.int32)
    return ii


def _pixelate_each(image: "torch.Tensor", b: "torch.Tensor", active: "torch.Tensor | None", cells: int):
    """CPU: box by box, the last first, so the first box in row order ends on top."""
    import torch

    _, h, w = image.shape
    x1, y1, x2, y2, xb, yb = _edges(b, active, h, w, cells)
    out = image.clone()
    rows = torch.nonzero((x2 > x1) & (y2 > y1)).reshape(-1).tolist()
    for i in reversed(rows):
        xa, ya = int(x1[i]), int(y1[i])
        region = image[:, ya : int(y2[i]), xa : int(x2[i])]
        means = _block_means(_integral(region), xb[i : i + 1] - xa, yb[i : i + 1] - ya)[:, 0]  # (3, G, G)
        tile = means.repeat_interleave(torch.diff(yb[i]), dim=1).repeat_interleave(torch.diff(xb[i]), dim=2)
        out[:, ya : int(y2[i]), xa : int(x2[i])] = tile.to(torch.uint8)
    return out


def _pixelate(image: "torch.Tensor", b: "torch.Tensor", active: "torch.Tensor | None", cells: int):
    """Any device: fixed-shape ops over the whole frame; the first box covering a pixel wins."""
    import torch

    _, h, w = image.shape
    n = b.shape[0]
    dev = image.device
    x1, y1, x2, y2, xb, yb = _edges(b, active, h, w, cells)
    means = _block_means(_integral(image), xb, yb).to(torch.uint8).reshape(3, -1)
    ys, xs = torch.arange(h, device=dev), torch.arange(w, device=dev)
    rows_in = (ys >= y1[:, None]) & (ys < y2[:, None])
    cols_in = (xs >= x1[:, None]) & (xs < x2[:, None])
    owner = _owner(rows_in, cols_in)
    cy = torch.searchsorted(yb[:, 1:].contiguous(), ys.expand(n, h).contiguous(), right=True).clamp(max=cells - 1)
    cx = torch.searchsorted(xb[:, 1:].contiguous(), xs.expand(n, w).contiguous(), right=True).clamp(max=cells - 1)
    o = owner.clamp(min=0)
    cell = (o * cells + cy.reshape(-1)[o * h + ys[:, None]]) * cells + cx.reshape(-1)[o * w + xs[None, :]]
    return torch.where(owner >= 0, means[:, cell], image)


def blur_boxes(image: "torch.Tensor", boxes: Any, *, cells: int = 8) -> "torch.Tensor":
    """Privacy blur: a NEW ``(3, H, W)`` uint8 tensor (on ``image``'s device) with each box region
    pixelated into ``cells x cells`` blocks; ``image`` is not modified.

    Args:
        image: ``(3, H, W)`` uint8 RGB on any device.
        boxes: ``(N, 4)`` ``x1, y1, x2, y2`` in ``image``'s pixels (a tensor on any device, moved
            once, or a nested sequence / numpy array).
        cells: blocks along each side of a box (2..64; fewer is stronger).

    Raises:
        ConfigError: ``image``, ``boxes`` or ``cells`` is not of that form.
    """
    import torch

    _check_image(image, "image")
    if isinstance(cells, bool) or not isinstance(cells, int) or not 2 <= cells <= 64:
        raise ConfigError(f"blur_boxes: cells must be an int in 2..64, got {cells!r}")
    try:
        bx = torch.as_tensor(boxes, dtype=torch.float64).to(image.device)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise ConfigError(f"blur_boxes: boxes must be (N, 4) numbers x1, y1, x2, y2, got {type(boxes).__name__}: {exc}") from None
    if bx.numel() == 0:
        bx = bx.reshape(0, 4)
    if bx.ndim != 2 or bx.shape[1] != 4:
        raise ConfigError(f"blur_boxes: boxes must be (N, 4) x1, y1, x2, y2, got shape {tuple(bx.shape)}")
    return pixelate(image, bx, cells=cells)


def _check_image(image: Any, what: str) -> None:
    import torch

    if not isinstance(image, torch.Tensor) or image.ndim != 3 or image.shape[0] != 3 or image.dtype != torch.uint8:
        got = f"{tuple(image.shape)} {image.dtype}" if isinstance(image, torch.Tensor) else type(image).__name__
        raise ConfigError(f"{what} must be a (3, H, W) uint8 RGB tensor, got {got}")
