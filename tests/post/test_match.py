"""match_detections: pairing two detection sets by frame, class and IoU."""

from __future__ import annotations

import pytest
import torch

from vidpipe.post.match import match_detections
from vidpipe.types import Detections


def _d(rows) -> Detections:
    """rows: (x1, y1, x2, y2, score, class, frame)."""
    t = torch.tensor(rows, dtype=torch.float32).reshape(-1, 7)
    return Detections(t[:, :4], t[:, 4], t[:, 5].long(), t[:, 6].long())


def test_identical_sets_match():
    a = _d([[0, 0, 10, 10, 0.9, 1, 0], [20, 20, 40, 40, 0.5, 2, 1]])
    rep = match_detections(a, a)
    assert rep.matched == 2 and rep.identical_sets
    assert rep.min_iou == pytest.approx(1.0) and rep.max_score_diff == 0.0


def test_class_frame_and_iou_must_agree():
    a = _d([[0, 0, 10, 10, 0.9, 1, 0], [20, 20, 40, 40, 0.5, 2, 0], [50, 50, 60, 60, 0.4, 3, 0]])
    b = _d([[0, 0, 10, 11, 0.85, 1, 0], [20, 20, 40, 40, 0.5, 5, 0], [50, 50, 60, 60, 0.4, 3, 1]])
    rep = match_detections(a, b, iou=0.9)
    assert rep.matched == 1 and rep.min_iou == pytest.approx(100 / 110)
    assert rep.max_score_diff == pytest.approx(0.05, abs=1e-6)
    assert sorted(rep.unmatched_a) == pytest.approx([0.4, 0.5]) and len(rep.unmatched_b) == 2
    assert not rep.identical_sets and rep.as_dict()["matched"] == 1
    assert match_detections(a, b, iou=0.95).matched == 0


def test_empty_sides():
    a = _d([[0, 0, 10, 10, 0.9, 1, 0]])
    rep = match_detections(a, Detections.empty())
    assert rep.matched == 0 and rep.unmatched_a == pytest.approx((0.9,)) and rep.unmatched_b == ()
    assert match_detections(Detections.empty(), Detections.empty()).identical_sets
