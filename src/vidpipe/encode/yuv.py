"""RGB -> YUV 4:2:0 (``yuv420p``) on the image's device, the way FFmpeg's swscale does it.

The encoder takes planar 4:2:0; converting on the device (the GPU when the frames are there)
halves what crosses to the host (1.5 bytes a pixel instead of 3) and leaves swscale nothing to do.

Matrix and range: limited ("tv") range, BT.709 for frames at least 720 rows high, else BT.601
(:func:`matrix_for_height`), as the encoded stream is tagged.

Arithmetic (measured against swscale's ``rgb24 -> yuv420p`` in PyAV 18.1 / FFmpeg 8.1 with
``reformat(format="yuv420p")``, its default bilinear flags):

- ``Y = 16 + 219/255 (Kr R + Kg G + Kb B)`` per pixel;
- chroma from the RGB averaged over each horizontal pair (columns ``2i``, ``2i+1``) and then
  filtered vertically with the taps ``1/8, 3/8, 3/8, 1/8`` over rows ``2j-1 .. 2j+2`` (edge rows
  repeated): swscale's bilinear halving, chroma sited between the two luma rows;
- ``U = 128 + 224/255 (B - Y') / (2 (1 - Kb))``, ``V = 128 + 224/255 (R - Y') / (2 (1 - Kr))``;
- rounded to nearest. Within 1 code value of swscale on random and on rendered test frames
  (``tests/encode/test_yuv.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import torch

__all__ = ["Matrix", "matrix_for_height", "rgb_to_yuv420", "AV_COLORSPACE", "AV_PRIMARIES", "AV_TRC"]

Matrix = Literal["bt601", "bt709"]

_KR_KB = {"bt601": (0.299, 0.114), "bt709": (0.2126, 0.0722)}
#: FFmpeg's AVColorSpace / AVColorPrimaries / AVColorTransferCharacteristic values written as tags
AV_COLORSPACE = {"bt601": 6, "bt709": 1}  # SMPTE 170M, BT.709
AV_PRIMARIES = {"bt601": 6, "bt709": 1}
AV_TRC = {"bt601": 6, "bt709": 1}
AV_RANGE_LIMITED = 1  # AVCOL_RANGE_MPEG


def matrix_for_height(height: int) -> Matrix:
    """``"bt709"`` for HD (``height >= 720``), else ``"bt601"`` (the usual convention)."""
    return "bt709" if height >= 720 else "bt601"


def _weights(matrix: Matrix) -> tuple[tuple[float, float, float], ...]:
    kr, kb = _KR_KB[matrix]
    kg = 1.0 - kr - kb
    ys, cs = 219.0 / 255.0, 224.0 / 255.0
    y = (ys * kr, ys * kg, ys * kb)
    u = (cs * -kr / (2 * (1 - kb)), cs * -kg / (2 * (1 - kb)), cs * 0.5)
    v = (cs * 0.5, cs * -kg / (2 * (1 - kr)), cs * -kb / (2 * (1 - kr)))
    return y, u, v


def rgb_to_yuv420(image: "torch.Tensor", *, matrix: Matrix | None = None, out: "torch.Tensor | None" = None) -> "torch.Tensor":
    """Convert RGB frames to planar YUV 4:2:0, limited range, on ``image``'s device.

    Args:
        image: ``(3, H, W)`` uint8 RGB, or a batch ``(N, 3, H, W)`` converted in one pass (the
            same kernels for every frame: what a batch of streams costs the caller's thread is
            one frame's kernel launches), any device; ``H`` and ``W`` even.
        matrix: ``"bt601"`` or ``"bt709"``; ``None``: :func:`matrix_for_height`.
        out: optional ``(H * 3 // 2, W)`` (``(N, H * 3 // 2, W)``) uint8 contiguous tensor on the
            same device to write into.

    Returns:
        ``(H * 3 // 2, W)`` (``(N, H * 3 // 2, W)``) uint8 on ``image``'s device: ``H`` rows of Y,
        then the U plane (``H/2 x W/2``) and the V plane, each stored row after row: the memory
        layout of one ``yuv420p`` frame (what ``av.VideoFrame.from_ndarray(..., format="yuv420p")``
        takes).

    Raises:
        ValueError: not a ``(3, H, W)`` / ``(N, 3, H, W)`` uint8 tensor, or an odd size.
    """
    import torch

    if (not isinstance(image, torch.Tensor) or image.dim() not in (3, 4) or image.shape[-3] != 3
            or image.dtype != torch.uint8):
        raise ValueError(f"image must be a (3, H, W) or (N, 3, H, W) uint8 RGB tensor, got {_describe(image)}")
    h, w = image.shape[-2:]
    if h % 2 or w % 2 or h == 0 or w == 0:
        raise ValueError(f"image size {w}x{h} must be even (4:2:0 halves both)")
    lead = tuple(image.shape[:-3])  # () or (N,)
    matrix = matrix or matrix_for_height(h)
    wy, wu, wv = _weights(matrix)
    if out is None:
        out = torch.empty((*lead, h * 3 // 2, w), dtype=torch.uint8, device=image.device)
    x = image.to(torch.float32)
    r, g, b = x[..., 0, :, :], x[..., 1, :, :], x[..., 2, :, :]
    out[..., :h, :] = (r * wy[0] + g * wy[1] + b * wy[2] + 16.5).clamp_(0, 255).to(torch.uint8)  # +0.5: round
    # chroma: pairs of columns averaged, then rows filtered 1/8 3/8 3/8 1/8 (edges repeated)
    pair = (x[..., 0::2] + x[..., 1::2]) * 0.5  # (..., 3, H, W/2)
    up = torch.cat((pair[..., :1, :], pair[..., 1::2, :][..., :-1, :]), dim=-2)  # rows 2j-1 (row 0 repeated)
    down = torch.cat((pair[..., 2::2, :], pair[..., -1:, :]), dim=-2)  # rows 2j+2 (the last row repeated)
    c = (pair[..., 0::2, :] + pair[..., 1::2, :]) * 0.375 + (up + down) * 0.125  # (..., 3, H/2, W/2)
    cr, cg, cb = c[..., 0, :, :], c[..., 1, :, :], c[..., 2, :, :]
    quarter = (h // 2) * (w // 2)
    flat = out.view(*lead, -1)[..., h * w:]
    flat[..., :quarter].view(*lead, h // 2, w // 2).copy_((cr * wu[0] + cg * wu[1] + cb * wu[2] + 128.5).clamp_(0, 255))
    flat[..., quarter:].view(*lead, h // 2, w // 2).copy_((cr * wv[0] + cg * wv[1] + cb * wv[2] + 128.5).clamp_(0, 255))
    return out


def _describe(x: object) -> str:
    shape = getattr(x, "shape", None)
    return f"{type(x).__name__} shape={tuple(shape) if shape is not None else None} dtype={getattr(x, 'dtype', None)}"
