"""The follow-cam planner on generated scenes with ground truth: far smoother than the naive
cameras with the target kept in frame, holds then eases to the wide shot when the target is
lost, eases back in when it returns, runs on timestamps (dropped frames do not change the
motion), and never leaves the frame."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vidpipe.errors import ConfigError
from vidpipe.follow.baselines import CentreOnDetection, MovingAverage
from vidpipe.follow.metrics import jerk, run_camera, score_path
from vidpipe.follow.planner import FollowConfig, Planner, pick_target
from vidpipe.follow.scenes import SCENES, make_scene
from vidpipe.follow.window import Window, parse_size, wide_window

IN_FRAME_SCENES = ("still", "linear", "bounce", "turn")
W, H = 1920, 1080


@pytest.mark.parametrize("name", IN_FRAME_SCENES)
def test_far_smoother_than_naive_cameras_with_the_target_in_frame(name):
    for seed in range(3):
        scene = make_scene(name, seed=seed)
        assert scene.stays_in_frame
        mine = score_path(scene, run_camera(Planner(W, H), scene))
        none = score_path(scene, run_camera(CentreOnDetection(W, H), scene))
        ema = score_path(scene, run_camera(MovingAverage(W, H), scene))
        assert mine.in_frame >= 0.95, (name, seed, mine)
        assert mine.jerk_mean <= 0.1 * none.jerk_mean, (name, seed, mine, none)
        assert mine.jerk_p95 <= 0.3 * none.jerk_p95, (name, seed, mine, none)
        assert mine.jerk_mean < ema.jerk_mean, (name, seed, mine, ema)


def test_the_ball_that_leaves_and_returns_is_recovered():
    scene = make_scene("leave", seed=1)
    assert not scene.stays_in_frame
    windows = run_camera(Planner(W, H), scene)
    s = score_path(scene, windows)
    assert s.in_frame >= 0.95 and s.recovery_s is not None and s.recovery_s <= 1.5, s
    # while it is away the camera went to the wide shot
    wide = wide_window(W, H, 16 / 9)
    away = np.flatnonzero(~scene.visible)
    last_away = windows[away[-1]]
    assert abs(last_away.w - wide.w) < 0.02 * wide.w and abs(last_away.cx - wide.cx) < 0.02 * W


def test_jitter_alone_does_not_move_the_camera():
    scene = make_scene("still", seed=1, noise=4.0)
    path = np.array([(w.cx, w.cy, w.w) for w in run_camera(Planner(W, H), scene)])
    assert np.abs(path - path[0]).max() < 1.0


def _feed(planner, times, box):
    return [planner.update(float(t), box) for t in times]


def test_lost_target_holds_then_eases_to_the_wide_shot_then_eases_back_in():
    c = FollowConfig(hold=1.0, ease=1.5)
    p = Planner(W, H, c)
    box = (300.0, 700.0, 330.0, 730.0)  # low left
    fps = 30
    seen = _feed(p, np.arange(0, 2, 1 / fps), box)
    before = seen[-1]
    assert before.w < 0.5 * W and before.contains(box)
    lost_t = np.arange(2, 6, 1 / fps)
    lost = _feed(p, lost_t, None)
    during_hold = [w for t, w in zip(lost_t, lost) if t < 2 - 1 / fps + c.hold - 0.02]
    assert max(abs(w.cx - before.cx) + abs(w.cy - before.cy) + abs(w.w - before.w) for w in during_hold) < 2.0
    assert p.mode == "wide"
    wide = wide_window(W, H, c.aspect)
    settled = [w for t, w in zip(lost_t, lost) if t > 2 + c.hold + c.ease + 0.5]
    assert settled and all(abs(w.w - wide.w) < 0.02 * wide.w and abs(w.cx - wide.cx) < 0.02 * W for w in settled)
    widths = [w.w for t, w in zip(lost_t, lost) if t >= 2 + c.hold]
    assert all(b >= a - 1e-6 for a, b in zip(widths, widths[1:])), "the ease out is monotonic"
    # no jumps: every frame's move is within the speed limit
    limit = c.max_speed * wide.w / fps + 1e-6
    path = seen + lost
    assert all(abs(b.cx - a.cx) <= limit and abs(b.w - a.w) <= limit for a, b in zip(path, path[1:]))
    # it returns: the camera eases in (no jump), and is on it within ~1.5 s
    back_t = np.arange(6, 8, 1 / fps)
    back = _feed(p, back_t, box)
    assert abs(back[0].w - lost[-1].w) <= limit and abs(back[0].cx - lost[-1].cx) <= limit
    on = [t for t, w in zip(back_t, back) if w.contains(box, area=0.8) and w.w < 0.6 * wide.w]
    assert on and on[0] - 6 <= 1.5


def test_timing_follows_timestamps_not_frame_counts():
    for name in ("linear", "bounce", "turn"):
        scene = make_scene(name, seed=2, dropout=0.0)
        full = run_camera(Planner(W, H), scene)[::2]
        half = run_camera(Planner(W, H), scene.subsample(2))
        diff = max(max(abs(a.cx - b.cx), abs(a.cy - b.cy), abs(a.w - b.w)) for a, b in zip(full, half))
        assert diff < 0.015 * W, (name, diff)
        # a camera clocked by frame numbers would move twice as fast on the thinned stream
        p = Planner(W, H)
        by_count = [p.update(i / 30.0, d) for i, d in enumerate(scene.subsample(2).detections)]
        wrong = max(max(abs(a.cx - b.cx), abs(a.cy - b.cy)) for a, b in zip(half, by_count))
        assert wrong > 5 * diff, (name, wrong, diff)


def test_a_clock_that_goes_back_does_not_freeze_the_camera():
    p = Planner(W, H)
    box = (300.0, 700.0, 330.0, 730.0)
    _feed(p, np.arange(100, 102, 1 / 30), box)
    held = _feed(p, np.arange(0, 0.5, 1 / 30), None)  # timestamps start over, the target is lost
    assert p.mode == "hold" and abs(held[-1].cx - held[0].cx) < 1.0
    _feed(p, np.arange(0.5, 4, 1 / 30), None)
    assert p.mode == "wide" and abs(p.window.w - W) < 0.05 * W


@pytest.mark.parametrize("name", SCENES)
def test_windows_stay_inside_the_frame_at_the_output_aspect(name):
    scene = make_scene(name, seed=0, width=1280, height=960)  # 4:3 source, 16:9 output
    for make in (Planner, CentreOnDetection, MovingAverage):
        for w in run_camera(make(1280, 960), scene):
            x1, y1, x2, y2 = w.box
            assert x1 >= -1e-6 and y1 >= -1e-6 and x2 <= 1280 + 1e-6 and y2 <= 960 + 1e-6, (make, w)
            assert math.isclose(w.w / w.h, 16 / 9, rel_tol=1e-9)
            assert w.w <= 1280 + 1e-6


def test_zoom_keeps_the_margin_and_the_zoom_limit():
    p = Planner(W, H, FollowConfig(margin=4.0, max_zoom=3.0))
    big = (800.0, 400.0, 1000.0, 600.0)  # 200 px: wants 800 px of window at least
    w = _feed(p, np.arange(0, 3, 1 / 30), big)[-1]
    assert w.w >= 4.0 * 200 / 1.2 and w.h >= 4.0 * 200 / 1.2  # within the zoom dead zone
    p = Planner(W, H, FollowConfig(margin=4.0, max_zoom=3.0))
    tiny = (950.0, 530.0, 954.0, 534.0)
    w = _feed(p, np.arange(0, 3, 1 / 30), tiny)[-1]
    assert abs(w.h - H / 3) < 1.0


def test_pick_target_keeps_the_track_then_takes_the_best():
    boxes = np.array([[0, 0, 10, 10], [20, 20, 30, 30], [40, 40, 50, 50]], float)
    scores = np.array([0.5, 0.9, 0.7])
    tids = np.array([7, -1, 3])
    assert pick_target(boxes, scores, tids, 7) == (0, 7)  # the current track, though not the best
    assert pick_target(boxes, scores, tids, 9) == (2, 3)  # gone: the best confirmed one
    assert pick_target(boxes, scores, np.array([-1, -1, -1]), 9) == (1, 9)  # none confirmed: the best
    assert pick_target(boxes, scores, None, None) == (1, None)
    assert pick_target(boxes[:0], scores[:0], tids[:0], 7) == (None, 7)


def test_bad_options_are_config_errors():
    with pytest.raises(ConfigError, match="margin"):
        FollowConfig(margin=0.5)
    with pytest.raises(ConfigError, match="smooth"):
        FollowConfig(smooth=0)
    with pytest.raises(ValueError, match="WIDTHxHEIGHT"):
        parse_size("1280")
    with pytest.raises(ValueError, match="even"):
        parse_size("1281x720")
    assert parse_size("1280x720") == (1280, 720)


def test_jerk_is_exact_on_a_cubic():
    t = np.arange(50) / 30.0
    j = jerk(t, np.stack([t**3, 2 * t**3 - t**2, 0 * t], 1))
    assert np.allclose(j[3:-3], 6 * math.sqrt(5), rtol=1e-6)
    assert np.allclose(jerk(t, np.stack([t, t**2], 1))[3:-3], 0, atol=1e-6)


def test_window_contains():
    w = Window(100, 100, 100, 50)
    assert w.contains((60, 80, 140, 120)) and not w.contains((60, 80, 140, 130))
    assert not w.contains((59, 80, 140, 120), area=0.8) and w.contains((65, 82, 135, 118), area=0.8)


def test_bench_table_and_json(tmp_path):
    import json

    from vidpipe.bench.follow import run_follow_bench, write_json

    result = run_follow_bench(["still", "leave"], seeds=1)
    rows = {(r["scene"], r["camera"]): r for r in result.rows}
    assert set(rows) == {(s, c) for s in ("still", "leave") for c in ("planner", "none", "ema")}
    assert rows["leave", "planner"]["recovery_s"] is not None and rows["still", "planner"]["recovery_s"] is None
    assert rows["still", "planner"]["jerk_mean"] < 0.1 * rows["still", "none"]["jerk_mean"]
    table = result.table()
    assert "| leave | planner |" in table and "Planner.update" in table
    assert result.drop_check["still"] < 1e-9 and result.rate_fps > 0
    data = json.loads(write_json(result, tmp_path / "b.json").read_text())
    assert len(data["rows"]) == 6 and set(data["drop_check"]) == {"still", "leave"}
