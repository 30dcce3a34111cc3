"""Resize decoded images of mixed sizes into one batch: letterbox, plain resize, or native size.

On CUDA with Triton, the whole batch is two kernel launches (:mod:`vidpipe.images.gpu_resize`:
any mix of sizes and EXIF orientations, float32 arithmetic, written straight into the output
dtype). Without Triton, images of the same size are resized together with ``F.interpolate`` (one
kernel per size), in the output float dtype (float32 when the output is uint8, for exact
rounding). On the CPU each image is resized on uint8 in its decoded HWC layout, PyTorch's
vectorised antialiased path (about 7x faster than on planar NCHW uint8 and 10x faster than
float32); the loader does that on its reader threads (:func:`resize_one_cpu`), so this module
then only places the images.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from vidpipe._validate import check_choice
from vidpipe.ops.letterbox import DEFAULT_RESAMPLE, PAD_VALUE, interpolate_kwargs, letterbox_geometry

if TYPE_CHECKING:
    import torch

__all__ = ["BACKENDS", "PAD_VALUE_U8", "resize_images", "resize_one_cpu", "target_size", "to_dtype"]

BACKENDS = ("auto", "triton", "torch")

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
    orientations: list[int] | None = None,
    backend: str = "auto",
) -> tuple[torch.Tensor | tuple[torch.Tensor, ...], torch.Tensor, torch.Tensor]:
    """Resize ``images`` into a batch.

    Args:
        images: ``(3, h_i, w_i)`` uint8 RGB tensors on ``device`` (any strides).
        orientations: EXIF orientation (1..8) still to apply to each image (``None``: all 1).
        src_sizes: ``(height, width)`` of each *source* image; the geometry uses it, so an image
            decoded at reduced scale lands exactly where its full-size decode would.
        size: ``(H, W)`` of the output (ignored for ``mode="none"``).
        mode: ``"letterbox"`` (aspect kept, centred, grey padding), ``"resize"`` (stretched to
            ``H x W``) or ``"none"`` (native size).
        dtype: ``float16``/``float32``/``bfloat16`` (values in [0, 1]) or ``uint8`` (0..255).
        backend: ``"auto"`` (the Triton kernels on CUDA when Triton imports), ``"triton"`` or
            ``"torch"`` (``F.interpolate``; always on the CPU).

    Returns:
        ``(data, scale, pad)``: ``data`` is ``(B, 3, H, W)`` of ``dtype`` on ``device`` (a tuple of
        ``(3, h_i, w_i)`` for ``"none"``), ``scale`` ``(B, 2)`` float32 ``(sx, sy)`` and ``pad``
        ``(B, 2)`` float32 ``(left, top)``, both on the CPU (small; the caller moves them).
    """
    import torch

    from vidpipe.images.decode_cpu import apply_orientation

    check_choice("backend", backend, BACKENDS)
    b = len(images)
    if orientations is None:
        orientations = [1] * b
    if mode != "none" and b and backend != "torch":
        from vidpipe.images.gpu_resize import resize_batch_triton, triton_ready

        ready = triton_ready(device)
        if backend == "triton" and not ready:
            from vidpipe.errors import BackendUnavailableError

            raise BackendUnavailableError(f"the Triton resize kernels cannot run on {device}")
        if ready and size is not None:
            return resize_batch_triton(
                images, orientations, src_sizes, size=size, mode=mode, dtype=dtype, device=device
            )
    images = [apply_orientation(img, o) for img, o in zip(images, orientations)]
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
            sx, sy = g.sx, g.sy  # per axis: the short side is truncated
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
    """``(N, 3, h, w)`` uint8 -> ``(N, 3, *hw)`` of ``dtype`` (bilinear, the letterbox's default
    filter: :data:`vidpipe.ops.letterbox.DEFAULT_RESAMPLE`, Darknet's ``resize_image``)."""
    import torch
    import torch.nn.functional as F

    h, w = x.shape[-2:]
    if (h, w) == hw:
        return to_dtype(x, dtype)
    kw = interpolate_kwargs(DEFAULT_RESAMPLE, shrink=hw[0] < h or hw[1] < w)
    if x.device.type == "cpu":
        r = F.interpolate(x, size=hw, mode="bilinear", **kw)
        return to_dtype(r, dtype)
    work = dtype if dtype.is_floating_point else torch.float32
    r = F.interpolate(x.to(work), size=hw, mode="bilinear", **kw)
    if dtype.is_floating_point:
        return r.mul_(1.0 / 255.0).clamp_(0.0, 1.0)
    return r.round_().clamp_(0, 255).to(torch.uint8)


def to_dtype(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """uint8 0..255 -> ``dtype``: floats scaled to [0, 1], uint8 unchanged."""
    import torch

    if dtype == torch.uint8:
        return x
    return x.to(dtype).mul_(1.0 / 255.0)


def target_size(src_h: int, src_w: int, size: tuple[int, int], mode: str) -> tuple[int, int]:
    """``(new_h, new_w)`` an ``src_h x src_w`` image is resized to: its letterbox region for
    ``"letterbox"``, ``size`` itself for ``"resize"``."""
    if mode == "letterbox":
        g = letterbox_geometry(src_h, src_w, size[0], size[1])
        return (g.new_h, g.new_w)
    return (size[0], size[1])


def resize_one_cpu(img: torch.Tensor, hw: tuple[int, int]) -> torch.Tensor:
    """``(3, h, w)`` uint8 CPU image -> ``(3, *hw)`` uint8 (bilinear, the letterbox's default filter),
    on the calling thread: what the CPU branch of :func:`resize_images` does to it, done ahead on a
    reader thread. Returned as is when already ``hw``."""
    if tuple(img.shape[-2:]) == tuple(hw):
        return img
    return _interpolate(img.unsqueeze(0), hw, img.dtype)[0]
