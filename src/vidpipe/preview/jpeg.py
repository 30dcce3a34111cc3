"""JPEG encoding of preview frames: downscaled on the frame's device, then nvJPEG on CUDA
(``torchvision.io.encode_jpeg`` of a CUDA tensor) or libjpeg on the CPU (the same function on a
CPU tensor).

torchvision's operators are called through :mod:`vidpipe._tvops` (its shared library, without
importing the torchvision package and its deprecation warning for the ``io`` functions).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import torch

__all__ = ["JpegBackend", "backend_for", "downscale", "encode_jpeg"]

JpegBackend = Literal["nvjpeg", "cpu"]


def backend_for(device: "torch.device | str") -> JpegBackend:
    """``"nvjpeg"`` for a CUDA device, else ``"cpu"`` (what :func:`encode_jpeg` uses there)."""
    import torch

    return "nvjpeg" if torch.device(device).type == "cuda" else "cpu"


def downscale(image: "torch.Tensor", max_width: int | None) -> "torch.Tensor":
    """``image`` ``(3, H, W)`` uint8 shrunk to at most ``max_width`` columns (aspect kept,
    antialiased bilinear, even sizes), on its own device; unchanged when it is narrow enough."""
    import torch
    import torch.nn.functional as F

    h, w = int(image.shape[-2]), int(image.shape[-1])
    if max_width is None or w <= max_width:
        return image
    new_w = max(2, max_width - max_width % 2)
    new_h = max(2, round(h * new_w / w / 2) * 2)
    x = image.unsqueeze(0)
    if image.device.type == "cpu":  # uint8 antialiased bilinear has a fast CPU kernel
        out = F.interpolate(x, size=(new_h, new_w), mode="bilinear", antialias=True, align_corners=False)
    else:
        out = F.interpolate(x.float(), size=(new_h, new_w), mode="bilinear", antialias=True, align_corners=False)
        out = out.round_().clamp_(0, 255).to(torch.uint8)
    return out[0]


def encode_jpeg(image: "torch.Tensor", *, quality: int = 80, max_width: int | None = 640) -> bytes:
    """One frame to JPEG bytes.

    Args:
        image: ``(3, H, W)`` uint8 RGB, on the CPU or a CUDA device (not modified).
        quality: JPEG quality, 1..100.
        max_width: shrink wider frames to this width first, on the frame's device (``None``: keep).

    Returns:
        The JPEG file's bytes (baseline, 4:2:0 as the encoder chooses).

    Raises:
        ValueError: not a non-empty ``(3, H, W)`` uint8 tensor, or ``quality`` outside 1..100.
    """
    import torch

    from vidpipe._tvops import load

    if not isinstance(image, torch.Tensor) or image.dim() != 3 or image.shape[0] != 3 or image.dtype != torch.uint8 \
            or image.shape[1] < 1 or image.shape[2] < 1:
        shape = tuple(image.shape) if isinstance(image, torch.Tensor) else type(image).__name__
        raise ValueError(f"encode_jpeg: expected a (3, H, W) uint8 tensor, H and W >= 1, got {shape}")
    if not 1 <= int(quality) <= 100:
        raise ValueError(f"encode_jpeg: quality={quality!r}; expected 1 to 100")
    load("image")
    small = downscale(image, max_width).contiguous()
    if small.device.type == "cuda":
        with torch.cuda.device(small.device):
            data = torch.ops.image.encode_jpegs_cuda([small], int(quality))[0]
        return bytes(data.cpu().numpy().tobytes())
    return bytes(torch.ops.image.encode_jpeg(small, int(quality)).numpy().tobytes())
