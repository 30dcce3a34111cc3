"""A real run: the bundled model on the bundled bikes.mp4 with frames kept, annotated; boxes land
where the detections are, and supervision's BoxAnnotator (OpenCV) draws the same outline pixels
on the same result (``to_supervision()``, deliverable 6 of issue 14)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import vidpipe
from vidpipe.data import sample_video
from vidpipe.draw import PALETTE, Annotator

if os.environ.get("CI") == "true":  # in the test extra: CI must run these, not skip them
    import supervision as sv
else:
    sv = pytest.importorskip("supervision", reason="supervision is in the test extra: pip install -e '.[test]'")

PLAIN = dict(labels=False, scores=False, track_ids=False)


@pytest.fixture(scope="module")
def frames():
    run = vidpipe.detect(sample_video(), device="cpu", start=5.0, max_frames=3, frame_skip=25, keep_frames=True)
    out = [r for r in run]
    assert len(out) == 3 and all(r.image is not None for r in out)
    assert sum(len(r.detections) for r in out) >= 3  # people and bicycles
    return out


def test_boxes_drawn_where_the_detections_are(frames):
    for r in frames:
        out = Annotator(thickness=1, **PLAIN)(r).permute(1, 2, 0).numpy()
        boxes = r.detections.boxes.long().tolist()
        cls = r.detections.class_ids.tolist()
        h, w = r.size
        for i, ((x1, y1, x2, y2), c) in enumerate(zip(boxes, cls)):
            same = [j for j in range(i, len(boxes)) if boxes[j] == boxes[i]]  # the model gave a box twice
            c = cls[same[-1]]  # (person and bicycle): the later one is on top
            x1, x2 = min(max(x1, 0), w - 1), min(max(x2, 0), w - 1)
            y1, y2 = min(max(y1, 0), h - 1), min(max(y2, 0), h - 1)
            edge = np.concatenate([out[y1, x1 : x2 + 1], out[y2, x1 : x2 + 1], out[y1 : y2 + 1, x1], out[y1 : y2 + 1, x2]])
            share = (edge == PALETTE[c % len(PALETTE)]).all(-1).mean()
            assert share >= (1.0 if same[-1] == len(boxes) - 1 else 0.5), (i, share)  # the last box: nothing over it
        labelled = Annotator()(r)
        assert labelled.shape == r.image.shape and torch.equal(labelled, r.image) == (not boxes)


def _near(a: np.ndarray, b: np.ndarray) -> float:
    """Share of ``a``'s pixels within 1 px (8-neighbourhood) of a pixel of ``b``."""
    pad = np.pad(b, 1)
    grown = np.zeros_like(b)
    for dy in (0, 1, 2):
        for dx in (0, 1, 2):
            grown |= pad[dy : dy + b.shape[0], dx : dx + b.shape[1]]
    return float((a & grown).sum() / max(1, a.sum()))


def test_supervision_box_annotator_on_a_real_result_draws_our_outlines(frames):
    for r in frames:
        frame = r.image.permute(1, 2, 0).numpy().copy()
        dets = r.to_supervision()
        theirs = sv.BoxAnnotator(thickness=2).annotate(frame.copy(), dets)
        assert theirs.shape == frame.shape
        if len(dets) == 0:
            assert (theirs == frame).all() and torch.equal(Annotator()(r), r.image)
            continue
        ours = Annotator(thickness=2, **PLAIN)(r).permute(1, 2, 0).numpy()
        m_theirs = (theirs != frame).any(-1)
        m_ours = (ours != frame).any(-1)
        assert m_theirs.sum() > 100 and m_ours.sum() > 100
        # the same outline pixels, up to 1 px (ours clips boxes touching the border onto the frame)
        assert _near(m_ours, m_theirs) >= 0.99 and _near(m_theirs, m_ours) >= 0.99
        inner = np.zeros_like(m_ours)
        inner[3:-3, 3:-3] = True  # away from the border, where both draw every edge: exactly equal
        assert (m_ours != m_theirs)[inner].mean() < 0.002
