"""Which output head decodes a model, guessed from the structure and shapes of its raw output.

Rules, in order (``C`` = number of classes, ``hint`` = ``num_classes_hint`` when known, e.g. from a
names file or metadata):

1. A list of dicts with ``boxes``, ``labels``, ``scores`` (or a tuple holding such a list, as
   scripted torchvision models return ``(losses, detections)``) -> ``"torchvision"``.
2. Logits + boxes (a mapping with ``pred_logits``/``logits``/``labels`` and
   ``pred_boxes``/``boxes``/``dets``, or a pair of 3-D tensors ``[B, Q, K]`` and ``[B, Q, 4]``) -> the
   DETR family. ``"detr"`` (softmax, last class = no-object, ``K = C + 1``) or ``"rfdetr"``
   (sigmoid, ``K = C``): with a hint, ``K == hint + 1`` -> detr and ``K == hint`` -> rfdetr; without
   one, an output named ``dets`` (RF-DETR's ONNX export) -> rfdetr, ``K == 92`` (COCO's 91 ids +
   no-object, original DETR) -> detr, ``K == 91`` (RF-DETR's COCO) -> rfdetr; otherwise ambiguous.
3. One 3-D tensor ``[B, A, L]`` (alone, or first in a tuple/list as Ultralytics/YOLOv5 PyTorch
   models return ``(pred, features)``):

   - ``"yolov5"`` (``[B, N, 5 + C]``: boxes, objectness, classes) when ``A > L >= 6``;
   - ``"yolov8"`` (``[B, 4 + C, N]``: boxes, classes; also YOLO11) when ``L > A >= 5``;
   - with a hint, the count decides first: ``L == 5 + hint`` -> yolov5, ``A == 4 + hint`` -> yolov8
     (the size rule breaks a tie).
4. Anything else, or a tie that cannot be broken -> :class:`ModelError` asking for ``head=``
   (``--head``). An explicit ``head=`` always wins over detection.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from vidpipe.errors import ModelError
from vidpipe.models.backends.common import describe_raw

if TYPE_CHECKING:
    import torch

HEAD_NAMES = ("yolov5", "yolov8", "detr", "rfdetr", "torchvision")

LOGIT_KEYS = ("pred_logits", "logits", "labels", "scores", "class_logits")
BOX_KEYS = ("pred_boxes", "boxes", "dets", "bboxes")
TORCHVISION_KEYS = ("boxes", "labels", "scores")


def _is_tensor(x: Any) -> bool:
    import torch

    return isinstance(x, torch.Tensor)


def torchvision_detections(raw: Any) -> list[Mapping] | None:
    """The per-image list of dicts of a torchvision detection model, or ``None``."""
    def per_image(x: Any) -> bool:
        return isinstance(x, (list, tuple)) and bool(x) and all(
            isinstance(d, Mapping) and all(k in d for k in TORCHVISION_KEYS) for d in x
        )

    if per_image(raw):
        return list(raw)
    if isinstance(raw, (list, tuple)):
        for item in raw:
            if per_image(item):
                return list(item)
    return None


def logits_and_boxes(raw: Any) -> "tuple[torch.Tensor, torch.Tensor, str | None] | None":
    """``(logits [B, Q, K], boxes [B, Q, 4], boxes_key)`` of a DETR-style output, or ``None``.

    Keys are matched by name first (see ``LOGIT_KEYS``/``BOX_KEYS``), then by shape; raises
    ModelError when two candidate tensors both end in 4 and nothing tells them apart.
    """
    if isinstance(raw, Mapping):
        logits = next((raw[k] for k in LOGIT_KEYS if k in raw and _is_tensor(raw[k])), None)
        box_key = next((k for k in BOX_KEYS if k in raw and _is_tensor(raw[k])), None)
        if logits is not None and box_key is not None and logits.ndim == 3 and raw[box_key].ndim == 3:
            return logits, raw[box_key], box_key
        tensors = [v for v in raw.values() if _is_tensor(v)]
    elif isinstance(raw, (list, tuple)) and not torchvision_detections(raw):
        tensors = [v for v in raw if _is_tensor(v)]
        if len(tensors) != len(raw):
            return None
    else:
        return None
    if len(tensors) != 2 or any(t.ndim != 3 for t in tensors):
        return None
    a, b = tensors
    if a.shape[:2] != b.shape[:2]:
        return None
    if a.shape[2] == 4 and b.shape[2] == 4:
        raise ModelError(
            f"cannot tell the logits from the boxes in {describe_raw(raw)}: both end in 4; "
            "name the outputs pred_logits/pred_boxes or pass head="
        )
    if b.shape[2] == 4:
        return a, b, None
    if a.shape[2] == 4:
        return b, a, None
    return None


def primary_tensor(raw: Any) -> "torch.Tensor | None":
    """The prediction tensor of a single-tensor YOLO output (alone or first in a tuple/list)."""
    if _is_tensor(raw):
        return raw
    if isinstance(raw, (list, tuple)) and raw and _is_tensor(raw[0]):
        return raw[0]
    if isinstance(raw, Mapping):
        tensors = [v for v in raw.values() if _is_tensor(v)]
        if len(tensors) == 1:
            return tensors[0]
    return None


def _detr_kind(k: int, box_key: str | None, hint: int | None, raw: Any) -> str:
    if hint is not None:
        if k == hint + 1:
            return "detr"
        if k == hint:
            return "rfdetr"
        raise ModelError(
            f"the model has {k} logits per query but {hint} class names; neither DETR (C + 1) nor "
            "RF-DETR (C) fits: check the names, or pass head="
        )
    if box_key == "dets":
        return "rfdetr"
    if k == 92:
        return "detr"
    if k == 91:
        return "rfdetr"
    raise ModelError(
        f"the output {describe_raw(raw)} is DETR-like but {k} logits per query could be DETR "
        f"({k - 1} classes + no-object) or RF-DETR ({k} classes): pass names= or head='detr'/'rfdetr'"
    )


def _yolo_kind(t: "torch.Tensor", hint: int | None, raw: Any) -> str:
    a, length = int(t.shape[1]), int(t.shape[2])
    by_size = "yolov5" if a > length >= 6 else "yolov8" if length > a >= 5 else None
    if hint is not None:
        fits = [h for h, ok in (("yolov5", length == 5 + hint), ("yolov8", a == 4 + hint)) if ok]
        if len(fits) == 1:
            return fits[0]
        if len(fits) == 2 and by_size:
            return by_size
        if not fits:
            raise ModelError(
                f"the output {describe_raw(raw)} fits neither YOLOv5 [B, N, 5 + {hint}] nor "
                f"YOLOv8 [B, 4 + {hint}, N] for {hint} classes: check the names, or pass head="
            )
    if by_size is None:
        raise ModelError(
            f"cannot tell the output head from {describe_raw(raw)}: it could be YOLOv5 [B, N, 5 + C] "
            f"or YOLOv8 [B, 4 + C, N]; pass head= (one of {', '.join(HEAD_NAMES)})"
        )
    return by_size


def detect_head(raw: Any, *, num_classes_hint: int | None = None) -> str:
    """Name of the head that decodes ``raw`` (see the module docstring for the rules)."""
    if torchvision_detections(raw) is not None:
        return "torchvision"
    pair = logits_and_boxes(raw)
    if pair is not None:
        logits, _, box_key = pair
        return _detr_kind(int(logits.shape[2]), box_key, num_classes_hint, raw)
    t = primary_tensor(raw)
    if t is not None and t.ndim == 3:
        return _yolo_kind(t, num_classes_hint, raw)
    raise ModelError(
        f"cannot tell the output head from the model's output {describe_raw(raw)}; pass head= "
        f"(one of {', '.join(HEAD_NAMES)})"
    )


def num_classes_of(raw: Any, head: str) -> int | None:
    """Number of classes a raw output has under ``head`` (``None`` when the output cannot say)."""
    if head == "torchvision":
        return None
    if head in ("detr", "rfdetr"):
        pair = logits_and_boxes(raw)
        if pair is None:
            return None
        k = int(pair[0].shape[2])
        return k - 1 if head == "detr" else k
    t = primary_tensor(raw)
    if t is None or t.ndim != 3:
        return None
    if head == "yolov8":
        return int(t.shape[1]) - 4
    if head == "yolov5":
        return int(t.shape[2]) - 5
    return None
