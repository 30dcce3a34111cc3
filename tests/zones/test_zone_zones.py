"""Zones: enter/leave with hysteresis, dwell on the stream's real clock (dropped live frames
included), dwell events once per visit, leave of a vanished track, occupancy vs supervision's
PolygonZone."""

from __future__ import annotations

import numpy as np
import pytest

from vidpipe.zones import Zone, Zones
from zone_scene import events, frame, frames_from_paths, linear

BAY = Zone("bay", [(100, 100), (300, 100), (300, 300), (100, 300)])


def _run(stage, frames, step=5):
    out = []
    for i in range(0, len(frames), step):
        out.extend(stage.process(frames[i:i + step]))
    return out


def test_enter_and_leave_at_the_confirming_frames_with_dwell_from_first_to_last_inside():
    # x = 55 + 10*i at 10 fps: inside (100 < x < 300) for frames 5..24
    path = linear((55, 200), (405, 200), range(0, 36))
    res = _run(Zones(zones=[BAY], hysteresis=2), frames_from_paths({5: path}))
    got = [(e.frame, e.kind, e.track_id, e.dwell_s) for e in events(res)]
    assert got == [(6, "enter", 5, None), (26, "leave", 5, pytest.approx(1.9))]  # 0.5 s .. 2.4 s


def test_dwell_uses_the_live_capture_clock_and_a_dropped_frame_does_not_shorten_it():
    # a live stream: a person stands in the bay; frames at 10 fps, then 0.8 s of frames lost
    times = [i * 0.1 for i in range(20)] + [2.8 + i * 0.1 for i in range(20)]
    frames = [frame(i, [(9, 0, 200, 200)], pts=None, mono=1000.0 + t, wall=1.7e9 + t) for i, t in enumerate(times)]
    frames += [frame(40 + i, [(9, 0, 400, 200)], pts=None, mono=1000.0 + 4.8 + 0.1 * i, wall=1.7e9 + 4.8 + 0.1 * i)
               for i in range(3)]
    res = _run(Zones(zones=[Zone("bay", BAY.points, dwell=2.5)], hysteresis=3), frames)
    got = [(e.frame, e.kind, e.dwell_s, e.time) for e in events(res)]
    # enter after 3 frames, from the first (t=0); dwell 2.5 s reached at t=2.8 (frame 20, after the gap)
    assert got[0] == (2, "enter", None, pytest.approx(1.7e9 + 0.2))
    assert got[1] == (20, "dwell", pytest.approx(2.8), pytest.approx(1.7e9 + 2.8))
    assert got[2][:2] == (42, "leave") and got[2][2] == pytest.approx(4.7)
    assert len(got) == 3  # one dwell event per visit


def test_second_visit_gets_its_own_dwell_event_and_stats_cover_both_visits():
    path = {**linear((200, 200), (200, 200), range(0, 30)), **linear((500, 200), (500, 200), range(30, 40)),
            **linear((200, 200), (200, 200), range(40, 60))}
    zones = Zones(zones=[BAY], dwell=1.0, hysteresis=2)
    res = _run(zones, frames_from_paths({1: path}))
    kinds = [(e.frame, e.kind) for e in events(res)]
    assert kinds == [(1, "enter"), (10, "dwell"), (31, "leave"), (41, "enter"), (50, "dwell")]
    rep = zones.report()["zones"]["bay"]
    assert rep["occupancy"] == 1 and rep["entries"] == 2
    assert rep["dwell_s"] == {"visits": 2, "mean": pytest.approx((2.9 + 1.9) / 2), "max": pytest.approx(2.9)}


def test_a_track_that_vanishes_inside_leaves_when_forgotten_and_state_is_freed():
    frames = [frame(i, [(4, 2, 200, 200)] if i < 10 else []) for i in range(60)]
    zones = Zones(zones=[BAY], hysteresis=1, forget_after=2.0)
    res = _run(zones, frames)
    got = [(e.frame, e.kind, e.class_name, e.dwell_s) for e in events(res)]
    # last seen at 0.9 s; forgotten once more than 2 s later: frame 30 (3.0 s)
    assert got == [(0, "enter", "car", None), (30, "leave", "car", pytest.approx(0.9))]
    assert len(zones._streams[0].slots) == 0
    assert zones.report()["zones"]["bay"]["occupancy"] == 0


def test_class_filter_of_a_zone():
    frames = [frame(i, [(1, 0, 200, 200), (2, 2, 210, 210)]) for i in range(5)]
    zones = Zones(zones=[Zone("cars", BAY.points, classes=("car",))], hysteresis=1)
    res = _run(zones, frames)
    assert [(e.kind, e.track_id, e.class_name) for e in events(res)] == [("enter", 2, "car")]


@pytest.mark.parametrize("seed", [0, 1])
def test_occupancy_matches_supervision_polygonzone_each_frame(seed):
    sv = pytest.importorskip("supervision")
    cv2 = pytest.importorskip("cv2")
    rng = np.random.default_rng(seed)
    poly = np.array([[100, 80], [420, 120], [380, 330], [240, 250], [90, 300]], dtype=float)  # concave
    zone = Zone("z", [tuple(p) for p in poly])
    paths = {}
    for tid in range(30):
        t0 = int(rng.integers(0, 100))
        a, b = rng.uniform(50, 470, 2), rng.uniform(50, 470, 2)
        p = linear(tuple(a), tuple(b), range(t0, t0 + int(rng.integers(20, 60))))
        paths[tid] = {f: (round(x) + 0.5, round(y) + 0.5) for f, (x, y) in p.items()}  # pixel centres
    frames = frames_from_paths(paths, n_frames=170)
    stage = Zones(zones=[zone], hysteresis=1, forget_after=0.01)  # no memory: occupancy = inside now
    pz = sv.PolygonZone(polygon=poly.astype(int))
    contour = poly.astype(np.float32).reshape(-1, 1, 2)
    total = compared = 0
    for f in frames:
        stage.process([f])
        d = f.detections
        inside = pz.trigger(sv.Detections(xyxy=d.boxes.numpy().astype(np.float64)))
        total += int(inside.sum())
        b = d.boxes.numpy()
        near = [abs(cv2.pointPolygonTest(contour, (float(x1 + x2) / 2, float(y2)), True)) < 1.5 for x1, _, x2, y2 in b]
        if any(near):  # supervision rasterises the polygon: within a pixel of an edge it may differ
            continue
        compared += 1
        assert stage.report()["zones"]["z"]["occupancy"] == int(inside.sum()), f.index
    assert total > 100 and compared > 120
