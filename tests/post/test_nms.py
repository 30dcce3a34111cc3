"""Batched class-aware NMS: per class, per frame, thresholds, class filter, caps, one call for the batch."""

from __future__ import annotations

import pytest
import torch
from torchvision.ops import batched_nms

from vidpipe.errors import ConfigError
from vidpipe.models.base import Candidates
from vidpipe.post.nms import grouped_nms, nms


def _cand(boxes, scores, classes, needs_nms=True) -> Candidates:
    return Candidates(
        boxes=torch.tensor(boxes, dtype=torch.float32),
        scores=torch.tensor(scores, dtype=torch.float32),
        class_ids=torch.tensor(classes, dtype=torch.int64),
        needs_nms=needs_nms,
    )


A = [10.0, 10.0, 50.0, 50.0]
A2 = [12.0, 12.0, 52.0, 52.0]  # IoU with A about 0.82
FAR = [100.0, 100.0, 140.0, 150.0]


def test_overlapping_boxes_of_different_classes_both_survive():
    d = nms(_cand([[A, A2]], [[0.9, 0.8]], [[0, 1]]), num_classes=2)
    assert sorted(d.class_ids.tolist()) == [0, 1]
    d = nms(_cand([[A, A2]], [[0.9, 0.8]], [[1, 1]]), num_classes=2)
    assert d.class_ids.tolist() == [1] and d.scores.tolist() == pytest.approx([0.9])
    assert d.boxes.tolist() == [A]


def test_frames_are_independent():
    d = nms(_cand([[A, FAR], [A2, A]], [[0.9, 0.7], [0.8, 0.6]], [[0, 0], [0, 0]]), num_classes=1)
    assert d.frame.tolist() == [0, 0, 1]  # frame 1: A2 suppresses A; frame 0 boxes untouched
    assert d.scores.tolist() == pytest.approx([0.9, 0.7, 0.8])


def test_iou_threshold():
    c = _cand([[A, A2]], [[0.9, 0.8]], [[0, 0]])
    assert len(nms(c, iou=0.85)) == 2 and len(nms(c, iou=0.8)) == 1


def test_conf_is_strict_and_class_filter():
    c = _cand([[A, FAR, [0, 0, 5, 5]]], [[0.25, 0.26, 0.9]], [[0, 1, 2]])
    assert nms(c, conf=0.25).scores.tolist() == pytest.approx([0.9, 0.26])
    d = nms(c, conf=0.1, classes=torch.tensor([1, 0]))
    assert sorted(d.class_ids.tolist()) == [0, 1]


def test_max_det_per_frame_keeps_the_best():
    boxes = [[[i * 20.0, 0.0, i * 20.0 + 10.0, 10.0] for i in range(10)]] * 2
    scores = [[0.3 + 0.05 * i for i in range(10)], [0.9 - 0.05 * i for i in range(10)]]
    d = nms(_cand(boxes, scores, [[0] * 10] * 2), max_det=3)
    assert d.frame.tolist() == [0, 0, 0, 1, 1, 1]
    assert d.scores.tolist() == pytest.approx([0.75, 0.7, 0.65, 0.9, 0.85, 0.8])


@pytest.mark.parametrize("max_det", [3, 4, 5, 6])
def test_max_det_caps_only_the_frames_over_it(max_det):
    # the batch keeps 5 + 1 + 0 rows: at max_det >= 6 nothing is cut (the batch's total decides, no
    # host sync); below it, only frame 0 loses rows, its lowest-scored
    row = [[i * 20.0, 0.0, i * 20.0 + 10.0, 10.0] for i in range(5)]
    scores = [[0.5, 0.9, 0.4, 0.8, 0.3], [0.1, 0.1, 0.6, 0.1, 0.1], [0.1] * 5]
    d = nms(_cand([row] * 3, scores, [[0] * 5] * 3), max_det=max_det)
    first = [0.9, 0.8, 0.5, 0.4, 0.3][:max_det]
    assert d.frame.tolist() == [0] * len(first) + [1]
    assert d.scores.tolist() == pytest.approx([*first, 0.6])


def test_max_candidates_caps_per_frame():
    boxes = [[[i * 20.0, 0.0, i * 20.0 + 10.0, 10.0] for i in range(6)]]
    d = nms(_cand(boxes, [[0.5, 0.9, 0.4, 0.8, 0.3, 0.7]], [[0] * 6]), max_candidates=2)
    assert d.scores.tolist() == pytest.approx([0.9, 0.8])


def test_set_prediction_candidates_skip_nms():
    d = nms(_cand([[A, A2, FAR]], [[0.5, 0.9, 0.1]], [[0, 0, 0]], needs_nms=False))
    assert d.scores.tolist() == pytest.approx([0.9, 0.5])  # overlapping boxes kept, sorted


def test_empty_results():
    d = nms(_cand([[A]], [[0.1]], [[0]]))
    assert len(d) == 0 and d.boxes.shape == (0, 4)
    e = nms(Candidates(torch.zeros(2, 0, 4), torch.zeros(2, 0), torch.zeros(2, 0, dtype=torch.int64)))
    assert len(e) == 0


def test_bad_options():
    with pytest.raises(ConfigError, match="iou=2"):
        nms(_cand([[A]], [[0.9]], [[0]]), iou=2)
    with pytest.raises(ConfigError, match="max_det=0"):
        nms(_cand([[A]], [[0.9]], [[0]]), max_det=0)


def test_matches_per_frame_torchvision_reference():
    g = torch.Generator().manual_seed(0)
    b, n, classes = 4, 400, 5
    xy = torch.rand(b, n, 2, generator=g) * 300 - 20  # some boxes start left of / above the image
    wh = torch.rand(b, n, 2, generator=g) * 80 + 2
    cand = Candidates(
        boxes=torch.cat([xy, xy + wh], -1),
        scores=torch.rand(b, n, generator=g),
        class_ids=torch.randint(0, classes, (b, n), generator=g),
    )
    got = nms(cand, conf=0.3, iou=0.5, max_det=1000, num_classes=classes)
    for f in range(b):
        m = cand.scores[f] > 0.3
        keep = batched_nms(cand.boxes[f][m], cand.scores[f][m], cand.class_ids[f][m], 0.5)
        want = cand.scores[f][m][keep]
        assert got.scores[got.frame == f].tolist() == pytest.approx(want.tolist())
        assert torch.equal(got.boxes[got.frame == f], cand.boxes[f][m][keep])
    assert nms(cand, conf=0.3, iou=0.5, max_det=1000).scores.tolist() == got.scores.tolist()  # classes inferred


def test_grouped_nms_keeps_precision_with_many_groups():
    """5,000 groups of 1,280-px boxes: offsets in float32 (torchvision's batched_nms trick) round
    coordinates to 0.5 px and turn IoU 0.4496 into 0.4536 > 0.45; float64 does not."""
    groups = torch.arange(5000).repeat_interleave(2)
    base = torch.tensor([[1000.0, 1000.0, 1100.0, 1100.0]])
    boxes = torch.cat([base, base + 21.24]).repeat(5000, 1)  # IoU 0.4496 < 0.45: both kept
    boxes[-1] = torch.tensor([0.0, 0.0, 1280.0, 720.0])
    boxes[-2] = torch.tensor([0.0, 0.0, 1279.0, 720.0])  # IoU 0.9992 in the last group: one kept
    scores = torch.rand(10000, generator=torch.Generator().manual_seed(1))
    keep = grouped_nms(boxes, scores, groups, 0.45)
    assert keep.numel() == 9999
    assert scores[keep].tolist() == sorted(scores[keep].tolist(), reverse=True)


def test_grouped_nms_with_negative_coordinates():
    """A box above-left of the image in group 1 must not suppress one at the far corner in group 0."""
    boxes = torch.tensor([[900.0, 900.0, 1000.0, 1000.0], [-100.0, -100.0, 0.0, 0.0]])
    keep = grouped_nms(boxes, torch.tensor([0.9, 0.8]), torch.tensor([0, 1]), 0.45)
    assert keep.tolist() == [0, 1]


def _multi(boxes, class_scores) -> Candidates:
    cs = torch.tensor(class_scores, dtype=torch.float32)
    scores, ids = cs.max(-1)
    return Candidates(torch.tensor(boxes, dtype=torch.float32), scores, ids, class_scores=cs)


def test_multi_label_counts_a_box_for_every_class_above_conf():
    """Darknet's rule: A (bicycle 0.6, motorbike 0.5) suppresses A2 (motorbike 0.4) and is reported
    under both classes; best-class-only keeps A2 as a motorbike instead."""
    cand = _multi([[A, A2]], [[[0.6, 0.5], [0.0, 0.4]]])
    d = nms(cand, num_classes=2, multi_label=True)
    got = sorted(zip(d.class_ids.tolist(), [round(s, 3) for s in d.scores.tolist()], d.boxes[:, 0].tolist()))
    assert got == [(0, 0.6, 10.0), (1, 0.5, 10.0)]
    d = nms(cand, num_classes=2, multi_label=False)
    got = sorted(zip(d.class_ids.tolist(), [round(s, 3) for s in d.scores.tolist()], d.boxes[:, 0].tolist()))
    assert got == [(0, 0.6, 10.0), (1, 0.4, 12.0)]
    d = nms(cand, num_classes=2, multi_label=True, classes=torch.tensor([1]))
    assert d.class_ids.tolist() == [1] and d.scores.tolist() == pytest.approx([0.5])
    d = nms(cand, num_classes=2, multi_label=True, conf=0.55)
    assert d.class_ids.tolist() == [0]


def test_multi_label_equals_darknets_do_nms_sort():
    """Random boxes and class scores of two frames against a direct port of Darknet's
    do_nms_sort (per class: sort by that class's score, zero every later box with IoU > thresh)."""
    g = torch.Generator().manual_seed(0)
    b, n, c = 2, 300, 4
    xy = torch.rand(b, n, 2, generator=g) * 200
    boxes = torch.cat([xy, xy + 10 + torch.rand(b, n, 2, generator=g) * 40], -1)
    cs = torch.rand(b, n, c, generator=g) ** 3
    cand = Candidates(boxes, *cs.max(-1), class_scores=cs)
    d = nms(cand, conf=0.25, iou=0.45, num_classes=c, multi_label=True, max_det=10_000)
    from torchvision.ops import box_iou

    want = []
    for f in range(b):
        for k in range(c):
            prob = torch.where(cs[f, :, k] > 0.25, cs[f, :, k], 0.0)
            order = prob.argsort(descending=True)
            iou = box_iou(boxes[f], boxes[f])
            for i_pos, i in enumerate(order.tolist()):
                if prob[i] == 0:
                    continue
                for j in order[i_pos + 1 :].tolist():
                    if iou[i, j] > 0.45:
                        prob[j] = 0
            want += [(f, k, round(float(prob[i]), 6)) for i in range(n) if prob[i] > 0]
    got = [(int(f), int(k), round(float(s), 6)) for f, k, s in zip(d.frame, d.class_ids, d.scores)]
    assert sorted(got) == sorted(want) and len(want) > 50


def test_multi_label_without_class_scores_is_single_label():
    d = nms(_cand([[A, A2]], [[0.9, 0.8]], [[0, 0]]), num_classes=1, multi_label=True)
    assert len(d) == 1
