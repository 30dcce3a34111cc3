"""The ``yolov5`` head: ``(B, N, 5 + C)`` -> :class:`~vidpipe.models.base.Candidates`.

The layout of Darknet YOLO networks as built by vidpipe and of YOLOv5/YOLOv7 exports: per anchor
``cx, cy, w, h`` in model-input pixels, objectness, then ``C`` class probabilities (already
sigmoid-activated). Score is ``objectness x max class probability``, class its argmax; every
class's ``objectness x probability`` goes along as ``class_scores`` for multi-label NMS.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from vidpipe.errors import ModelError
from vidpipe.models.base import Candidates, Head

if TYPE_CHECKING:
    import torch

__all__ = ["YoloV5Head", "cxcywh_to_xyxy"]


def cxcywh_to_xyxy(boxes: "torch.Tensor") -> "torch.Tensor":
    """``(..., 4)`` centre/size boxes to corners ``x1, y1, x2, y2`` (same dtype and device)."""
    import torch

    half = boxes[..., 2:4] * 0.5
    return torch.cat((boxes[..., :2] - half, boxes[..., :2] + half), dim=-1)


class YoloV5Head(Head):
    """Decodes a ``(B, N, 5 + C)`` tensor (any float dtype, any device) into float32 candidates.

    A tuple or list whose first element is that tensor (how some exports return it) is accepted.
    """

    name: ClassVar[str] = "yolov5"

    def __call__(self, raw: Any, input_size: tuple[int, int]) -> Candidates:
        import torch

        if isinstance(raw, (tuple, list)) and raw:
            raw = raw[0]
        if not isinstance(raw, torch.Tensor) or raw.ndim != 3 or raw.shape[-1] < 6:
            got = tuple(raw.shape) if isinstance(raw, torch.Tensor) else type(raw).__name__
            raise ModelError(f"the yolov5 head expects a (B, N, 5 + classes) tensor, got {got}")
        raw = raw.float()
        class_scores = raw[..., 4:5] * raw[..., 5:]
        scores, class_ids = class_scores.max(dim=-1)
        return Candidates(
            boxes=cxcywh_to_xyxy(raw[..., :4]), scores=scores, class_ids=class_ids, class_scores=class_scores
        )
