"""YOLOv8 / YOLO11 output head: ``[B, 4 + C, N]``, anchor-free, no objectness.

Rows 0-3 are ``cx, cy, w, h`` in model-input pixels, rows ``4 .. 4 + C`` the class scores, already
passed through a sigmoid by the network (Ultralytics exports). Score = best class score.
"""

from __future__ import annotations

from typing import Any, ClassVar

from vidpipe.errors import ModelError
from vidpipe.models.backends.common import describe_raw
from vidpipe.models.base import Candidates, Head
from vidpipe.models.heads.detect import primary_tensor
from vidpipe.models.heads.yolo import cxcywh_to_xyxy


class YoloV8Head(Head):
    """``[B, 4 + C, N]`` (a tensor, or first in a tuple) -> :class:`Candidates` with N boxes per image."""

    name: ClassVar[str] = "yolov8"

    def __call__(self, raw: Any, input_size: tuple[int, int]) -> Candidates:
        t = primary_tensor(raw)
        if t is None or t.ndim != 3 or t.shape[1] < 5:
            raise ModelError(f"the yolov8 head expects a [B, 4 + C, N] tensor, got {describe_raw(raw)}")
        t = t.float()
        boxes = cxcywh_to_xyxy(t[:, :4].transpose(1, 2))
        class_scores = t[:, 4:].transpose(1, 2)
        scores, class_ids = class_scores.max(dim=-1)
        return Candidates(boxes, scores, class_ids, needs_nms=True, class_scores=class_scores)
