"""Resize decoded images of mixed sizes into one batch: letterbox, plain resize, or native size.

On the GPU, images of the same size are resized together (one kernel per size, not per image),
in the output float dtype (float32 when the output is uint8, for exact rounding). On the CPU each
image is resized on uint8 in its decoded HWC layout, PyTorch's vectorised antialiased path (about
7x faster than on planar NCHW uint8 and 10x faster than float32).
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from vidpipe.ops.letterbox import PAD_VALUE, letterbox_geometry

if TYPE_CHECKING:
    import torch

__all__ = ["PAD_VALUE_U8", "resize_images", "to_dtype"]

#: Letterbox grey in uint8 (PAD_VALUE * 255, rounded).
PAD_VALUE_U8 = round(PAD_VALUE * 255)


def resize_images(
    images: list[torch.Tensor],
    src_sizes: list[tuple[int, int]],
    *,
    size: tuple[int, int] | None,
    mode: str,
    dtype: torch.dtype,
    device: torch.device,
) -> tuple[torch.Tensor | tuple[torch.Tensor, ...], torch.Tensor, torch.Tensor]:
    """Resize ``images`` into a batch.

    Args:
        images: ``(3, h_i, w_i)`` uint8 RGB tensors on ``device`` (any strides).
        src_sizes: ``(height, width)`` of each *source* image; the geometry uses it, so an image
            decoded at reduced scale lands exactly where its full-size decode would.
        size: ``(H, W)`` of the output (ignored for ``mode="none"``).
        mode: ``"letterbox"`` (aspect kept, centred, grey padding), ``"resize"`` (stretched to
            ``H x W``) or ``"none"`` (native size).
        dtype: ``float16``/``float32``/``bfloat16`` (values in [0, 1]) or ``uint8`` (0..255).

    Returns:
        ``(data, scale, pad)``: ``data`` is ``(B, 3, H, W)`` of ``dtype`` on ``device`` (a tuple of
        ``(3, h_i, w_i)`` for ``"none"``), ``scale`` ``(B, 2)`` float32 ``(sx, sy)`` and ``pad``
        ``(B, 2)`` float32 ``(left, top)``, both on the CPU (small; the caller moves them).
    """
    import torch

    b = len(images)
    if mode == "none":
        data = tuple(to_dtype(img.contiguous(), dtype) for img in images)
        return data, torch.ones((b, 2), dtype=torch.float32), torch.zeros((b, 2), dtype=torch.float32)
    if size is None:
        raise ValueError(f"resize_images: mode={mode!r} needs a size")
    out_h, out_w = size
    if mode == "letterbox":
        fill = PAD_VALUE if dtype.is_floating_point else PAD_VALUE_U8
        out = torch.full((b, 3, out_h, out_w), fill, dtype=dtype, device=device)
    else:
        out = torch.empty((b, 3, out_h, out_w), dtype=dtype, device=device)
    scales: list[tuple[float, float]] = [(1.0, 1.0)] * b
    pads: list[tuple[float, float]] = [(0.0, 0.0)] * b
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, (img, src) in enumerate(zip(images, src_sizes)):
        groups[(img.shape[-2], img.shape[-1], src[0], src[1])].append(i)
    for (_, _, src_h, src_w), idx in groups.items():
        if mode == "letterbox":
            g = letterbox_geometry(src_h, src_w, out_h, out_w)
            new_h, new_w, x0, y0 = g.new_h, g.new_w, g.pad_x, g.pad_y
            sx = sy = g.scale
        else:
            new_h, new_w, x0, y0 = out_h, out_w, 0, 0
            sx, sy = out_w / src_w, out_h / src_h
        region = (slice(None), slice(y0, y0 + new_h), slice(x0, x0 + new_w))
        if device.type == "cpu":
            # One image at a time, in the decoder's HWC memory layout (channels-last): PyTorch's
            # vectorised uint8 path, and no copy into a stacked NCHW batch first.
            for i in idx:
                out[i][region].copy_(_interpolate(images[i].unsqueeze(0), (new_h, new_w), dtype)[0])
        else:
            stacked = images[idx[0]].unsqueeze(0) if len(idx) == 1 else torch.stack([images[i] for i in idx])
            resized = _interpolate(stacked, (new_h, new_w), dtype)
            if idx[-1] - idx[0] == len(idx) - 1:  # a contiguous run of rows: one copy
                out[idx[0] : idx[-1] + 1, :, y0 : y0 + new_h, x0 : x0 + new_w].copy_(resized)
            else:
                for j, i in enumerate(idx):
                    out[i][region].copy_(resized[j])
        for i in idx:
            scales[i] = (sx, sy)
            pads[i] = (float(x0), float(y0))
    return out, torch.tensor(scales, dtype=torch.float32), torch.tensor(pads, dtype=torch.float32)


def _interpolate(x: torch.Tensor, hw: tuple[int, int], dtype: torch.dtype) -> torch.Tensor:
    """``(N, 3, h, w)`` uint8 -> ``(N, 3, *hw)`` of ``dtype`` (bilinear, antialiased when shrinking)."""
    import torch
    import torch.nn.functional as F

    h, w = x.shape[-2:]
    if (h, w) == hw:
        return to_dtype(x, dtype)
    shrink = hw[0] < h or hw[1] < w
    if x.device.type == "cpu":
        r = F.interpolate(x, size=hw, mode="bilinear", align_corners=False, antialias=shrink)
        return to_dtype(r, dtype)
    work = dtype if dtype.is_floating_point else torch.float32
    r = F.interpolate(x.to(work), size=hw, mode="bilinear", align_corners=False, antialias=shrink)
    if dtype.is_floating_point:
        return r.mul_(1.0 / 255.0).clamp_(0.0, 1.0)
    return r.round_().clamp_(0, 255).to(torch.uint8)


def to_dtype(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """uint8 0..255 -> ``dtype``: floats scaled to [0, 1], uint8 unchanged."""
    import torch

    if dtype == torch.uint8:
        return x
    return x.to(dtype).mul_(1.0 / 255.0)
