"""The yolov5 head and the head registry."""

from __future__ import annotations

import pytest
import torch

from vidpipe.errors import ModelError
from vidpipe.models.base import Candidates, Head
from vidpipe.models.heads import HEADS, available_heads, get_head, register_head
from vidpipe.models.heads.yolo import YoloV5Head, cxcywh_to_xyxy


def test_decode_scores_classes_and_boxes():
    raw = torch.tensor(
        [
            [[100.0, 50.0, 20.0, 10.0, 0.5, 0.1, 0.8, 0.3], [10.0, 10.0, 4.0, 4.0, 1.0, 0.9, 0.2, 0.95]],
            [[0.0, 0.0, 2.0, 2.0, 0.0, 1.0, 1.0, 1.0], [5.0, 6.0, 1.0, 3.0, 0.25, 0.4, 0.4, 0.1]],
        ]
    )
    cand = get_head("yolov5")(raw, (416, 416))
    assert isinstance(cand, Candidates) and cand.needs_nms
    assert cand.boxes.shape == (2, 2, 4) and cand.boxes.dtype == torch.float32
    assert torch.allclose(cand.boxes[0, 0], torch.tensor([90.0, 45.0, 110.0, 55.0]))
    assert torch.allclose(cand.boxes[1, 1], torch.tensor([4.5, 4.5, 5.5, 7.5]))
    assert torch.allclose(cand.scores, torch.tensor([[0.4, 0.95], [0.0, 0.1]]))
    assert cand.class_ids.tolist() == [[1, 2], [0, 0]]  # ties go to the first class


def test_half_input_and_tuple_output_accepted():
    raw = torch.rand(1, 7, 85).half()
    cand = YoloV5Head()((raw, "aux"), (640, 640))
    assert cand.scores.dtype == torch.float32 and cand.class_ids.dtype == torch.int64
    ref = YoloV5Head()(raw.float(), (640, 640))
    assert torch.allclose(cand.scores, ref.scores)


@pytest.mark.parametrize("raw", [torch.zeros(2, 85), torch.zeros(1, 10, 5), "text"])
def test_bad_output_is_a_model_error(raw):
    with pytest.raises(ModelError, match="yolov5 head expects"):
        YoloV5Head()(raw, (416, 416))


def test_cxcywh_to_xyxy():
    assert cxcywh_to_xyxy(torch.tensor([[10.0, 20.0, 4.0, 8.0]])).tolist() == [[8.0, 16.0, 12.0, 24.0]]


def test_registry():
    assert {"yolov5", "yolov8", "detr", "rfdetr", "torchvision"} <= set(available_heads())
    for name in available_heads():
        head = get_head(name)  # lazy entries import on first use
        assert isinstance(head, Head) and head.name == name
    with pytest.raises(ModelError, match="unknown output head 'nope'; known heads: .*yolov5"):
        get_head("nope")

    class Mine(YoloV5Head):
        name = "test-mine"

    try:
        assert register_head(Mine) is Mine
        assert isinstance(get_head("test-mine"), Mine)
    finally:
        HEADS.pop("test-mine", None)

    class Nameless(Head):
        def __call__(self, raw, input_size):  # pragma: no cover - never called
            raise NotImplementedError

    with pytest.raises(ModelError, match="no `name`"):
        register_head(Nameless)
