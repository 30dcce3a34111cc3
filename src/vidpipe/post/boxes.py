"""Map boxes from model-input pixels back to source pixels (undo the letterbox)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vidpipe.post.dtypes import as_float32
from vidpipe.types import Detections, FrameMeta, ModelInput

if TYPE_CHECKING:
    import torch

__all__ = ["frame_sizes", "to_source"]


def frame_sizes(frames: "tuple[FrameMeta, ...]", device: "torch.device") -> "torch.Tensor":
    """``(B, 2)`` float32 ``width, height`` of each frame, on ``device``."""
    import torch

    sizes = torch.tensor([(m.width, m.height) for m in frames], dtype=torch.float32)
    return sizes.to(device, non_blocking=True)


def to_source(dets: Detections, inp: ModelInput) -> Detections:
    """Detections with boxes mapped from ``inp``'s model pixels to each frame's source pixels.

    ``x_src = (x_model - pad_x[frame]) / sx[frame]`` and ``y_src = (y_model - pad_y[frame]) /
    sy[frame]`` (per axis, as Darknet's ``correct_yolo_boxes``), then clipped to
    ``[0, width] x [0, height]`` of that frame. Runs on the detections' device, vectorised;
    scores, classes, frames and track ids are passed through.
    """
    import torch

    if len(dets) == 0:
        return dets
    frame = dets.frame
    scale = _on(inp.scale, dets.device)[frame].repeat(1, 2)  # (N, 4) sx, sy, sx, sy
    pad = _on(inp.pad, dets.device)[frame].repeat(1, 2)  # (N, 4)
    boxes = (as_float32(dets.boxes) - pad) / scale
    limit = frame_sizes(inp.frames, dets.device)[frame].repeat(1, 2)  # (N, 4) w, h, w, h
    boxes = torch.minimum(boxes.clamp_(min=0.0), limit)
    return Detections(boxes, dets.scores, dets.class_ids, dets.frame, dets.track_ids)


def _on(t: "torch.Tensor", device: "torch.device") -> "torch.Tensor":
    """``t`` as float32 on ``device`` (itself when it is: no PyTorch call)."""
    import torch

    return as_float32(t) if t.device == device else t.to(device, torch.float32)
