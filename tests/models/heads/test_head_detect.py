"""Head detection from output shapes (rules in vidpipe.models.heads.detect)."""

from __future__ import annotations

import pytest
import torch

from vidpipe.errors import ModelError
from vidpipe.models.heads.detect import detect_head, num_classes_of


def t(*shape):
    return torch.zeros(shape)


def tv_list(n=2):
    return [{"boxes": t(3, 4), "labels": torch.zeros(3, dtype=torch.int64), "scores": t(3)} for _ in range(n)]


@pytest.mark.parametrize(
    ("raw", "head", "classes"),
    [
        (t(2, 25200, 85), "yolov5", 80),  # YOLOv5 / Darknet, 80 classes
        (t(1, 2535, 85), "yolov5", 80),  # yolov3-tiny at 416
        ((t(2, 25200, 85), [t(2, 3, 80, 80, 85)]), "yolov5", 80),  # YOLOv5 PyTorch (pred, features)
        (t(2, 84, 8400), "yolov8", 80),  # YOLOv8 / YOLO11
        ((t(2, 84, 8400), [t(2, 144, 80, 80)]), "yolov8", 80),  # Ultralytics eval (y, x)
        ({"output0": t(1, 6, 8400)}, "yolov8", 2),  # ONNX single output, 2 classes
        ({"pred_logits": t(2, 100, 92), "pred_boxes": t(2, 100, 4)}, "detr", 91),  # DETR COCO
        ({"logits": t(2, 100, 92), "pred_boxes": t(2, 100, 4), "last_hidden_state": t(2, 100, 256)}, "detr", 91),
        ({"pred_logits": t(2, 300, 91), "pred_boxes": t(2, 300, 4)}, "rfdetr", 91),  # RF-DETR COCO
        ({"dets": t(1, 300, 4), "labels": t(1, 300, 5)}, "rfdetr", 5),  # RF-DETR ONNX, named
        ((t(1, 300, 4), t(1, 300, 91)), "rfdetr", 91),  # boxes first, by shape
        (tv_list(), "torchvision", None),
        (({}, tv_list()), "torchvision", None),  # scripted torchvision: (losses, detections)
    ],
)
def test_detect(raw, head, classes):
    assert detect_head(raw) == head
    assert num_classes_of(raw, head) == classes


def test_hint_decides_detr_vs_rfdetr():
    raw = {"pred_logits": t(1, 100, 21), "pred_boxes": t(1, 100, 4)}
    with pytest.raises(ModelError, match="names="):
        detect_head(raw)
    assert detect_head(raw, num_classes_hint=20) == "detr"
    assert detect_head(raw, num_classes_hint=21) == "rfdetr"
    with pytest.raises(ModelError, match="21 logits per query but 5 class names"):
        detect_head(raw, num_classes_hint=5)


def test_hint_decides_yolo_layout():
    # [B, 12, 8]: by size YOLOv5 with 3 classes; 8 class names make it YOLOv8 (4 + 8 = 12 rows)
    raw = t(1, 12, 8)
    assert detect_head(raw) == "yolov5"
    assert detect_head(raw, num_classes_hint=8) == "yolov8"  # 4 + 8 == 12: the count overrides size
    assert detect_head(raw, num_classes_hint=3) == "yolov5"
    with pytest.raises(ModelError, match="fits neither"):
        detect_head(raw, num_classes_hint=7)


def test_tie_broken_by_size_when_both_counts_fit():
    raw = t(1, 6, 7)  # YOLOv8 with 2 classes (4 + 2 = 6) or YOLOv5 with 2 (5 + 2 = 7)
    assert detect_head(raw, num_classes_hint=2) == "yolov8"


@pytest.mark.parametrize(
    "raw",
    [t(1, 8, 8), t(2, 100), t(1, 3, 4), "text", [t(1, 4, 4), t(1, 4, 4)], {"a": t(1, 5), "b": t(1, 5)}],
)
def test_ambiguous_or_unknown_asks_for_head(raw):
    with pytest.raises(ModelError, match="head="):
        detect_head(raw)
