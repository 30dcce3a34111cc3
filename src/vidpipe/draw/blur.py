"""Privacy blur of box regions on the image's device, all boxes at once, no host sync on CUDA.

Each box (widened to whole pixels: ``floor(x1), floor(y1)`` to ``ceil(x2), ceil(y2)``, clipped to
the frame) is reduced to a grid of ``cells x cells`` block means (8 x 8 by default: a face keeps
64 colours, nothing recognisable), which is stretched back over the box with bilinear
interpolation between block centres: a smooth, detail-free patch rather than a mosaic whose
block edges would stay sharp. Exact integer arithmetic (an integral image for the means, 8-bit
interpolation weights), so CPU and CUDA give the same bytes. Where boxes overlap, the first box
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
    blurred (see the module docstring); ``active`` ``(N,)`` bool picks which boxes (default: all).

    On CUDA: fixed-shape ops over the whole frame (no look at the data, no sync). On the CPU,
    where reading the boxes costs nothing: one small block of ops per active box (same bytes).
    """
    if boxes.shape[0] == 0:
        return image.clone()
    b = boxes.double()
    if not host_reads_free(image.device):
        return _blur_frame(image, b, active, cells)
    return _blur_each(image, b, active, cells)


def _edges(b: "torch.Tensor", active: "torch.Tensor | None", h: int, w: int, cells: int):
    """Whole-pixel boxes clipped to the frame (inactive ones empty), the grid size per box along
    x and y (``min(cells, side)``, at least 1) and the block edges ``(N, cells + 1)``."""
    import torch

    x1 = b[:, 0].floor().clamp(0, w).long()
    y1 = b[:, 1].floor().clamp(0, h).long()
    x2 = torch.maximum(b[:, 2].ceil().clamp(0, w).long(), x1)
    y2 = torch.maximum(b[:, 3].ceil().clamp(0, h).long(), y1)
    if active is not None:
        x2 = torch.where(active, x2, x1)
    bw, bh = x2 - x1, y2 - y1
    gx, gy = bw.clamp(1, cells), bh.clamp(1, cells)
    k = torch.arange(cells + 1, device=b.device)
    xb = x1[:, None] + (torch.minimum(k, gx[:, None]) * bw[:, None]) // gx[:, None]
    yb = y1[:, None] + (torch.minimum(k, gy[:, None]) * bh[:, None]) // gy[:, None]
    return x1, y1, x2, y2, gx, gy, xb, yb


def _block_means(ii: "torch.Tensor", xb: "torch.Tensor", yb: "torch.Tensor") -> "torch.Tensor":
    """``(3, N, G, G)`` int32 rounded block means from an integral image ``ii`` ``(3, H + 1, W + 1)``."""
    import torch

    ya, yz = yb[:, :-1, None], yb[:, 1:, None]
    xa, xz = xb[:, None, :-1], xb[:, None, 1:]
    sums = (ii[:, yz, xz] - ii[:, ya, xz] - ii[:, yz, xa] + ii[:, ya, xa]).long()
    area = ((yz - ya) * (xz - xa)).clamp(min=1)
    return ((sums + area // 2) // area).to(torch.int32)


def _integral(image: "torch.Tensor") -> "torch.Tensor":
    import torch

    _, h, w = image.shape
    ii = torch.zeros((3, h + 1, w + 1), dtype=torch.int32, device=image.device)
    ii[:, 1:, 1:] = image.to(torch.int32).cumsum(1, dtype=torch.int32).cumsum(2, dtype=torch.int32)
    return ii


def _axis(local: "torch.Tensor", side: "torch.Tensor", grid: "torch.Tensor") -> "torch.Tensor":
    """Bilinear taps along one axis, packed: ``i0 | i1 << 6 | w1 << 12`` (int32), for pixel
    offsets ``local`` ``(N, L)`` into boxes of ``side`` pixels cut into ``grid`` blocks: blocks
    ``i0`` and ``i1`` (centres either side) and the weight of ``i1`` in 256ths."""
    import torch

    side, grid = side[:, None].clamp(min=1), grid[:, None]
    local = torch.minimum(local.clamp(min=0), side - 1)
    u = (2 * local + 1) * grid - side  # block-centre coordinate times 2 * side
    den = 2 * side
    i0 = torch.div(u, den, rounding_mode="floor")
    frac = u - i0 * den
    edge = (u < 0) | (i0 >= grid - 1)
    i0 = torch.where(u < 0, 0, torch.minimum(i0, grid - 1))
    i1 = torch.minimum(i0 + 1, grid - 1)
    w1 = torch.where(edge, 0, (frac * 256) // den)
    return (i0 | (i1 << 6) | (w1 << 12)).to(torch.int32)


def _mix(means: "torch.Tensor", base: "torch.Tensor", ty: "torch.Tensor", tx: "torch.Tensor", cells: int) -> "torch.Tensor":
    """Bilinear mix of block means ``(3, K)`` int32 (flat): ``base`` + block index, with packed
    taps ``ty``, ``tx`` (broadcastable to the output) -> uint8."""
    import torch

    y0, y1, wy = ty & 63, (ty >> 6) & 63, ty >> 12
    x0, x1, wx = tx & 63, (tx >> 6) & 63, tx >> 12
    r0, r1 = base + y0 * cells, base + y1 * cells
    acc = means[:, (r0 + x0).long()] * ((256 - wy) * (256 - wx))
    acc += means[:, (r0 + x1).long()] * ((256 - wy) * wx)
    acc += means[:, (r1 + x0).long()] * (wy * (256 - wx))
    acc += means[:, (r1 + x1).long()] * (wy * wx)
    return ((acc + 32768) >> 16).to(torch.uint8)


def _blur_each(image: "torch.Tensor", b: "torch.Tensor", active: "torch.Tensor | None", cells: int):
    """CPU: box by box, the last first, so the first box in row order ends on top."""
    import torch

    _, h, w = image.shape
    x1, y1, x2, y2, gx, gy, xb, yb = _edges(b, active, h, w, cells)
    out = image.clone()
    rows = torch.nonzero((x2 > x1) & (y2 > y1)).reshape(-1).tolist()
    for i in reversed(rows):
        xa, ya, xz, yz = int(x1[i]), int(y1[i]), int(x2[i]), int(y2[i])
        region = image[:, ya:yz, xa:xz]
        means = _block_means(_integral(region), xb[i : i + 1] - xa, yb[i : i + 1] - ya).reshape(3, -1)
        ty = _axis(torch.arange(yz - ya)[None], (y2 - y1)[i : i + 1], gy[i : i + 1])[0]
        tx = _axis(torch.arange(xz - xa)[None], (x2 - x1)[i : i + 1], gx[i : i + 1])[0]
        out[:, ya:yz, xa:xz] = _mix(means, torch.zeros((), dtype=torch.int32), ty[:, None], tx[None, :], cells)
    return out


def _blur_frame(image: "torch.Tensor", b: "torch.Tensor", active: "torch.Tensor | None", cells: int):
    """Any device: fixed-shape ops over the whole frame; the first box covering a pixel wins."""
    import torch

    _, h, w = image.shape
    dev = image.device
    x1, y1, x2, y2, gx, gy, xb, yb = _edges(b, active, h, w, cells)
    means = _block_means(_integral(image), xb, yb).reshape(3, -1)
    ys, xs = torch.arange(h, device=dev), torch.arange(w, device=dev)
    owner = _owner((ys >= y1[:, None]) & (ys < y2[:, None]), (xs >= x1[:, None]) & (xs < x2[:, None]))
    ty = _axis(ys[None, :] - y1[:, None], y2 - y1, gy)  # (N, H)
    tx = _axis(xs[None, :] - x1[:, None], x2 - x1, gx)  # (N, W)
    o = owner.clamp(min=0)
    pty = ty.reshape(-1)[o * h + ys[:, None]]
    ptx = tx.reshape(-1)[o * w + xs[None, :]]
    base = (o * (cells * cells)).to(torch.int32)
    return torch.where(owner >= 0, _mix(means, base, pty, ptx, cells), image)


def blur_boxes(image: "torch.Tensor", boxes: Any, *, cells: int = 8) -> "torch.Tensor":
    """Privacy blur: a NEW ``(3, H, W)`` uint8 tensor (on ``image``'s device) with each box region
    blurred from ``cells x cells`` block means (module docstring); ``image`` is not modified.

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
