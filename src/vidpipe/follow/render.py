"""The virtual camera's picture: crop a :class:`~vidpipe.follow.window.Window` of a frame and
resize it to the output size, on the frame's device (CUDA or CPU).

One ``torchvision.ops.roi_align`` call (bilinear, ``aligned=True``) on the window's sub-pixel
box: a slow pan moves the picture by fractions of a pixel instead of stepping. Downscaling
averages ``ceil(scale)`` x ``ceil(scale)`` bilinear samples per output pixel (antialiasing:
OpenCV's ``INTER_AREA`` for whole-number scales); upscaling samples once per output pixel
(``INTER_LINEAR``'s sample positions). Only the frame's pixels under the window (plus one pixel
of border) are converted to float.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from vidpipe.follow.window import Window

__all__ = ["render_window"]


def render_window(image: "torch.Tensor", window: "Window", size: "tuple[int, int]") -> "torch.Tensor":
    """Crop ``window`` out of ``image`` and resize it to ``size``.

    Args:
        image: ``(3, H, W)`` uint8 RGB, CUDA or CPU.
        window: the crop in ``image``'s pixels (sub-pixel; clipped to the frame, which the
            planner's windows never leave).
        size: the output's ``(width, height)``.

    Returns:
        A new ``(3, height, width)`` uint8 tensor on ``image``'s device.
    """
    import torch
    from torchvision.ops import roi_align

    if image.ndim != 3 or image.shape[0] != 3 or image.dtype != torch.uint8:
        raise ValueError(f"image must be (3, H, W) uint8, got {tuple(image.shape)} {image.dtype}")
    out_w, out_h = int(size[0]), int(size[1])
    if out_w < 1 or out_h < 1:
        raise ValueError(f"size must be positive (width, height), got {size!r}")
    if not (window.w > 0 and window.h > 0):
        raise ValueError(f"window must have a positive size, got {window!r}")
    _, H, W = image.shape
    x1, y1, x2, y2 = window.box
    # the frame's pixels the samples can touch, one pixel of border for the bilinear taps
    c0 = min(max(int(math.floor(x1)) - 1, 0), W - 1)
    r0 = min(max(int(math.floor(y1)) - 1, 0), H - 1)
    c1 = max(min(int(math.ceil(x2)) + 1, W), c0 + 1)
    r1 = max(min(int(math.ceil(y2)) + 1, H), r0 + 1)
    part = image[:, r0:r1, c0:c1].unsqueeze(0).float()
    # outside the frame: repeat the edge (roi_align would fade to zero more than a pixel out)
    bx1, bx2 = min(max(x1, 0.0), float(W)), min(max(x2, 0.0), float(W))
    by1, by2 = min(max(y1, 0.0), float(H)), min(max(y2, 0.0), float(H))
    if bx2 - bx1 < 1e-6 or by2 - by1 < 1e-6:
        raise ValueError(f"window {window!r} lies outside the {W}x{H} frame")
    sample = max(1, math.ceil(max((bx2 - bx1) / out_w, (by2 - by1) / out_h) - 1e-6))
    rois = torch.tensor([[0.0, bx1 - c0, by1 - r0, bx2 - c0, by2 - r0]], dtype=torch.float32, device=image.device)
    out = roi_align(part, rois, output_size=(out_h, out_w), spatial_scale=1.0, sampling_ratio=sample, aligned=True)
    return out[0].round_().clamp_(0, 255).to(torch.uint8)
