"""Box outlines against OpenCV's ``cv2.rectangle`` (pixel for pixel), label placement and text,
and the annotator's contract (new tensor, input untouched, empty detections, errors)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch

from draw_frames import NAMES, changed, hwc, noise, result
from vidpipe.draw import PALETTE, Annotator
from vidpipe.draw.boxes import outline_template, outline_writes
from vidpipe.draw.paint import pack, paint
from vidpipe.errors import ConfigError

PLAIN = dict(labels=False, scores=False, track_ids=False)  # outlines only


@pytest.mark.parametrize("thickness", [1, 2, 3, 4, 5, 8])
def test_outline_writes_equal_cv2_rectangle(thickness):
    rng = np.random.default_rng(thickness)
    h, w = 100, 120
    for _ in range(6):
        xs = np.sort(rng.integers(-20, w + 20, (4, 2)), 1)
        ys = np.sort(rng.integers(-20, h + 20, (4, 2)), 1)
        boxes = torch.tensor(np.stack([xs[:, 0], ys[:, 0], xs[:, 1], ys[:, 1]], 1))  # partly outside too
        index, ok = outline_writes(boxes, outline_template(thickness, w, h), h, w)
        canvas = torch.zeros((3, h, w), dtype=torch.uint8)
        paint(canvas, index.reshape(-1), torch.where(ok, pack(torch.tensor([255, 255, 255])), -1).reshape(-1))
        ref = np.zeros((h, w), np.uint8)
        for x1, y1, x2, y2 in boxes.tolist():
            cv2.rectangle(ref, (x1, y1), (x2, y2), 255, thickness)
        np.testing.assert_array_equal(canvas[0].numpy() > 0, ref > 0)


@pytest.mark.parametrize("thickness", [1, 2, 3])
def test_annotator_outline_pixels_and_colours_equal_cv2(thickness):
    h, w = 90, 160
    img = torch.full((3, h, w), 7, dtype=torch.uint8)
    boxes = [[10.6, 12.2, 60.9, 70.5], [40, 30, 150, 85], [100, 5, 120, 20]]
    cls = [0, 2, 3]
    out = Annotator(thickness=thickness, **PLAIN)(result(img, boxes, cls))
    ref = np.full((h, w, 3), 7, np.uint8)
    for (x1, y1, x2, y2), c in zip(boxes, cls):  # later boxes over earlier ones, as ours
        cv2.rectangle(ref, (int(x1), int(y1)), (int(x2), int(y2)), PALETTE[c], thickness)
    np.testing.assert_array_equal(hwc(out), ref)


def test_input_untouched_new_tensor_and_empty_detections():
    img = noise(48, 64)
    before = img.clone()
    ann = Annotator(zones=("z=5,5,40,5,40,40",), lines=("l=0,47,63,0",), blur=("person",))
    out = ann(result(img, [[4, 4, 30, 30]]))
    assert out.data_ptr() != img.data_ptr() and out.shape == img.shape and out.dtype == torch.uint8
    assert torch.equal(img, before) and not torch.equal(out, img)
    empty = ann(result(img, torch.zeros((0, 4))))
    assert torch.equal(img, before) and empty.data_ptr() != img.data_ptr()
    only_static = changed(empty, img)
    assert only_static.any() and not only_static[20:30, 45:55].any()  # zone and line drawn, nothing else
    assert torch.equal(Annotator()(result(img, torch.zeros((0, 4)))), img)


def test_boxes_clipped_to_the_frame():
    img = torch.zeros((3, 40, 50), dtype=torch.uint8)
    out = Annotator(thickness=1, **PLAIN)(result(img, [[-20.0, -5.0, 80.0, 30.0]]))
    m = changed(out, img)
    # edges outside the frame are drawn on its border
    assert m[0, :].all() and m[:31, 0].all() and m[:31, 49].all() and m[30, :].all() and not m[31:].any()


def test_label_text_inside_a_filled_label_above_the_box():
    h, w = 120, 200
    img = torch.zeros((3, h, w), dtype=torch.uint8)
    ann = Annotator(thickness=1)
    r = result(img, [[30, 60, 120, 110]], [2], [0.87], [12])
    out = hwc(ann(r))
    colour = np.array(PALETTE[12 % len(PALETTE)])  # tracked: colour per track id
    # the label block sits right above the box's top edge, starting at its left edge
    above = out[40:60, 30:40]
    bg = (above == colour).all(-1)
    assert bg.mean() > 0.3
    label_rows = np.nonzero((out[:60, 30:200] == colour).all(-1).any(1))[0]
    y0, y1 = label_rows.min(), label_rows.max()
    cols = np.nonzero((out[y0 : y1 + 1] == colour).all(-1).any(0))[0]
    x0, x1 = cols.min(), cols.max()
    assert x0 == 30 and y1 == 59 and 60 < x1 - x0 < 170
    block = out[y0 : y1 + 1, x0 : x1 + 1]
    text = ~(block == colour).all(-1)  # glyph pixels: anything but the background colour
    assert 0.05 < text.mean() < 0.6
    assert text[:, : (x1 - x0) // 2].any() and text[:, (x1 - x0) // 2 :].any()
    # all off: no label, only the outline
    plain = Annotator(thickness=1, **PLAIN)(r)
    assert not changed(plain, img)[:59].any()


def test_label_goes_inside_the_box_at_the_top_of_the_frame():
    img = torch.zeros((3, 100, 160), dtype=torch.uint8)
    out = hwc(Annotator(thickness=1)(result(img, [[20, 2, 140, 90]], [0], [0.5])))
    colour = np.array(PALETTE[0])
    assert (out[4:10, 22:40] == colour).all(-1).mean() > 0.5


def test_later_boxes_on_top_and_labels_over_outlines():
    img = torch.zeros((3, 100, 160), dtype=torch.uint8)
    out = hwc(Annotator(thickness=1, **PLAIN)(result(img, [[10, 10, 80, 80], [10, 40, 80, 90]], [0, 2])))
    assert (out[40, 50] == PALETTE[2]).all() and (out[10, 50] == PALETTE[0]).all()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(thickness=0), "thickness"),
        (dict(thickness=2.5), "thickness"),
        (dict(blur=(1.5,)), "blur"),
        (dict(labels="yes"), "labels"),
        (dict(zones=("nonsense",)), "--zone|zones"),
        (dict(lines=(3,)), "lines"),
    ],
)
def test_bad_options_are_config_errors(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        Annotator(**kwargs)


def test_bad_calls_are_config_errors():
    img = torch.zeros((3, 40, 50), dtype=torch.uint8)
    r = result(img, [[1, 1, 10, 10]])
    with pytest.raises(ConfigError, match="keep_frames"):
        Annotator()(result(img, [[1, 1, 10, 10]]).__class__(r.meta, r.detections, names=NAMES))
    with pytest.raises(ConfigError, match="40x50"):
        Annotator()(r, torch.zeros((3, 41, 50), dtype=torch.uint8))
    with pytest.raises(ConfigError, match="uint8"):
        Annotator()(r, torch.zeros((3, 40, 50)))
    with pytest.raises(ConfigError, match="'giraffe'"):
        Annotator(blur=("giraffe",))(r)
    with pytest.raises(TypeError):
        Annotator((), ())  # keyword-only
