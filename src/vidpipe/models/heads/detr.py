"""Set-prediction heads: DETR and RF-DETR (one box per query, no NMS).

Both take ``logits [B, Q, K]`` and ``boxes [B, Q, 4]`` (``cx, cy, w, h`` normalised to [0, 1] of
the model input), as a dict (``pred_logits``/``pred_boxes``, ``logits``, ``dets``/``labels``) or a
pair of tensors (see :func:`vidpipe.models.heads.detect.logits_and_boxes`).

- ``"detr"`` (facebookresearch/detr, Hugging Face DETR/Deformable/Conditional): softmax over
  ``K = C + 1`` classes, the last one "no object", dropped; score = best remaining probability.
  ``Q`` candidates per image.
- ``"rfdetr"`` (RF-DETR, LW-DETR): sigmoid over ``K = C`` classes; the ``top_k`` best
  (query, class) pairs over all ``Q * C`` become the candidates, as RF-DETR's own postprocess
  does, so one query may yield boxes of two classes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from vidpipe.errors import ModelError
from vidpipe.models.backends.common import describe_raw
from vidpipe.models.base import Candidates, Head
from vidpipe.models.heads.detect import logits_and_boxes
from vidpipe.models.heads.yolo import cxcywh_to_xyxy

if TYPE_CHECKING:
    import torch


def _split(raw: Any, head: str) -> "tuple[torch.Tensor, torch.Tensor]":
    pair = logits_and_boxes(raw)
    if pair is None:
        raise ModelError(
            f"the {head} head expects logits [B, Q, K] and normalised boxes [B, Q, 4], got {describe_raw(raw)}"
        )
    return pair[0].float(), pair[1].float()


def _to_pixels(boxes: "torch.Tensor", input_size: tuple[int, int]) -> "torch.Tensor":
    """Normalised ``cxcywh`` ``[..., 4]`` -> xyxy in model-input pixels."""
    import torch

    h, w = input_size
    scale = torch.tensor([w, h, w, h], dtype=boxes.dtype, device=boxes.device)
    return cxcywh_to_xyxy(boxes * scale)


class DetrHead(Head):
    """Softmax logits with a trailing no-object class -> ``Q`` candidates per image, no NMS."""

    name: ClassVar[str] = "detr"

    def __call__(self, raw: Any, input_size: tuple[int, int]) -> Candidates:
        logits, boxes = _split(raw, self.name)
        if logits.shape[2] < 2:
            raise ModelError(f"the detr head needs at least 2 logits per query (C + no-object), got {logits.shape[2]}")
        prob = logits.softmax(-1)[..., :-1]
        scores, class_ids = prob.max(-1)
        return Candidates(_to_pixels(boxes, input_size), scores, class_ids, needs_nms=False)


class RfDetrHead(Head):
    """Sigmoid logits -> the ``top_k`` (query, class) pairs per image, no NMS."""

    name: ClassVar[str] = "rfdetr"

    def __init__(self, top_k: int = 300) -> None:
        self.top_k = top_k

    def __call__(self, raw: Any, input_size: tuple[int, int]) -> Candidates:
        import torch

        logits, boxes = _split(raw, self.name)
        b, q, c = logits.shape
        k = min(self.top_k, q * c)
        scores, index = logits.sigmoid().reshape(b, q * c).topk(k, dim=1)
        query = torch.div(index, c, rounding_mode="floor")
        class_ids = index % c
        picked = torch.gather(boxes, 1, query.unsqueeze(-1).expand(b, k, 4))
        return Candidates(_to_pixels(picked, input_size), scores, class_ids, needs_nms=False)
