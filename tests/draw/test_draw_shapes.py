"""Lines and zones against OpenCV (``cv2.polylines``, ``cv2.fillPoly``), and how the annotator
draws them: translucent fill, opaque outline, the name on a label."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch

from draw_frames import changed, hwc, result
from vidpipe.draw import Annotator
from vidpipe.draw.palette import PALETTE
from vidpipe.draw.shapes import polygon_mask, polyline_mask, segment_mask
from vidpipe.draw.static import ZONE_FILL_ALPHA
from vidpipe.zones import Line, Zone

POLY = [(20, 31), (200, 40), (180, 151), (60, 170), (30, 90)]


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    return float((a & b).sum() / (a | b).sum())


@pytest.mark.parametrize("thickness", [1, 2, 3, 4, 6])
def test_polyline_close_to_cv2(thickness):
    ours = torch.zeros((200, 240), dtype=torch.bool)
    polyline_mask(ours, POLY, thickness, closed=True)
    ref = np.zeros((200, 240), np.uint8)
    cv2.polylines(ref, [np.array(POLY, np.int32)], True, 255, thickness)
    assert _iou(ours.numpy(), ref > 0) >= 0.9


def test_segment_and_fill_close_to_cv2():
    seg = torch.zeros((120, 160), dtype=torch.bool)
    segment_mask(seg, (5, 100), (150, 10), 3)
    ref = np.zeros((120, 160), np.uint8)
    cv2.line(ref, (5, 100), (150, 10), 255, 3)
    assert _iou(seg.numpy(), ref > 0) >= 0.9
    fill = torch.zeros((200, 240), dtype=torch.bool)
    polygon_mask(fill, POLY)
    ref = np.zeros((200, 240), np.uint8)
    cv2.fillPoly(ref, [np.array(POLY, np.int32)], 255)
    assert _iou(fill.numpy(), ref > 0) >= 0.95


def test_zone_and_line_drawn_by_the_annotator():
    h, w = 200, 240
    img = torch.full((3, h, w), 100, dtype=torch.uint8)
    zone = Zone("bay", tuple((float(x), float(y)) for x, y in POLY))
    line = Line("door", (10.0, 190.0), (230.0, 185.0))
    out = Annotator(zones=(zone,), lines=(line,), thickness=2)(result(img, torch.zeros((0, 4))))
    o = hwc(out).astype(int)
    zc, lc = np.array(PALETTE[3]), np.array(PALETTE[2])  # first zone, first line colours
    inside = (120, 100)  # y, x well inside the polygon, away from the edges and the name
    want = (100 * (255 - ZONE_FILL_ALPHA) + zc * ZONE_FILL_ALPHA + 127) // 255
    np.testing.assert_array_equal(o[inside], want)
    edge = np.zeros((h, w), np.uint8)
    cv2.polylines(edge, [np.array(POLY, np.int32)], True, 255, 1)  # the thin centre line of the outline
    on_edge = (o[edge > 0] == zc).all(-1).mean()
    assert on_edge > 0.8  # the rest is under the name label
    assert (o[188, 100:140] == lc).all(-1).any()
    assert (o[0:h, 0:w] == 100).all(-1).mean() > 0.3  # outside everything: untouched
    # the names: label blocks with text, at the zone's top vertex and the line's start
    assert changed(out, img)[17:30, 21:40].mean() > 0.9 and changed(out, img)[176:189, 11:35].mean() > 0.9
