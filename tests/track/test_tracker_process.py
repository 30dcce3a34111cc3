"""The tracker's helper process (TrackerStage(worker="process")): the same ids as inline, a child
that dies or fails leaves tracking inline with ids still counting up, the child ends with close()
and with a stage dropped without it."""

from __future__ import annotations

import gc
import logging
import os
import signal
import time

import numpy as np
import pytest
import torch

from vidpipe.track import TrackerStage
from vidpipe.track.book import PackedFrames
from vidpipe.track.process import TrackerProcess, TrackerProcessError
from vidpipe.track.config import TrackConfig
from vidpipe.types import Detections, FrameMeta, FrameResult


def _walk(frames, *, start=0):
    """Two objects: one walking right 4 px a frame, one standing still."""
    out = []
    for f in range(start, start + frames):
        b = torch.tensor([[10.0 + 4 * f, 50, 50.0 + 4 * f, 150], [400, 300, 450, 400]])
        dets = Detections(b, torch.full((2,), 0.9), torch.zeros(2, dtype=torch.int64), torch.zeros(2, dtype=torch.int64))
        out.append(FrameResult(FrameMeta("cam", 0, f, f / 30, 480, 640), dets))
    return out


def _gone(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # a child of this process: reaped by its Popen's wait; else it may linger as a zombie
            with open(f"/proc/{pid}/stat", "rb") as f:
                if f.read().split()[2] == b"Z":
                    return True
        except OSError:
            return True
        time.sleep(0.02)
    return False


def test_a_killed_helper_leaves_tracking_inline_with_ids_counting_up(caplog):
    stage = TrackerStage(worker="process")
    first = stage.process(_walk(5))
    assert [r.detections.track_ids.tolist() for r in first] == [[1, 2]] * 5
    pid = stage._child.pid
    os.kill(pid, signal.SIGKILL)
    assert _gone(pid)
    with caplog.at_level(logging.WARNING, logger="vidpipe.track.stage"):
        later = stage.process(_walk(5, start=5))
    # the tracks start over inline (first frames of a new tracker are confirmed at once) with new ids
    assert [r.detections.track_ids.tolist() for r in later] == [[3, 4]] * 5
    assert "tracker process exited" in caplog.text and "tracking goes on in the run's process" in caplog.text
    assert stage.report()["worker"] == "inline" and stage.report()["tracks"] == 4
    stage.close()


def test_a_request_that_fails_in_the_child_is_an_error_and_the_child_serves_on():
    proc = TrackerProcess(TrackConfig())
    try:
        bad = proc.request([], [("not packed frames", 1)])
        with pytest.raises(TrackerProcessError, match="the tracker process failed: AttributeError"):
            proc.reply(bad)
        good = PackedFrames(0, np.array([0.0]), np.array([1]), np.array([[0, 0, 10, 10, 0.9, 0]], np.float32))
        seq = proc.request([], [(good, 7)])
        got = proc.reply(seq)
        assert got[0].ids.tolist() == [7] and got[0].next_id == 8 and got[0].started == 1
    finally:
        proc.close()
    assert _gone(proc.pid)


def test_close_ends_the_child_and_so_does_dropping_the_stage():
    stage = TrackerStage(worker="process")
    stage.process(_walk(2))
    pid = stage._child.pid
    stage.close()
    assert _gone(pid)
    stage.close()  # idempotent

    dropped = TrackerStage(worker="process")
    dropped.process(_walk(2))
    pid = dropped._child.pid
    del dropped
    gc.collect()
    assert _gone(pid)


def test_resets_reach_the_child_before_the_next_frames_and_ids_go_on():
    for worker in ("inline", "process"):
        stage = TrackerStage(worker=worker)
        stage.process(_walk(3))
        stage.reset(0)
        again = stage.process(_walk(3, start=3))
        assert [r.detections.track_ids.tolist() for r in again] == [[3, 4]] * 3, worker
        assert stage.report()["streams"]["0"]["resets"] == 1
        stage.close()


def test_worker_is_checked():
    from vidpipe.errors import ConfigError

    with pytest.raises(ConfigError, match="worker="):
        TrackerStage(worker="thread")


def test_a_detection_run_tracks_the_same_in_the_helper_process(bikes_path):
    """vidpipe.detect on the real street clip: the ids from the helper process are the inline ones,
    frame for frame, every frame once and in order."""
    import vidpipe

    ids = {}
    for worker in ("inline", "process"):
        stage = TrackerStage(worker=worker)
        run = vidpipe.detect(str(bikes_path), device="cpu", batch_size=8, max_frames=48, stages=[stage])
        ids[worker] = []
        for r in run:
            ids[worker].append((r.meta.index, r.detections.track_ids.tolist()))
            if worker == "process" and r.meta.index == 0:  # the run waited for the helper before its clock
                assert stage._child is not None and stage._child._started
        assert run.summary().stages["track"]["worker"] == worker
    assert [i for i, _ in ids["process"]] == list(range(48))
    assert ids["process"] == ids["inline"]
    assert any(t for _, t in ids["inline"] if t and max(t) > 0)  # something was tracked


def test_a_helper_that_cannot_start_leaves_tracking_inline(monkeypatch, caplog):
    """The child exits at once (here: a "python" that is /bin/false): the first frames are tracked
    inline, with a warning that says so."""
    import sys

    monkeypatch.setattr(sys, "executable", "/bin/false")
    stage = TrackerStage(worker="process")
    with caplog.at_level(logging.WARNING, logger="vidpipe.track.stage"):
        out = stage.process(_walk(3))
    assert [r.detections.track_ids.tolist() for r in out] == [[1, 2]] * 3
    assert "exited while starting" in caplog.text and stage.report()["worker"] == "inline"
    stage.close()


def test_the_follow_pipelines_timed_tracker_forwards_warm_up():
    """vidpipe follow wraps its tracker in TimedStage: the run's warm_up still reaches the stage
    (here a helper process, which is then ready), and process() times the stage."""
    from vidpipe.follow.timing import TimedStage

    inner = TrackerStage(worker="process")
    timed = TimedStage(inner)
    timed.warm_up()
    assert inner._child is not None and inner._child._started
    out = timed.process(_walk(3))
    assert [r.detections.track_ids.tolist() for r in out] == [[1, 2]] * 3
    assert timed.report()["ms_per_frame"] > 0
    timed.close()
    assert inner._child is None
