"""torchvision detection models (Faster R-CNN, RetinaNet, FCOS, SSD, ...): a list of dicts.

Each image's dict holds ``boxes`` ``[n, 4]`` xyxy in input pixels, ``labels`` ``[n]`` int64 and
``scores`` ``[n]``, already filtered and NMS'd by the model. Scripted models return
``(losses, detections)``; both forms are accepted. Images are padded to the largest ``n`` in the
batch with score 0 (dropped by any confidence threshold); ``needs_nms`` is False.
"""

from __future__ import annotations

from typing import Any, ClassVar

from vidpipe.errors import ModelError
from vidpipe.models.backends.common import describe_raw
from vidpipe.models.base import Candidates, Head
from vidpipe.models.heads.detect import torchvision_detections


class TorchvisionHead(Head):
    """List of per-image ``{"boxes", "labels", "scores"}`` -> padded :class:`Candidates`."""

    name: ClassVar[str] = "torchvision"

    def __call__(self, raw: Any, input_size: tuple[int, int]) -> Candidates:
        import torch

        dets = torchvision_detections(raw)
        if dets is None:
            raise ModelError(
                f"the torchvision head expects a list of dicts with boxes/labels/scores, got {describe_raw(raw)}"
            )
        b = len(dets)
        n = max(int(d["boxes"].shape[0]) for d in dets)
        device = dets[0]["boxes"].device
        boxes = torch.zeros((b, n, 4), dtype=torch.float32, device=device)
        scores = torch.zeros((b, n), dtype=torch.float32, device=device)
        class_ids = torch.zeros((b, n), dtype=torch.int64, device=device)
        for i, d in enumerate(dets):
            k = int(d["boxes"].shape[0])
            if k:
                boxes[i, :k] = d["boxes"].reshape(k, 4)
                scores[i, :k] = d["scores"].reshape(k)
                class_ids[i, :k] = d["labels"].reshape(k)
        return Candidates(boxes, scores, class_ids, needs_nms=False)
