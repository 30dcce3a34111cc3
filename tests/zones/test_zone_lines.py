"""Line crossings: both directions, exact frames, jitter on the line, going round the end, class
filters; and the counts of supervision's LineZone on the same generated trajectories."""

from __future__ import annotations

import numpy as np
import pytest

from vidpipe.zones import Line, Zones
from zone_scene import NAMES, events, frame, frames_from_paths, linear

DOOR = Line("door", (100, 200), (500, 200))  # drawn left to right: above it is "in"


def _run(stage, frames):
    out = []
    for i in range(0, len(frames), 7):  # several frames per call, as the runner gives them
        out.extend(stage.process(frames[i:i + 7]))
    return out


def test_crossing_down_then_up_counts_out_then_in_at_the_confirming_frame():
    # down over frames 0..20 (y 150 -> 250: below the line from frame 11), back up over 21..41
    down = linear((300, 150), (300, 250), range(0, 21))
    up = linear((300, 250), (300, 150), range(21, 42))
    res = _run(Zones([DOOR], hysteresis=3), frames_from_paths({7: {**down, **up}}))
    got = [(e.frame, e.kind, e.name, e.track_id, e.direction, e.class_name) for e in events(res)]
    # y = 150 + 5*i: exactly on the line at 10 (ignored), below at 11, 12, 13 -> confirmed at 13
    # back up: y = 250 - 5*(i-21): on the line at 31, above at 32, 33, 34 -> confirmed at 34
    assert got == [(13, "cross", "door", 7, "out", "person"), (34, "cross", "door", 7, "in", "person")]


def test_jitter_on_the_line_does_not_count_and_a_real_crossing_then_counts_once():
    rng = np.random.default_rng(1)
    path = linear((300, 150), (300, 198), range(0, 10))
    # 60 frames standing on the line, the anchor jittering across it: runs shorter than 3 frames
    side = 1
    for i in range(10, 72):  # ends above the line (frames 70, 71)
        if i % 2 == 0:
            side = -side
        path[i] = (300 + rng.normal(0, 2), 200 + side * rng.uniform(0.5, 3))
    path.update(linear((300, 203), (300, 260), range(72, 87)))
    res = _run(Zones([DOOR], hysteresis=3), frames_from_paths({1: path}))
    got = [(e.frame, e.direction) for e in events(res)]
    assert got == [(74, "out")]  # below from 72: confirmed on the third frame
    # with no hysteresis the same jitter counts many times: the option is what saves the count
    res1 = _run(Zones([DOOR], hysteresis=1), frames_from_paths({1: path}))
    assert len(events(res1)) > 10


def test_going_round_the_end_of_the_line_is_no_crossing():
    path = {**linear((450, 150), (560, 150), range(0, 12)), **linear((560, 150), (560, 250), range(12, 24)),
            **linear((560, 250), (450, 250), range(24, 36))}  # ends below the line, never cut it
    res = _run(Zones([DOOR], hysteresis=2), frames_from_paths({3: path}))
    assert events(res) == []
    # and back across the segment itself: counts "in"
    path2 = {**path, **linear((450, 250), (450, 150), range(36, 50))}
    res = _run(Zones([DOOR], hysteresis=2), frames_from_paths({3: path2}))
    assert [(e.direction, e.track_id) for e in events(res)] == [("in", 3)]


def test_class_filter_and_per_class_counts_and_untracked_rows_ignored():
    paths = {1: linear((200, 150), (200, 260), range(0, 30)),
             2: linear((300, 150), (300, 260), range(0, 30)),
             3: linear((400, 260), (400, 150), range(0, 30))}
    classes = {1: 0, 2: 1, 3: 0}
    frames = frames_from_paths(paths, classes=classes)
    # an untracked box (-1) crossing too: never counted
    frames = [frame(f.index, [(tid, classes[tid], *(lambda b: ((b[0] + b[2]) / 2, b[3]))(row))
                              for tid, row in zip(f.detections.track_ids.tolist(), f.detections.boxes.tolist())]
                    + [(-1, 0, 250, 150 + 4 * f.index)]) for f in frames]
    zones = Zones([DOOR, Line("people", (100, 200), (500, 200), classes=("person",))], hysteresis=2)
    res = _run(zones, frames)
    rep = zones.report()["lines"]
    assert rep["door"]["in"] == 1 and rep["door"]["out"] == 2
    assert rep["door"]["classes"] == {"bicycle": {"in": 0, "out": 1}, "person": {"in": 1, "out": 1}}
    assert rep["people"]["classes"] == {"person": {"in": 1, "out": 1}}
    assert {e.track_id for e in events(res)} == {1, 2, 3}


def _random_scene(seed: int, n_tracks: int = 40, n_frames: int = 300, jitter: float = 2.5):
    """Tracks walking across the segment's middle in either direction, some coming back, with
    per-frame noise; all inside the segment's perpendicular strip (where supervision counts)."""
    rng = np.random.default_rng(seed)
    paths, classes = {}, {}
    for tid in range(n_tracks):
        t0 = int(rng.integers(0, n_frames - 80))
        length = int(rng.integers(30, 80))
        x = rng.uniform(150, 450)
        y0, y1 = (rng.uniform(100, 180), rng.uniform(220, 300))
        if rng.random() < 0.5:
            y0, y1 = y1, y0
        ys = np.linspace(y0, y1, length)
        if rng.random() < 0.3:  # comes back
            ys = np.concatenate([ys, ys[::-1]])
        ys = ys + rng.normal(0, jitter, len(ys))
        ys[np.abs(ys - 200) < 1e-6] += 0.01  # never exactly on the line
        xs = x + rng.normal(0, jitter, len(ys))
        paths[tid] = {t0 + k: (float(xs[k]), float(ys[k])) for k in range(len(ys)) if t0 + k < n_frames}
        classes[tid] = int(rng.integers(0, 3))
    return paths, classes, n_frames


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("k", [1, 3])
def test_counts_match_supervision_linezone(seed, k):
    sv = pytest.importorskip("supervision")
    paths, classes, n = _random_scene(seed)
    frames = frames_from_paths(paths, classes=classes, n_frames=n)
    zones = Zones([DOOR], hysteresis=k, forget_after=1e9)
    _run(zones, frames)
    line = sv.LineZone(sv.Point(100, 200), sv.Point(500, 200), triggering_anchors=[sv.Position.BOTTOM_CENTER],
                       minimum_crossing_threshold=k)
    for f in frames:
        d = f.detections
        line.trigger(sv.Detections(xyxy=d.boxes.numpy().astype(np.float64), class_id=d.class_ids.numpy(),
                                   tracker_id=d.track_ids.numpy()))
    rep = zones.report()["lines"]["door"]
    assert (rep["in"], rep["out"]) == (line.in_count, line.out_count)
    assert rep["in"] + rep["out"] >= 30  # the scene has real traffic
    for cid, name in enumerate(NAMES):
        ours = rep["classes"].get(name, {"in": 0, "out": 0})
        assert (ours["in"], ours["out"]) == (line.in_count_per_class.get(cid, 0), line.out_count_per_class.get(cid, 0))
