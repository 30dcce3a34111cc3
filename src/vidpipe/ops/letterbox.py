"""Letterbox geometry and a plain-PyTorch letterbox that runs on any device.

The model sees a ``(H_in, W_in)`` canvas; a source frame of ``(h, w)`` is resized with its
aspect ratio kept and centred, the rest filled with grey (0.5). Boxes map back per axis, as
Darknet's ``correct_yolo_boxes`` does: ``x_src = (x_in - pad_x) / sx`` with ``sx = new_w / src_w``
and ``y_src = (y_in - pad_y) / sy`` with ``sy = new_h / src_h`` (the truncated side's factor is a
little smaller than the other's: 0.6471 vs 0.65 for 640x272 at 416).

By default this is Darknet's ``letterbox_image`` (pjreddie/darknet ``src/image.c``): the long
side fills the canvas, the short side is ``src_short * dst_long // src_long`` (truncated), the
image sits at ``((W_in - new_w) // 2, (H_in - new_h) // 2)`` on grey 0.5, and ``resize_image``
is plain bilinear interpolation with the corner pixels aligned (``x_src = x_out * (w - 1) /
(new_w - 1)``; ``F.interpolate(align_corners=True)``), no antialiasing, also when shrinking.
Darknet's networks were trained on that resize, and small changes of the input move scores a lot:
on ``bikes.mp4`` and the sample photos (yolov3-tiny, conf 0.25, against OpenCV's Darknet importer
fed Darknet's letterbox) the previous default -- PyTorch's antialiased bilinear resize and a
rounded instead of truncated size (177 instead of 176 rows for a 640x272 frame) -- matched 86% of
the reference's boxes with mean IoU 0.945 and scores up to 0.27 apart; Darknet's resize and
geometry match 99.5% (mean IoU 0.9996, scores within 0.005). ``resample="antialias"`` keeps the
antialiased filter (less aliasing on large shrinks, e.g. for models trained that way).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import torch

PAD_VALUE = 0.5  # Darknet's letterbox grey (fill_image(boxed, .5))

Resample = Literal["darknet", "antialias"]
RESAMPLES: tuple[str, ...] = ("darknet", "antialias")
#: The default resampling filter of every letterbox (CPU, CUDA, fused NVDEC kernels, image loader).
DEFAULT_RESAMPLE: Resample = "darknet"


def check_resample(resample: str) -> None:
    """ConfigError unless ``resample`` is one of :data:`RESAMPLES`."""
    from vidpipe._validate import check_choice

    check_choice("resample", resample, RESAMPLES)


def interpolate_kwargs(resample: str, *, shrink: bool) -> dict:
    """``F.interpolate(mode="bilinear", **kwargs)`` arguments of ``resample``: Darknet's
    ``resize_image`` is ``align_corners=True`` without antialiasing; ``"antialias"`` is the
    half-pixel triangle filter widened when shrinking."""
    check_resample(resample)
    if resample == "darknet":
        return {"align_corners": True, "antialias": False}
    return {"align_corners": False, "antialias": shrink}


@dataclass(frozen=True, slots=True)
class LetterboxGeometry:
    """Where a ``src_h x src_w`` frame lands inside a ``dst_h x dst_w`` canvas.

    ``new_h x new_w`` is the resized image, placed at ``(pad_x, pad_y)`` (integers, top-left).
    ``scale`` is the limiting side's factor; :attr:`sx` and :attr:`sy` are the factors the image
    content is actually resized by along each axis (what boxes are mapped back with).
    """

    src_h: int
    src_w: int
    dst_h: int
    dst_w: int
    scale: float
    new_h: int
    new_w: int
    pad_x: int
    pad_y: int

    @property
    def sx(self) -> float:
        """Model pixels per source pixel along x: ``new_w / src_w``."""
        return self.new_w / self.src_w

    @property
    def sy(self) -> float:
        """Model pixels per source pixel along y: ``new_h / src_h``."""
        return self.new_h / self.src_h


def letterbox_geometry(src_h: int, src_w: int, dst_h: int, dst_w: int) -> LetterboxGeometry:
    """Largest aspect-preserving fit of ``src`` into ``dst``, centred: Darknet's ``letterbox_image``.

    The side that limits the fit gets the whole canvas; the other is scaled in integers and
    truncated (``new_h = src_h * dst_w // src_w``), as Darknet does. ``scale`` is the limiting
    side's exact factor; along the other side the image is up to one model pixel short of
    ``src * scale``, so boxes are mapped back with the per-axis :attr:`LetterboxGeometry.sx` and
    :attr:`LetterboxGeometry.sy` (mapping with ``scale`` alone would be off by up to ``1 / scale``
    source pixels at the far edge).
    """
    if min(src_h, src_w, dst_h, dst_w) <= 0:
        raise ValueError(f"letterbox sizes must be positive, got src {src_h}x{src_w}, dst {dst_h}x{dst_w}")
    if dst_w * src_h < dst_h * src_w:  # Darknet: if ((float)w/im.w < (float)h/im.h): width limits
        new_w, new_h = dst_w, max(1, src_h * dst_w // src_w)
        scale = dst_w / src_w
    else:
        new_h, new_w = dst_h, max(1, src_w * dst_h // src_h)
        scale = dst_h / src_h
    pad_x = (dst_w - new_w) // 2
    pad_y = (dst_h - new_h) // 2
    return LetterboxGeometry(src_h, src_w, dst_h, dst_w, scale, new_h, new_w, pad_x, pad_y)


def canvas_size(
    src_h: int, src_w: int, size: tuple[int, int], *, stride: int = 32, mode: str = "rect"
) -> tuple[int, int]:
    """The model-input canvas for a ``src_h x src_w`` frame and a model size ``(H, W)``.

    ``"square"`` is ``size`` itself (Darknet's letterbox). ``"rect"`` keeps the same scale but
    trims the padding to the next multiple of ``stride`` (a 16:9 frame at 416 runs on 416x256
    instead of 416x416: 40% less compute, same detections up to rounding).
    """
    if mode == "square":
        return size
    if mode != "rect":
        from vidpipe.errors import ConfigError

        raise ConfigError(f"invalid letterbox mode={mode!r}; expected 'rect' or 'square'")
    geo = letterbox_geometry(src_h, src_w, size[0], size[1])
    h = min(size[0], -(-geo.new_h // stride) * stride)
    w = min(size[1], -(-geo.new_w // stride) * stride)
    return (h, w)


def letterbox(
    images: "torch.Tensor",
    size: tuple[int, int],
    *,
    dtype: "torch.dtype | None" = None,
    out: "torch.Tensor | None" = None,
    exact: bool = True,
    resample: Resample = DEFAULT_RESAMPLE,
) -> "tuple[torch.Tensor, LetterboxGeometry]":
    """Letterbox a batch of same-sized RGB images into ``size`` and scale to [0, 1].

    Args:
        images: ``(B, 3, h, w)`` uint8 (or float in [0, 255]) on any device.
        size: ``(H_in, W_in)`` of the model input.
        dtype: output float dtype (default float32; float16 on CUDA is typical).
        out: optional preallocated ``(B, 3, H_in, W_in)`` tensor to write into.
        exact: resample in float32 (default), also for an FP16 output on CUDA. ``False`` resizes
            in ``dtype`` on CUDA, and a uint8 batch on the CPU in uint8, about 2x faster, but rounded to whole levels (up to one level from the float
            result), which moves yolov3-tiny's scores by up to 0.03 and loses 4% of Darknet's
            boxes on ``bikes.mp4`` (matched 0.957 instead of 0.995): Darknet resizes in float.
        resample: ``"darknet"`` (default: Darknet's bilinear ``resize_image``, corners aligned,
            no antialiasing) or ``"antialias"`` (PyTorch's antialiased bilinear when shrinking).

    Returns:
        ``(B, 3, H_in, W_in)`` tensor in [0, 1] on ``images.device`` and the geometry used.
    """
    import torch
    import torch.nn.functional as F

    if images.ndim != 4 or images.shape[1] != 3:
        raise ValueError(f"letterbox expects (B, 3, h, w) images, got {tuple(images.shape)}")
    dtype = dtype or torch.float32
    b, _, h, w = images.shape
    geo = letterbox_geometry(h, w, size[0], size[1])
    resize = (geo.new_h, geo.new_w) != (h, w)
    kw = interpolate_kwargs(resample, shrink=geo.new_h < h or geo.new_w < w)
    if images.device.type == "cpu" and images.dtype == torch.uint8 and resize and not exact:
        # PyTorch's uint8 resize is ~2x faster than float32 on the CPU; it rounds to whole
        # levels (< 1 level from the float result), which the model notices (see ``exact``).
        x = F.interpolate(images, size=(geo.new_h, geo.new_w), mode="bilinear", **kw)
        x = x.to(torch.float32)
    else:
        # float32 arithmetic (Darknet resizes in float): FP16 would round 0..255 to 1/8 level.
        work = torch.float32 if exact or images.device.type == "cpu" else dtype
        x = images.to(work)
        if resize:
            x = F.interpolate(x, size=(geo.new_h, geo.new_w), mode="bilinear", **kw)
    if out is None:
        out = torch.empty((b, 3, size[0], size[1]), dtype=dtype, device=images.device)
    out.fill_(PAD_VALUE)
    region = out[:, :, geo.pad_y : geo.pad_y + geo.new_h, geo.pad_x : geo.pad_x + geo.new_w]
    region.copy_((x * (1.0 / 255.0)).clamp_(0.0, 1.0))
    return out, geo
