"""FollowStage: on a real detect run (the bundled COCO model finds a real person walking across
a generated street; the views it renders are checked by running the detector again on them),
and on hand-made results (class filter, streams, errors)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vidpipe.errors import ConfigError
from walk_clip import make_walk_clip, walker_x

FRAMES = 20


@pytest.fixture(scope="module")
def walk(tmp_path_factory) -> Path:
    return make_walk_clip(tmp_path_factory.mktemp("follow") / "walk.mp4", frames=FRAMES, size=(640, 360))


def test_views_follow_the_walker_in_a_real_run(walk, tmp_path):
    import cv2
    import torch

    import vidpipe
    from vidpipe.follow import FollowStage

    views = []
    stage = FollowStage("person", size=(320, 180), margin=1.8,
                        sink=lambda meta, image: views.append((meta.index, stage.window(0), image)))  # fmt: skip
    run = vidpipe.detect(str(walk), device="cpu", classes="person", track=True, stages=[stage], batch_size=8)
    results = list(run)
    assert [i for i, _, _ in views] == list(range(FRAMES)) == [r.index for r in results]
    assert all(v.shape == (3, 180, 320) and v.dtype == torch.uint8 and v.device.type == "cpu" for _, _, v in views)
    rep = run.summary().stages["follow"]
    assert rep["frames"] == FRAMES and rep["frames_with_target"] >= FRAMES - 2, rep
    assert rep["target_in_frame"] >= 0.9, rep
    assert rep["plan_ms_per_frame"] > 0 and rep["render_ms_per_frame"] > 0 and rep["wide_frames"] == 0
    # the window (~457 of 640 px wide) pans right with her
    xs = [w.cx for _, w, _ in views]
    assert xs[-1] - xs[0] > 150 and all(b >= a - 2 for a, b in zip(xs, xs[1:])), xs
    # the detector, run again on the views, finds her where the window says she is
    folder = tmp_path / "views"
    folder.mkdir()
    for i, _, v in views:
        cv2.imwrite(str(folder / f"{i:03d}.png"), cv2.cvtColor(v.permute(1, 2, 0).numpy(), cv2.COLOR_RGB2BGR))
    found = 0
    for r, (i, w, _) in zip(vidpipe.detect(str(folder), device="cpu", classes="person", results_on_host=True), views):
        b = r.detections.boxes.numpy()
        if len(b):
            source_x = w.box[0] + (b[:, 0] + b[:, 2]) / 2 * w.w / 320  # view pixels -> source pixels
            found += bool(np.any(np.abs(source_x - walker_x(i, FRAMES, 640)) < 6))
    assert found >= 0.8 * FRAMES, found


def _result(stream: int, index: int, boxes, classes, *, names=("person", "bicycle", "sports ball"), size=(360, 640)):
    import torch

    from vidpipe.types import Detections, FrameMeta, FrameResult

    h, w = size
    n = len(boxes)
    det = Detections(torch.tensor(boxes, dtype=torch.float32).reshape(n, 4), torch.full((n,), 0.9),
                     torch.tensor(classes, dtype=torch.int64), torch.zeros(n, dtype=torch.int64))  # fmt: skip
    meta = FrameMeta(source=f"s{stream}", stream_id=stream, index=index, pts=index / 30, height=h, width=w)
    return FrameResult(meta, det, names=names, image=torch.zeros((3, h, w), dtype=torch.uint8))


def test_only_the_target_class_moves_the_camera_and_streams_are_separate():
    from vidpipe.follow import FollowStage
    from vidpipe.follow.planner import Planner

    got = []
    stage = FollowStage("sports ball", size=(64, 36), sink=lambda meta, image: got.append((meta.stream_id, image)))
    ball = [50.0, 300.0, 60.0, 310.0]
    person = [500.0, 50.0, 550.0, 150.0]
    for i in range(45):
        stage.process([_result(0, i, [person, ball], [0, 2])])
        stage.process([_result(1, i, [person], [0])])  # no ball in stream 1
    w0, w1 = stage._planners[0].window, stage._planners[1].window
    assert w0.contains(tuple(ball)) and not w0.contains(tuple(person)) and w0.w < 640 / 2
    wide = Planner(640, 360).wide
    assert (w1.cx, w1.cy, w1.w) == (wide.cx, wide.cy, wide.w)
    rep = stage.report()
    assert rep["frames"] == 90 and rep["frames_with_target"] == 45 and rep["target_in_frame"] == 1.0
    assert len(got) == 90 and all(img.shape == (3, 36, 64) for _, img in got)
    stage.reset(0)
    assert 0 not in stage._planners


def test_unknown_target_and_bad_arguments_are_config_errors():
    from vidpipe.follow import FollowStage

    stage = FollowStage("sports bal", sink=lambda m, i: None)
    stage.target_option = "--target"
    with pytest.raises(ConfigError, match=r"--target: .*sports ball"):
        stage.process([_result(0, 0, [], [])])
    with pytest.raises(ConfigError, match="sink"):
        FollowStage("person", sink=None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="size"):
        FollowStage("person", sink=lambda m, i: None, size=(0, 720))
    with pytest.raises(ConfigError, match="margin"):
        FollowStage("person", sink=lambda m, i: None, margin=0.1)
    with pytest.raises(ConfigError, match="zoom="):
        FollowStage("person", sink=lambda m, i: None, zoom=2)
