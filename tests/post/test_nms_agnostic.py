"""Class-agnostic NMS (``agnostic=True``, ``vidpipe detect --agnostic``), held against
torchvision's plain ``nms`` run frame by frame over all classes together."""

from __future__ import annotations

import pytest
import torch
from torchvision.ops import nms as tv_nms

from vidpipe.errors import ConfigError
from vidpipe.models.base import Candidates
from vidpipe.models.detector import DetectorConfig
from vidpipe.post.nms import nms

A = [10.0, 10.0, 50.0, 50.0]
A2 = [12.0, 12.0, 52.0, 52.0]  # IoU with A about 0.82


def test_overlapping_boxes_of_different_classes_suppress_each_other():
    cand = Candidates(
        boxes=torch.tensor([[A, A2]]), scores=torch.tensor([[0.9, 0.8]]), class_ids=torch.tensor([[0, 1]])
    )
    assert sorted(nms(cand, num_classes=2).class_ids.tolist()) == [0, 1]
    d = nms(cand, num_classes=2, agnostic=True)
    assert d.class_ids.tolist() == [0] and d.boxes.tolist() == [A]


def test_matches_torchvision_per_frame():
    g = torch.Generator().manual_seed(0)
    b, n = 3, 200
    xy = torch.rand(b, n, 2, generator=g) * 300
    wh = torch.rand(b, n, 2, generator=g) * 60 + 5
    boxes = torch.cat([xy, xy + wh], dim=-1)
    scores = torch.rand(b, n, generator=g)
    classes = torch.randint(0, 5, (b, n), generator=g)
    d = nms(Candidates(boxes=boxes, scores=scores, class_ids=classes), conf=0.3, iou=0.5, num_classes=5,
            agnostic=True, max_det=1000)  # fmt: skip
    for f in range(b):
        m = scores[f] > 0.3
        keep = tv_nms(boxes[f][m], scores[f][m], 0.5)
        ref = sorted(zip(scores[f][m][keep].tolist(), classes[f][m][keep].tolist()))
        got = sorted(zip(d.scores[d.frame == f].tolist(), d.class_ids[d.frame == f].tolist()))
        assert [c for _, c in got] == [c for _, c in ref] and len(got) < m.sum()
        assert [s for s, _ in got] == pytest.approx([s for s, _ in ref])


def test_config_checks_the_flag():
    with pytest.raises(ConfigError, match="agnostic"):
        DetectorConfig(agnostic="yes")  # type: ignore[arg-type]
