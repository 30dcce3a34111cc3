"""Crop-and-resize of detections on the device: :func:`crop_detections` -> :class:`Crops`.

The boxes of a batch of frames (``FrameResult.detections``, source pixels) are cut out of the kept
frames (``FrameResult.image``, see ``PipelineConfig.keep_frames``) and resized to one size with
``torchvision.ops.roi_align`` (``aligned=True``: a box ``x1..x2`` covers pixel centres
``x1 + 0.5 .. x2 - 0.5``, as OpenCV's and PIL's resizers see an image; ``sampling_ratio`` adaptive:
``ceil(box / output)`` bilinear samples per output pixel and axis, averaged, so shrinking
averages the area like ``cv2.INTER_AREA`` and enlarging is bilinear like ``cv2.INTER_LINEAR``).
All crops of the call come out as one ``(N, 3, h, w)`` float batch, ready for one model call.

Frames are converted to float only where they are read: frames of one size go to ``roi_align``
``frames_per_call`` at a time, in float32 (``roi_align`` takes the boxes in the frames' dtype,
and float16 would round a 1080p x coordinate to whole pixels, a 4K one to two), so the temporary
memory is bounded (1080p, 8 frames: 200 MB) whatever the batch size. The crops are float16 on
CUDA (half the memory of a large batch of crops; values in [0, 1] keep ~3 decimal digits) and
float32 on the CPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vidpipe._validate import check_range
from vidpipe.errors import ConfigError

if TYPE_CHECKING:
    import torch

    from vidpipe.types import FrameResult

__all__ = ["CropOptions", "Crops", "crop_detections", "expand_boxes", "roi_align"]


@dataclass(frozen=True)
class CropOptions:
    """How detections are cropped.

    Attributes:
        size: ``(height, width)`` of every crop (ReID models commonly take 256x128).
        expand: grow each box by this fraction of its width and height, half on each side
            (``0.1``: 10% wider and taller, same centre); before ``pad``.
        pad: then add this many source pixels on every side.
        classes: class ids to crop (``None``: all); rows of other classes get no crop.
        clip: clamp the (grown) boxes to the frame; ``False`` lets them reach outside, where
            the crop is black (``roi_align`` reads zeros there).
        frames_per_call: frames converted to float and handed to ``roi_align`` at a time.
    """

    size: tuple[int, int] = (256, 128)
    expand: float = 0.0
    pad: float = 0.0
    classes: tuple[int, ...] | None = None
    clip: bool = True
    frames_per_call: int = 8

    def __post_init__(self) -> None:
        size = self.size
        if isinstance(size, int):
            size = (size, size)
        if not (isinstance(size, (tuple, list)) and len(size) == 2):
            raise ConfigError(f"size={self.size!r}; expected (height, width)")
        h, w = (int(check_range("size", v, low=1, high=4096, integer=True)) for v in size)
        object.__setattr__(self, "size", (h, w))
        check_range("expand", self.expand, low=-0.9, high=10.0)
        check_range("pad", self.pad, low=0.0, high=10_000.0)
        check_range("frames_per_call", self.frames_per_call, low=1, high=4096, integer=True)
        if self.classes is not None:
            if isinstance(self.classes, (str, bytes)) or not all(isinstance(c, int) for c in self.classes):
                raise ConfigError(f"classes={self.classes!r}; expected class ids (ints) or None")
            object.__setattr__(self, "classes", tuple(int(c) for c in self.classes))


@dataclass(frozen=True, repr=False)
class Crops:
    """The crops of a list of results, on the frames' device.

    Attributes:
        tensor: ``(N, 3, h, w)`` float RGB in [0, 1] (float16 on CUDA, float32 on the CPU).
        frame: ``(N,)`` int64, which result (position in the list given) each crop is from.
        row: ``(N,)`` int64, the detection row within that result's ``detections``.
        index: ``(N,)`` int64, the row in all the results' detections laid end to end (result 0's
            rows first): where the crop's embedding goes.
        boxes: ``(N, 4)`` float32, the region cropped (``x1, y1, x2, y2`` in source pixels,
            after ``expand``, ``pad`` and ``clip``).
        total: the number of detections in the results (selected or not).
    """

    tensor: "torch.Tensor"
    frame: "torch.Tensor"
    row: "torch.Tensor"
    index: "torch.Tensor"
    boxes: "torch.Tensor"
    total: int

    def __len__(self) -> int:
        return int(self.tensor.shape[0])

    def __repr__(self) -> str:
        t = self.tensor
        dtype = str(t.dtype).removeprefix("torch.")
        return f"Crops(n={len(self)} of {self.total}, tensor={tuple(t.shape)} {dtype} {t.device})"


def roi_align(
    frames: "torch.Tensor", rois: "torch.Tensor", size: tuple[int, int], *, sampling_ratio: int = -1
) -> "torch.Tensor":
    """``torchvision.ops.roi_align(frames, rois, size, spatial_scale=1, sampling_ratio, aligned=True)``
    (through vidpipe's lazy loader of torchvision's operators: no ``import torchvision``).

    ``frames``: ``(B, C, H, W)`` float; ``rois``: ``(K, 5)`` ``(frame in frames, x1, y1, x2, y2)``
    of the same dtype and device -> ``(K, C, *size)``."""
    import torch

    from vidpipe import _tvops

    _tvops.load("ops")
    return torch.ops.torchvision.roi_align(frames, rois, 1.0, int(size[0]), int(size[1]), int(sampling_ratio), True)


def expand_boxes(
    boxes: "torch.Tensor", *, expand: float = 0.0, pad: float = 0.0, hw: "tuple[int, int] | None" = None
) -> "torch.Tensor":
    """``(N, 4)`` xyxy boxes grown by ``expand`` (fraction of width/height, half each side), then
    ``pad`` pixels each side, then clamped to ``[0, W] x [0, H]`` when ``hw`` is given."""
    import torch

    b = boxes.float()
    lo, hi = b[:, :2], b[:, 2:]
    if expand:
        half = (hi - lo) * (expand / 2.0)
        lo, hi = lo - half, hi + half
    if pad:
        lo, hi = lo - pad, hi + pad
    b = torch.cat([lo, hi], 1)
    if hw is not None:
        h, w = hw
        b[:, 0::2] = b[:, 0::2].clamp(0.0, float(w))
        b[:, 1::2] = b[:, 1::2].clamp(0.0, float(h))
    return b


def crop_detections(
    results: "Sequence[FrameResult]",
    options: CropOptions | None = None,
    **kwargs: object,
) -> Crops:
    """Crop every (selected) detection of ``results`` out of its frame and resize them all to one size.

    Args:
        results: results with their frames kept (``FrameResult.image``; ``vidpipe.detect(...,
            keep_frames=True)``, or a stage with ``needs_frames``). Frames may differ in size and
            come from several streams. Detections may be on the CPU (moved to the frames' device,
            one small copy).
        options: a :class:`CropOptions`, or its fields as keyword arguments.

    Returns:
        :class:`Crops`: one ``(N, 3, h, w)`` float batch on the frames' device, with where each
        crop came from. One device->host synchronisation when a class filter is set (the number
        of selected rows), none otherwise.

    Raises:
        ConfigError: a result without its frame (``image is None``) that has detections.
    """
    import torch

    opts = options if options is not None else CropOptions(**kwargs)  # type: ignore[arg-type]
    if options is not None and kwargs:
        raise ConfigError("crop_detections: give options or keyword arguments, not both")
    counts = [len(r.detections) for r in results]
    total = sum(counts)
    device = _device_of(results)
    dtype = torch.float16 if device.type == "cuda" else torch.float32  # of the crops
    h_out, w_out = opts.size
    if total == 0:
        return _empty(device, dtype, opts.size, 0)
    for r, n in zip(results, counts):
        if n and r.image is None:
            raise ConfigError(
                f"{r.meta.source} frame {r.meta.index}: no image to crop from; run with keep_frames=True "
                "(or a stage with needs_frames=True)"
            )
    boxes = torch.cat([r.detections.boxes for r in results]).to(device, torch.float32, non_blocking=True)
    class_ids = torch.cat([r.detections.class_ids for r in results]).to(device, non_blocking=True)
    frame_of = torch.repeat_interleave(
        torch.arange(len(results), dtype=torch.int64), torch.tensor(counts, dtype=torch.int64)
    ).to(device, non_blocking=True)
    starts = torch.tensor([0, *counts[:-1]], dtype=torch.int64).cumsum(0).to(device, non_blocking=True)
    index = torch.arange(total, dtype=torch.int64, device=device)
    if opts.classes is not None:
        keep = torch.isin(class_ids, torch.tensor(opts.classes, dtype=class_ids.dtype).to(device, non_blocking=True))
        index = index[keep]  # the one host synchronisation: how many rows are selected
        if index.numel() == 0:
            return _empty(device, dtype, opts.size, total)
    sel_frame = frame_of[index]
    sel_row = index - starts[sel_frame]
    sel_boxes = expand_boxes(boxes[index], expand=opts.expand, pad=opts.pad)
    if opts.clip:
        sizes = torch.tensor([[r.meta.width, r.meta.height] for r in results], dtype=torch.float32)
        sizes = sizes.to(device, non_blocking=True)
        wh = sizes[sel_frame]
        lo = torch.zeros_like(sel_boxes)
        hi = torch.cat([wh, wh], 1)
        sel_boxes = torch.minimum(torch.maximum(sel_boxes, lo), hi)  # per frame: sizes may differ
    out = torch.empty((index.shape[0], 3, h_out, w_out), dtype=dtype, device=device)
    _fill(out, results, counts, sel_frame, sel_boxes, opts)
    return Crops(tensor=out, frame=sel_frame, row=sel_row, index=index, boxes=sel_boxes, total=total)


def _fill(out, results, counts, sel_frame, sel_boxes, opts: CropOptions) -> None:
    """Run ``roi_align`` over groups of frames of one size, ``frames_per_call`` at a time, and
    write each group's crops into their rows of ``out``."""
    import torch

    dtype = torch.float32  # frames and boxes (see the module docstring)
    groups: dict[tuple[int, int], list[int]] = {}
    for i, (r, n) in enumerate(zip(results, counts)):
        if n:
            groups.setdefault((int(r.image.shape[-2]), int(r.image.shape[-1])), []).append(i)
    device = out.device
    single = len(groups) == 1 and len(next(iter(groups.values()))) <= opts.frames_per_call
    for (h, w), members in groups.items():
        for s in range(0, len(members), opts.frames_per_call):
            part = members[s : s + opts.frames_per_call]
            frames = torch.empty((len(part), 3, h, w), dtype=dtype, device=device)
            for j, i in enumerate(part):
                frames[j].copy_(results[i].image)  # uint8 -> float, on the frames' device
            local = torch.full((len(results),), -1, dtype=torch.int64)
            local[torch.tensor(part, dtype=torch.int64)] = torch.arange(len(part), dtype=torch.int64)
            lf = local.to(device, non_blocking=True)[sel_frame]
            if single:
                rows = None
                rois = torch.cat([lf[:, None].to(dtype), sel_boxes.to(dtype)], 1)
            else:
                rows = (lf >= 0).nonzero().squeeze(1)  # a host synchronisation per group: sizes vary
                if rows.numel() == 0:
                    continue
                rois = torch.cat([lf[rows, None].to(dtype), sel_boxes[rows].to(dtype)], 1)
            crops = roi_align(frames, rois, opts.size).mul_(1.0 / 255.0).clamp_(0.0, 1.0)
            if rows is None:
                out.copy_(crops)
            else:
                out.index_copy_(0, rows, crops.to(out.dtype))


def _device_of(results: "Sequence[FrameResult]") -> "torch.device":
    for r in results:
        if r.image is not None:
            return r.image.device
    return results[0].detections.device if results else __import__("torch").device("cpu")


def _empty(device, dtype, size: tuple[int, int], total: int) -> Crops:
    import torch

    z = torch.zeros((0,), dtype=torch.int64, device=device)
    return Crops(
        tensor=torch.zeros((0, 3, *size), dtype=dtype, device=device),
        frame=z,
        row=z,
        index=z,
        boxes=torch.zeros((0, 4), dtype=torch.float32, device=device),
        total=total,
    )
