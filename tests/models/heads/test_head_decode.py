"""Heads on raw outputs built in the test: yolov8, detr, rfdetr, torchvision."""

from __future__ import annotations

import math

import pytest
import torch

from vidpipe.errors import ModelError
from vidpipe.models.heads.detr import DetrHead, RfDetrHead
from vidpipe.models.heads.torchvision import TorchvisionHead
from vidpipe.models.heads.yolov8 import YoloV8Head

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def _dev(name):
    if name == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    return name


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_yolov8(device, dtype):
    device = _dev(device)
    raw = torch.zeros(1, 4 + 2, 3, dtype=dtype, device=device)
    raw[0, :4, 0] = torch.tensor([50.0, 40.0, 20.0, 10.0])  # cx, cy, w, h
    raw[0, 4:, 0] = torch.tensor([0.2, 0.7])
    raw[0, :4, 1] = torch.tensor([10.0, 10.0, 4.0, 6.0])
    raw[0, 4:, 1] = torch.tensor([0.9, 0.1])
    c = YoloV8Head()((raw, ["features ignored"]), (64, 96))
    assert c.boxes.dtype == torch.float32 and c.boxes.device.type == device
    torch.testing.assert_close(c.boxes[0, 0].cpu(), torch.tensor([40.0, 35.0, 60.0, 45.0]))
    torch.testing.assert_close(c.boxes[0, 1].cpu(), torch.tensor([8.0, 7.0, 12.0, 13.0]))
    assert c.class_ids[0].tolist() == [1, 0, 0]
    torch.testing.assert_close(c.scores[0].cpu(), torch.tensor([0.7, 0.9, 0.0]), atol=1e-3, rtol=1e-3)
    assert c.needs_nms


def test_detr_softmax_drops_no_object():
    logits = torch.tensor([[[2.0, 0.0, 0.0], [0.0, 0.0, 5.0]]])  # 2 classes + no-object
    boxes = torch.tensor([[[0.5, 0.5, 0.2, 0.4], [0.1, 0.1, 0.1, 0.1]]])
    c = DetrHead()({"logits": logits, "pred_boxes": boxes}, (100, 200))  # Hugging Face key names
    e2 = math.exp(2.0)
    torch.testing.assert_close(c.scores[0, 0], torch.tensor(e2 / (e2 + 2)))
    assert c.class_ids[0, 0] == 0
    assert float(c.scores[0, 1]) == pytest.approx(1 / (2 + math.exp(5.0)))  # mostly "no object"
    torch.testing.assert_close(c.boxes[0, 0], torch.tensor([80.0, 30.0, 120.0, 70.0]))  # W=200, H=100
    assert not c.needs_nms


def test_rfdetr_topk_over_queries_and_classes():
    logits = torch.full((1, 3, 2), -9.0)
    logits[0, 0, 1] = 3.0
    logits[0, 2, 0] = 2.0
    logits[0, 2, 1] = 1.0  # the same query scores for two classes: both kept
    boxes = torch.tensor([[[0.5, 0.5, 1.0, 1.0], [0.2, 0.2, 0.1, 0.1], [0.25, 0.75, 0.5, 0.5]]])
    c = RfDetrHead(top_k=3)((boxes, logits), (40, 80))
    assert c.scores.shape == (1, 3) and not c.needs_nms
    torch.testing.assert_close(c.scores[0], torch.sigmoid(torch.tensor([3.0, 2.0, 1.0])))
    assert c.class_ids[0].tolist() == [1, 0, 1]
    torch.testing.assert_close(c.boxes[0, 0], torch.tensor([0.0, 0.0, 80.0, 40.0]))
    torch.testing.assert_close(c.boxes[0, 1], torch.tensor([0.0, 20.0, 40.0, 40.0]))
    torch.testing.assert_close(c.boxes[0, 2], c.boxes[0, 1])


def test_torchvision_pads_and_accepts_scripted_tuple():
    dets = [
        {"boxes": torch.tensor([[1.0, 2.0, 3.0, 4.0]]), "labels": torch.tensor([7]), "scores": torch.tensor([0.8])},
        {"boxes": torch.zeros((0, 4)), "labels": torch.zeros(0, dtype=torch.int64), "scores": torch.zeros(0)},
    ]
    c = TorchvisionHead()(({}, dets), (10, 10))
    assert c.boxes.shape == (2, 1, 4) and not c.needs_nms
    assert c.class_ids.tolist() == [[7], [0]] and c.scores.tolist() == [[pytest.approx(0.8)], [0.0]]
    empty = TorchvisionHead()([dets[1]], (10, 10))
    assert empty.boxes.shape == (1, 0, 4)


@pytest.mark.parametrize(
    ("head", "raw"),
    [
        (YoloV8Head(), torch.zeros(1, 4, 10)),
        (YoloV8Head(), {"a": torch.zeros(1, 5)}),
        (DetrHead(), torch.zeros(1, 10, 85)),
        (RfDetrHead(), [torch.zeros(1, 5, 4)]),
        (TorchvisionHead(), torch.zeros(1, 10, 6)),
    ],
)
def test_wrong_structure_is_a_model_error(head, raw):
    with pytest.raises(ModelError, match=head.name):
        head(raw, (32, 32))
