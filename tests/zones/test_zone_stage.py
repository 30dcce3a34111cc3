"""The zones stage as a Stage: track ids required, state bounded over a long run, reset on a
reconnect (through the StageRunner), streams apart, one packed host copy for GPU detections,
report and summary."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vidpipe.errors import ConfigError
from vidpipe.stages import Stage, StageRunner
from vidpipe.summary import RunSummary
from vidpipe.zones import Line, Zone, Zones, ZoneSet
from zone_scene import events, frame, frames_from_paths, linear

DOOR = Line("door", (100, 200), (500, 200))
BAY = Zone("bay", [(100, 100), (300, 100), (300, 300), (100, 300)])


def test_is_a_stage_and_needs_track_ids():
    z = Zones([DOOR])
    assert isinstance(z, Stage) and z.name == "zones" and not z.needs_frames
    with pytest.raises(ConfigError, match=r"no track ids.*track=True.*--track"):
        z.process([frame(0, [(0, 0, 10, 10)], tracked=False)])
    assert z.process([frame(0, [], tracked=False)])[0].events == ()  # an empty frame is fine
    with pytest.raises(ConfigError, match="at least one line or zone"):
        Zones()
    with pytest.raises(ConfigError, match="anchor"):
        Zones([DOOR], anchor="feet")
    with pytest.raises(ConfigError, match="two are named 'door'"):
        Zones([DOOR, DOOR])
    with pytest.raises(ConfigError, match=r"line 'door': class 'persn' is not one of the model's classes"):
        Zones([Line("door", (0, 0), (1, 1), classes=("persn",))]).process([frame(0, [(1, 0, 5, 5)])])


def test_state_stays_small_over_ten_thousand_tracks():
    # 10,000 tracks, ~20 alive at a time, each crossing the door and visiting the bay, 20 frames each
    zones = Zones([DOOR], [BAY], hysteresis=2, forget_after=1.0)
    n_tracks, life, stride = 10_000, 20, 1
    capacity = []
    crossings = 0
    batch = []
    for f in range(n_tracks * stride // 1 + life):
        rows = []
        for tid in range(max(0, (f - life) // stride + 1), min(n_tracks, f // stride + 1)):
            k = f - tid * stride
            if 0 <= k < life:
                rows.append((tid, 0, 150 + (tid % 10) * 15, 150 + 5 * k + 0.5))
        batch.append(frame(f, rows))
        if len(batch) == 16:
            crossings += len(events(zones.process(batch), "cross"))
            batch = []
            capacity.append(zones._streams[0].slots.capacity)
    crossings += len(events(zones.process(batch), "cross"))
    st = zones._streams[0]
    assert crossings == n_tracks  # every track crossed once (down: "out")
    rep = zones.report()
    assert rep["lines"]["door"]["out"] == n_tracks and rep["zones"]["bay"]["entries"] == n_tracks
    assert max(capacity) <= 64 and len(st.slots) <= 40  # never more than the live tracks and a margin
    assert st.lines.side.shape[0] == st.slots.capacity


def test_reset_on_reconnect_forgets_tracks_but_keeps_counts():
    zones = Zones([DOOR], [BAY], hysteresis=1)
    runner = StageRunner([zones])
    runner([frame(i, [(1, 0, 200, 150 + 10 * i)]) for i in range(10)])  # crossed at y=210 (frame 6)
    assert zones.report()["lines"]["door"]["out"] == 1
    assert zones.report()["zones"]["bay"]["occupancy"] == 1
    # reconnect: the same id on the other side is a new track, not a crossing back
    out = runner([frame(0, [(1, 0, 200, 150)], connection=1)])
    assert out[0].events == () or [e.kind for e in out[0].events] == ["enter"]
    rep = zones.report()
    assert rep["lines"]["door"] == {"in": 0, "out": 1, "classes": {"person": {"in": 0, "out": 1}}}
    assert rep["zones"]["bay"]["entries"] == 2 and rep["zones"]["bay"]["occupancy"] == 1


def test_streams_are_apart_and_per_stream_geometry():
    gate = Line("gate", (0, 400), (640, 400))
    zones = Zones([DOOR], per_stream={1: ZoneSet(lines=(gate,))}, hysteresis=1)
    runner = StageRunner([zones])
    batch = []
    for i in range(30):  # the same track id 5 on both streams, crossing y=200 and y=400
        batch += [frame(i, [(5, 0, 200, 150 + 10 * i)], stream_id=0), frame(i, [(5, 0, 200, 350 + 10 * i)], stream_id=1)]
    out = runner(batch)
    got = sorted((e.stream_id, e.name, e.direction, e.frame, e.source) for e in events(out))
    assert got == [(0, "door", "out", 6, "cam0.mp4"), (1, "gate", "out", 6, "cam1.mp4")]
    rep = json.loads(json.dumps(zones.report()))
    assert rep["lines"]["door"]["out"] == 1 and rep["lines"]["gate"]["out"] == 1
    assert rep["streams"]["0"]["lines"] == {"door": {"in": 0, "out": 1, "classes": {"person": {"in": 0, "out": 1}}}}
    assert set(rep["streams"]["1"]["lines"]) == {"gate"}


def test_events_carry_the_frame_and_are_appended_to_existing_ones():
    import dataclasses

    from vidpipe.stages import Event

    prior = Event("enter", "other", 0, "cam0.mp4", 0, 0.0, 1.0, 1, 0, "person")
    frames = [dataclasses.replace(f, events=(prior,)) for f in frames_from_paths({2: linear((200, 150), (200, 260), range(12))})]
    out = Zones([DOOR], hysteresis=1).process(frames)
    assert all(r.events[0] is prior for r in out)
    cross = events(out, "cross")
    assert len(cross) == 1
    e = cross[0]
    assert (e.kind, e.name, e.stream_id, e.track_id, e.class_id, e.class_name, e.direction, e.dwell_s) == (
        "cross", "door", 0, 2, 0, "person", "out", None)
    assert e.pts == pytest.approx(e.frame / 10) and e.time > 1.7e9
    assert json.dumps(e.to_dict())


def test_summary_text_and_dict_show_the_zones():
    zones = Zones([DOOR], [BAY], hysteresis=1)
    zones.process(frames_from_paths({1: linear((200, 150), (200, 260), range(12))}))
    summary = RunSummary(stages={"zones": zones.report()})
    assert summary.to_dict()["zones"]["lines"]["door"]["out"] == 1
    text = summary.format_text()
    assert "line door: in 0, out 1" in text and "zone bay: 1 entries, 1 now, dwell mean 1.1 s, max 1.1 s" in text
    assert "(person 0/1 in/out)" in text


@pytest.mark.gpu
def test_gpu_detections_give_the_same_events_with_one_copy():
    import torch

    paths = {t: linear((150 + 30 * t, 150 + t), (150 + 30 * t, 260), range(t, t + 30)) for t in range(10)}
    cpu = Zones([DOOR], [BAY], hysteresis=2).process(frames_from_paths(paths))
    gpu_frames = frames_from_paths(paths, device="cuda")
    assert gpu_frames[5].detections.device.type == "cuda"
    gpu = Zones([DOOR], [BAY], hysteresis=2).process(gpu_frames)
    strip = lambda evs: [(e.kind, e.name, e.frame, e.track_id, e.direction) for e in evs]  # noqa: E731
    assert strip(events(gpu)) == strip(events(cpu)) and len(events(cpu)) >= 15  # 15 on the CPU (enter, cross, ...)
    torch.cuda.synchronize()


def test_clock_falls_back_to_pts_then_index_over_fps_and_duplicate_ids_count_once():
    from vidpipe.zones.stage import stream_time

    f = frame(7, [], pts=None)
    assert stream_time(f.meta, 25.0) == pytest.approx(7 / 25)
    assert stream_time(frame(7, [], pts=3.5).meta, 25.0) == 3.5
    assert stream_time(frame(7, [], pts=3.5, mono=100.0).meta, 25.0) == 100.0
    # an image folder (no pts) at the assumed 5 fps: a 2 s dwell is 10 frames
    zones = Zones(zones=[Zone("bay", BAY.points, dwell=2.0)], hysteresis=1, fps=5.0)
    out = zones.process([frame(i, [(1, 0, 200, 200), (1, 0, 210, 210)], pts=None) for i in range(12)])
    assert [(e.frame, e.kind) for e in events(out)] == [(0, "enter"), (10, "dwell")]
    assert zones.report()["zones"]["bay"]["entries"] == 1


def test_the_packed_copy_gives_the_same_arrays_as_the_views():
    """The GPU path (one packed copy per call), run on CPU tensors: same rows, dtypes, order."""
    from vidpipe.zones.stage import _host_arrays

    frames = [frame(i, [(t, t % 3, 100.25 + 7 * t, 150.5 + i) for t in range(i % 5)] + [(-1, 2, 3.0, 4.0)] * (i % 2))
              for i in range(9)] + [frame(9, [], tracked=False)]
    views, packed = _host_arrays(frames), _host_arrays(frames, pack=True)
    assert len(views) == len(packed) == 10
    for (b1, c1, t1), (b2, c2, t2) in zip(views, packed):
        np.testing.assert_array_equal(b1, b2)
        assert c2.dtype == t2.dtype == np.int64
        assert c1.tolist() == c2.tolist() and t1.tolist() == t2.tolist()


def test_a_line_outside_the_frame_is_named_in_a_warning(caplog):
    zones = Zones(["far=1000,1000,1900,1000"], ["bay=0,0,50,0,50,50"])
    with caplog.at_level("WARNING", logger="vidpipe.zones"):
        zones.process([frame(0, [(1, 0, 10, 10)])])
    msgs = [r.getMessage() for r in caplog.records]
    assert msgs == ["cam0.mp4: line 'far' lies outside the 640x480 frame; it will count nothing (its points are "
                    "source pixels)"]
