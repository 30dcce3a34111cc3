"""``to_supervision()``: vidpipe results as ``supervision.Detections``, checked with supervision's
own annotator, zone and tracker on detections of the bundled model on real photos."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import vidpipe
from vidpipe.api import build_detector
from vidpipe.errors import BackendUnavailableError, ConfigError
from vidpipe.types import Detections

if os.environ.get("CI") == "true":  # in the test extra: CI must run these, not skip them
    import supervision as sv
else:
    sv = pytest.importorskip("supervision", reason="supervision is in the test extra: pip install -e '.[test]'")

IMAGES = Path(__file__).resolve().parents[1] / "data" / "images"
PHOTOS = ["dog.jpg", "person.jpg"]


@pytest.fixture(scope="module", params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def results(request):
    """name -> FrameResult of the bundled yolov3-tiny on the photo (detections on the device)."""
    detector = build_detector("yolov3-tiny", device=request.param)
    out = {}
    for name in PHOTOS:
        (frame,) = list(vidpipe.detect(IMAGES / name, model=detector, device=request.param))
        out[name] = frame
    return out


def _image(name: str) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(IMAGES / name).convert("RGB")).copy()


@pytest.mark.parametrize("name", PHOTOS)
def test_fields_equal_ours(results, name):
    frame = results[name]
    assert len(frame.detections) >= 3  # dog.jpg: dog, bicycle, car/truck; person.jpg: person, dog, horse
    dets = frame.to_supervision()
    ours = frame.detections.cpu()
    assert isinstance(dets, sv.Detections) and len(dets) == len(ours)
    assert dets.xyxy.dtype == np.float32 and dets.xyxy.shape == (len(ours), 4)
    np.testing.assert_array_equal(dets.xyxy, ours.boxes.numpy())
    np.testing.assert_array_equal(dets.confidence, ours.scores.numpy())
    np.testing.assert_array_equal(dets.class_id, ours.class_ids.numpy())
    assert dets.data["class_name"].tolist() == frame.labels()
    assert dets.tracker_id is None and dets.mask is None
    assert dets.metadata == {
        "source": frame.source, "stream_id": 0, "frame_index": 0, "pts": None,
        "height": frame.size[0], "width": frame.size[1],
    }  # fmt: skip
    # Detections.to_supervision: the same rows; class names only when given
    plain = frame.detections.to_supervision()
    np.testing.assert_array_equal(plain.xyxy, dets.xyxy)
    assert "class_name" not in plain.data
    named = frame.detections.to_supervision(names=frame.names)
    assert named.data["class_name"].tolist() == frame.labels()


@pytest.mark.parametrize("name", PHOTOS)
def test_box_annotator_draws_our_boxes(results, name):
    frame = results[name]
    dets = frame.to_supervision()
    image = _image(name)
    assert image.shape[:2] == frame.size
    thickness = 2
    drawn = sv.BoxAnnotator(thickness=thickness).annotate(image.copy(), dets)
    changed = np.any(drawn != image, axis=2)
    assert changed.any()
    # every changed pixel lies on the outline of one of our boxes (within the line thickness) ...
    h, w = frame.size
    near = np.zeros((h, w), dtype=bool)
    for x1, y1, x2, y2 in frame.detections.cpu().boxes.round().int().tolist():
        m = thickness + 1
        outer = np.zeros((h, w), dtype=bool)
        outer[max(0, y1 - m) : y2 + m + 1, max(0, x1 - m) : x2 + m + 1] = True
        inner = np.zeros((h, w), dtype=bool)
        inner[y1 + m : max(y1 + m, y2 - m + 1), x1 + m : max(x1 + m, x2 - m + 1)] = True
        near |= outer & ~inner
        # ... and each box's outline is drawn: its top edge changed along most of its width
        top = changed[max(0, y1 - 1) : y1 + 2, x1:x2].any(axis=0)
        assert top.mean() > 0.9
    assert not (changed & ~near).any()
    labelled = sv.LabelAnnotator().annotate(drawn.copy(), dets, labels=list(dets.data["class_name"]))
    assert (labelled != drawn).any()


@pytest.mark.parametrize("name", PHOTOS)
def test_polygon_zone_counts_like_our_boxes(results, name):
    frame = results[name]
    dets = frame.to_supervision()
    h, w = frame.size
    boxes = frame.detections.cpu().boxes
    for x_split in (w // 3, w // 2, 2 * w // 3):
        polygon = np.array([[0, 0], [x_split, 0], [x_split, h - 1], [0, h - 1]])
        zone = sv.PolygonZone(polygon=polygon)  # anchor: bottom centre of each box
        inside = zone.trigger(dets)
        cx, bottom = (boxes[:, 0] + boxes[:, 2]) / 2, boxes[:, 3]
        ours = ((cx >= 0) & (cx <= x_split) & (bottom >= 0) & (bottom <= h - 1)).numpy()
        assert inside.tolist() == ours.tolist()
        assert zone.current_count == int(ours.sum())
    # a zone over the whole image holds every box whose bottom centre is in the image
    zone = sv.PolygonZone(polygon=np.array([[0, 0], [w, 0], [w, h], [0, h]]))
    assert zone.trigger(dets).sum() == int((boxes[:, 3] <= h).sum())


def test_track_ids_become_tracker_ids(results):
    d = results["dog.jpg"].detections.cpu()
    ids = torch.arange(100, 100 + len(d), dtype=torch.int64)
    tracked = Detections(d.boxes, d.scores, d.class_ids, d.frame, ids)
    dets = tracked.to_supervision(names=results["dog.jpg"].names)
    assert dets.tracker_id.tolist() == ids.tolist()
    # supervision's filtering keeps the tracker ids with their rows
    keep = dets[dets.confidence > 0.5]
    assert keep.tracker_id.tolist() == ids[d.scores > 0.5].tolist()


def test_empty_detections_convert_and_annotate():
    dets = Detections.empty().to_supervision(names=("person",))
    assert len(dets) == 0 and dets.xyxy.shape == (0, 4) and dets.xyxy.dtype == np.float32
    image = np.zeros((32, 48, 3), dtype=np.uint8)
    assert (sv.BoxAnnotator().annotate(image.copy(), dets) == image).all()


def test_detections_of_several_frames_are_refused(results):
    d = results["dog.jpg"].detections.cpu()
    frame = torch.arange(len(d), dtype=torch.int64) % 2  # rows of two frames of a batch
    batch = Detections(d.boxes, d.scores, d.class_ids, frame)
    with pytest.raises(ConfigError, match="split"):
        batch.to_supervision()
    assert [len(x.to_supervision()) for x in batch.split(2)] == [int((frame == 0).sum()), int((frame == 1).sum())]


def test_missing_supervision_gives_an_install_hint(results, monkeypatch):
    monkeypatch.setitem(sys.modules, "supervision", None)  # import supervision -> ImportError
    with pytest.raises(BackendUnavailableError, match=r"pip install 'vidpipe\[supervision\]'") as info:
        results["dog.jpg"].to_supervision()
    assert isinstance(info.value, ImportError)
