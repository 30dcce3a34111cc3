"""Mapping boxes from model-input pixels back to source pixels (letterbox round trip)."""

from __future__ import annotations

import pytest
import torch

from vidpipe.ops.letterbox import letterbox, letterbox_geometry
from vidpipe.post.boxes import frame_sizes, to_source
from vidpipe.types import Detections, FrameMeta, ModelInput


def _meta(h: int, w: int, i: int = 0) -> FrameMeta:
    return FrameMeta(source="s", stream_id=0, index=i, pts=None, height=h, width=w)


def _input(sizes: list[tuple[int, int]], dst=(416, 416)) -> ModelInput:
    geos = [letterbox_geometry(h, w, *dst) for h, w in sizes]
    return ModelInput(
        tensor=torch.zeros(len(sizes), 3, *dst),
        frames=tuple(_meta(h, w, i) for i, (h, w) in enumerate(sizes)),
        scale=torch.tensor([(g.sx, g.sy) for g in geos], dtype=torch.float32),
        pad=torch.tensor([(g.pad_x, g.pad_y) for g in geos], dtype=torch.float32),
    )


def _dets(boxes, frames) -> Detections:
    n = len(boxes)
    return Detections(
        boxes=torch.tensor(boxes, dtype=torch.float32),
        scores=torch.linspace(0.9, 0.5, n),
        class_ids=torch.arange(n),
        frame=torch.tensor(frames, dtype=torch.int64),
    )


def test_letterbox_round_trip_per_frame():
    sizes = [(1080, 1920), (480, 360), (416, 416)]
    inp = _input(sizes)
    src = torch.tensor([[100.0, 200.0, 900.0, 1000.0], [10.0, 20.0, 300.0, 470.0], [0.0, 5.0, 416.0, 400.0]])
    model = src * inp.scale.repeat(1, 2) + inp.pad.repeat(1, 2)  # what the model sees
    back = to_source(_dets(model.tolist(), [0, 1, 2]), inp)
    assert torch.allclose(back.boxes, src, atol=1e-3)
    assert back.class_ids.tolist() == [0, 1, 2] and back.frame.tolist() == [0, 1, 2]
    assert torch.equal(back.scores, torch.linspace(0.9, 0.5, 3))


def test_frames_index_their_own_geometry_and_clip():
    inp = _input([(1080, 1920), (480, 360)])  # 16:9 pads top/bottom, 3:4 pads left/right
    g0, g1 = (letterbox_geometry(h, w, 416, 416) for h, w in [(1080, 1920), (480, 360)])
    boxes = [[0.0, 0.0, 416.0, 416.0]] * 2
    back = to_source(_dets(boxes, [1, 0]), inp)
    # the whole canvas maps beyond each frame: clipped to that frame's size
    assert back.boxes[0].tolist() == [0.0, 0.0, 360.0, 480.0]
    assert back.boxes[1].tolist() == [0.0, 0.0, 1920.0, 1080.0]
    assert g0.pad_y > 0 and g1.pad_x > 0
    inside = to_source(_dets([[g1.pad_x + 10.0, 50.0, g1.pad_x + 20.0, 60.0]], [1]), inp)
    expected = torch.tensor([[10.0 / g1.sx, 50.0 / g1.sy, 20.0 / g1.sx, 60.0 / g1.sy]])
    assert torch.allclose(inside.boxes, expected, atol=1e-3)


def test_real_letterbox_geometry_matches():
    img = torch.zeros(1, 3, 300, 500, dtype=torch.uint8)
    img[..., 100:200, 50:150] = 255  # a white square
    x, geo = letterbox(img, (320, 320))
    ys, xs = torch.nonzero(x[0, 0] > 0.9, as_tuple=True)
    found = torch.tensor([[xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]], dtype=torch.float32)
    inp = ModelInput(
        x, (_meta(300, 500),), torch.tensor([[geo.sx, geo.sy]]), torch.tensor([[float(geo.pad_x), float(geo.pad_y)]])
    )
    back = to_source(_dets(found.tolist(), [0]), inp)
    assert torch.allclose(back.boxes, torch.tensor([[50.0, 100.0, 150.0, 200.0]]), atol=2.0)


def test_empty_and_track_ids_pass_through():
    inp = _input([(100, 200)])
    empty = Detections.empty()
    assert to_source(empty, inp) is empty
    d = _dets([[10.0, 10.0, 20.0, 20.0]], [0])
    tracked = Detections(d.boxes, d.scores, d.class_ids, d.frame, torch.tensor([7]))
    assert to_source(tracked, inp).track_ids.tolist() == [7]


def test_frame_sizes():
    assert frame_sizes((_meta(10, 20), _meta(30, 40)), torch.device("cpu")).tolist() == [[20.0, 10.0], [40.0, 30.0]]


def _correct_yolo_boxes(box_xyxy, w: int, h: int, netw: int, neth: int) -> list[float]:
    """pjreddie/darknet ``src/yolo_layer.c`` ``correct_yolo_boxes`` (``relative=0``), written out:
    a model-pixel ``x1, y1, x2, y2`` box -> source pixels, per axis."""
    if netw / w < neth / h:
        new_w, new_h = netw, (h * netw) // w
    else:
        new_h, new_w = neth, (w * neth) // h
    x1, y1, x2, y2 = box_xyxy
    bx, by, bw, bh = (x1 + x2) / 2 / netw, (y1 + y2) / 2 / neth, (x2 - x1) / netw, (y2 - y1) / neth
    bx = (bx - (netw - new_w) / 2.0 / netw) / (new_w / netw)
    by = (by - (neth - new_h) / 2.0 / neth) / (new_h / neth)
    bw *= netw / new_w
    bh *= neth / new_h
    bx, bw, by, bh = bx * w, bw * w, by * h, bh * h
    return [bx - bw / 2, by - bh / 2, bx + bw / 2, by + bh / 2]


def test_truncated_side_maps_back_per_axis_like_darknet():
    """640x272 -> 416x176 at row 120: x is scaled by 0.65, y by 176/272 = 0.6471 (not 0.65). A box
    placed by that geometry comes back exactly, and as Darknet's correct_yolo_boxes maps it."""
    g = letterbox_geometry(272, 640, 416, 416)
    assert (g.new_w, g.new_h, g.pad_x, g.pad_y) == (416, 176, 0, 120)
    inp = _input([(272, 640)])
    assert inp.scale.tolist() == [[pytest.approx(0.65), pytest.approx(176 / 272)]]
    src = [[100.0, 150.0, 500.0, 272.0], [0.0, 0.0, 640.0, 272.0], [320.5, 3.25, 321.0, 260.0]]

    def place(x: float, y: float) -> list[float]:  # where source point (x, y) lies on the canvas
        return [x * g.new_w / 640 + g.pad_x, y * g.new_h / 272 + g.pad_y]

    model = [place(x1, y1) + place(x2, y2) for x1, y1, x2, y2 in src]
    back = to_source(_dets(model, [0, 0, 0]), inp)
    assert torch.allclose(back.boxes, torch.tensor(src), atol=1e-3)
    darknet = torch.tensor([_correct_yolo_boxes(b, 640, 272, 416, 416) for b in model], dtype=torch.float32)
    assert torch.allclose(back.boxes, darknet, atol=1e-3)
    # one factor for both axes (the long side's 0.65) would put the bottom edge 1.5 px too high
    one = (torch.tensor(model[1][3]) - g.pad_y) / g.scale
    assert 272.0 - one.item() == pytest.approx(272 - 176 / 0.65, abs=1e-3) and 272 - 176 / 0.65 > 1.2
