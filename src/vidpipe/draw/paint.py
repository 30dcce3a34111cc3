"""Opaque pixel writes from many shapes resolved in one pass, the same on CPU and CUDA.

A write is a flat pixel index into ``H * W`` and a packed colour ``r << 16 | g << 8 | b``
(``-1`` = no write). Writes are listed bottom to top: where several hit one pixel the last one
wins (``scatter_reduce`` ``amax`` of the write's position, which does not depend on the order in
which the device runs them); then each written pixel is set to its winner's colour, so duplicate
indices always carry the same value. Pixels without a write keep their value.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["pack", "paint", "host_reads_free"]


def host_reads_free(device: "torch.device") -> bool:
    """Whether reading a tensor's values on the host costs no device sync (the CPU). Drawing
    then sizes its work to the data (same pixels, less work); elsewhere shapes stay fixed."""
    return device.type == "cpu"


def pack(rgb: "torch.Tensor") -> "torch.Tensor":
    """``(..., 3)`` int64 in 0..255 -> ``(...)`` int64 ``r << 16 | g << 8 | b``."""
    return (rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]


def paint(canvas: "torch.Tensor", index: "torch.Tensor", colour: "torch.Tensor") -> None:
    """Apply writes to ``canvas`` ``(3, H, W)`` uint8 in place.

    Args:
        index: ``(M,)`` int64 flat pixel indices in ``[0, H * W)``, bottom write first.
        colour: ``(M,)`` int64 packed colours (:func:`pack`); ``< 0``: no write.
    """
    import torch

    m = index.numel()
    if m == 0:
        return
    _, h, w = canvas.shape
    flat = canvas.view(3, h * w)
    dt = torch.int32 if m < 2**31 else torch.int64
    pos = torch.where(colour >= 0, torch.arange(m, dtype=dt, device=canvas.device), -1)
    best = torch.full((h * w,), -1, dtype=dt, device=canvas.device)
    best.scatter_reduce_(0, index, pos, reduce="amax")
    win = best[index].long()
    c = colour[win.clamp(min=0)]
    rgb = torch.stack(((c >> 16) & 255, (c >> 8) & 255, c & 255)).to(torch.uint8)  # (3, M)
    flat[:, index] = torch.where(win >= 0, rgb, flat[:, index])
