"""TrackerStage in the stage chain: track_ids per stream, on the detections' device, time from
the frames' clocks, reset on a live reconnect, reports; embeddings used when present."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from vidpipe.stages import Stage, StageRunner
from vidpipe.track import TrackerStage
from vidpipe.track.stage import frame_time
from vidpipe.types import Detections, FrameMeta, FrameResult


def _result(sid, index, boxes, *, connection=0, pts=None, mono=None, scores=None, device="cpu", emb=None):
    b = torch.tensor(boxes, dtype=torch.float32, device=device).reshape(-1, 4)
    n = b.shape[0]
    s = torch.full((n,), 0.9, device=device) if scores is None else torch.tensor(scores, device=device)
    dets = Detections(b, s, torch.zeros(n, dtype=torch.int64, device=device), torch.zeros(n, dtype=torch.int64, device=device))
    meta = FrameMeta(f"cam{sid}", sid, index, pts, 480, 640, captured_mono=mono, connection=connection)
    return FrameResult(meta, dets, embeddings=emb)


def _walk(sid, frames, *, start=0, connection=0, x0=10.0, device="cpu"):
    """One object walking right 4 px per frame, a second one standing still."""
    return [
        _result(sid, f, [[x0 + 4 * f, 50, x0 + 4 * f + 40, 150], [400, 300, 450, 400]], pts=f / 30,
                connection=connection, device=device)
        for f in range(start, start + frames)
    ]  # fmt: skip


@pytest.fixture(params=["inline", "process", "inline-numpy"])
def worker(request):
    """Every stage test runs with the compiled trackers inline and in the helper process, and with
    the numpy trackers inline: same answers."""
    return request.param


def _stage(worker, **options):
    mode, _, engine = worker.partition("-")
    return TrackerStage(worker=mode, engine=engine or "compiled", **options)


def test_is_a_stage_and_sets_track_ids(worker):
    stage = _stage(worker)
    assert isinstance(stage, Stage) and stage.name == "track" and not stage.needs_frames
    out = stage.process(_walk(0, 10))
    assert len(out) == 10
    for r in out:
        t = r.detections.track_ids
        assert t is not None and t.dtype == torch.int64 and t.shape == (2,) and t.device.type == "cpu"
    ids = torch.stack([r.detections.track_ids for r in out])
    assert (ids == ids[0]).all() and ids[0].tolist() == [1, 2]  # first frame confirmed, ids kept
    mode, _, engine = worker.partition("-")
    assert stage.report() == {"tracks": 2, "worker": mode, "engine": engine or "compiled",
                              "streams": {"0": {"tracks": 2, "active": 2, "frames": 10, "resets": 0}}}  # fmt: skip
    stage.close()


def test_unconfirmed_detections_get_minus_one(worker):
    stage = _stage(worker)
    first = stage.process([_result(0, 0, [[0, 0, 10, 10]])])
    assert first[0].detections.track_ids.tolist() == [1]
    # a new object appears at frame 1: -1 on its first frame, an id from its second
    out = stage.process([_result(0, 1, [[0, 0, 10, 10], [300, 300, 340, 380]]),
                         _result(0, 2, [[0, 0, 10, 10], [300, 300, 340, 380]])])  # fmt: skip
    assert out[0].detections.track_ids.tolist() == [1, -1]
    assert out[1].detections.track_ids.tolist() == [1, 2]
    low = stage.process([_result(0, 3, [[600, 10, 620, 50]], scores=[0.3])])  # low score: never a new track
    assert low[0].detections.track_ids.tolist() == [-1]


def test_streams_are_independent_and_reset_on_reconnect(worker):
    stage = _stage(worker)
    runner = StageRunner([stage])
    a, b = _walk(0, 6), _walk(1, 6, x0=200.0)
    out = runner([r for pair in zip(a, b) for r in pair])  # interleaved streams in one batch
    ids0 = {tuple(r.detections.track_ids.tolist()) for r in out if r.meta.stream_id == 0}
    ids1 = {tuple(r.detections.track_ids.tolist()) for r in out if r.meta.stream_id == 1}
    assert ids0 == {(1, 2)} and ids1 == {(1, 2)}  # ids count per stream
    # stream 1 reconnects: its tracks start over; ids go on counting (an id never means two tracks)
    out = runner(_walk(1, 3, start=6, x0=200.0, connection=1) + _walk(0, 3, start=6))
    s1 = [r.detections.track_ids.tolist() for r in out if r.meta.stream_id == 1]
    s0 = [r.detections.track_ids.tolist() for r in out if r.meta.stream_id == 0]
    assert s1[0] == [3, 4] and s1[-1] == [3, 4]
    assert all(ids == [1, 2] for ids in s0)
    rep = stage.report()
    assert rep["streams"]["1"]["resets"] == 1 and rep["streams"]["0"]["resets"] == 0
    assert rep["streams"]["1"]["tracks"] == 4 and rep["tracks"] == 6


def test_frame_time_prefers_capture_time_then_pts_then_index():
    m = FrameMeta("x", 0, 30, 2.5, 1, 1, captured_mono=1000.25)
    assert frame_time(m, 30.0) == 1000.25
    assert frame_time(dataclasses.replace(m, captured_mono=None), 30.0) == 2.5
    assert frame_time(dataclasses.replace(m, captured_mono=None, pts=None), 30.0) == 1.0


def test_frame_time_skips_times_a_corrupt_stream_gives():
    """NaN or inf (a corrupt file's timestamp, a broken capture clock) is not a time: the next
    clock is used, down to the frame index."""
    m = FrameMeta("a", 0, 30, 2.5, 480, 640, captured_mono=float("inf"))
    assert frame_time(m, 30.0) == 2.5
    for bad in (float("nan"), float("inf"), float("-inf")):
        assert frame_time(dataclasses.replace(m, captured_mono=None, pts=bad), 30.0) == 1.0


def test_live_frames_age_tracks_by_capture_time(worker):
    """A live stream drops frames: capture times 0.9 s apart keep the track (buffer 1 s) even though
    frame indices and pts say otherwise; 1.2 s apart end it."""
    for gap, same in ((0.9, True), (1.2, False)):
        stage = _stage(worker)
        box = [[100, 100, 140, 200]]
        first = stage.process([_result(0, i, box, pts=None, mono=50.0 + i / 30) for i in range(3)])
        later = stage.process([_result(0, 3 + i, box, pts=None, mono=50.0 + 2 / 30 + gap + i / 30) for i in range(2)])
        a = first[-1].detections.track_ids.tolist()
        b = later[-1].detections.track_ids.tolist()
        assert (a == b) is same, (gap, a, b)


def test_streams_option_leaves_other_streams_untracked(worker):
    stage = _stage(worker, streams={1})
    out = StageRunner([stage])(_walk(0, 2) + _walk(1, 2))
    assert [r.detections.track_ids is None for r in out] == [True, True, False, False]


def test_embeddings_are_used_when_present(worker):
    """Two overlapping objects whose next boxes overlap the other track more (see
    test_bytetrack_scenes): the stage takes the embeddings from FrameResult.embeddings."""
    a, b = [0.0, 0.0, 10.0, 20.0], [6.0, 0.0, 16.0, 20.0]
    d1, d2 = [5.0, 0.0, 15.0, 20.0], [1.0, 0.0, 11.0, 20.0]
    emb = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    for use, want in ((True, "follow embeddings"), (False, "follow IoU")):
        stage = _stage(worker)
        r0 = _result(0, 0, [a, b], pts=0.0, emb=emb if use else None)
        r1 = _result(0, 1, [d1, d2], pts=1 / 30, emb=emb if use else None)
        out = stage.process([r0, r1])
        i0, i1 = out[0].detections.track_ids.tolist(), out[1].detections.track_ids.tolist()
        assert (i1 == i0) if use else (i1 == i0[::-1]), want


def test_empty_frames_and_empty_batches(worker):
    stage = _stage(worker)
    assert stage.process([]) == []
    out = stage.process([_result(0, 0, np.zeros((0, 4))), _result(0, 1, [[0, 0, 10, 10]])])
    assert out[0].detections.track_ids.shape == (0,)
    assert out[1].detections.track_ids.tolist() == [-1]  # not the stream's first frame: needs a second hit
    stage.close()
    stage.close()


@pytest.mark.gpu
def test_detections_on_cuda_get_ids_on_cuda_same_as_cpu():
    from vidpipe.bench.track_scenes import make_scene
    from vidpipe.bench.track_score import _results

    scene = make_scene("crossing", seed=0)
    cpu_out, gpu_out = [], []
    for device, sink in (("cpu", cpu_out), ("cuda", gpu_out)):
        stage = TrackerStage()
        results = _results(scene, device)
        for i in range(0, len(results), 32):
            sink.extend(stage.process(results[i : i + 32]))
    for c, g in zip(cpu_out, gpu_out):
        assert g.detections.track_ids.device.type == "cuda"
        assert g.detections.boxes.device.type == "cuda"
        assert torch.equal(c.detections.track_ids, g.detections.track_ids.cpu())
    assert sum(int((r.detections.track_ids >= 0).sum()) for r in gpu_out) > 0.8 * scene.detections


def test_with_track_ids_checks_the_ids_and_keeps_the_rest():
    d = _result(0, 0, [[0, 0, 10, 10], [5, 5, 20, 20]]).detections
    out = d.with_track_ids(torch.tensor([3, -1]))
    assert out.track_ids.tolist() == [3, -1] and out.boxes is d.boxes and out.scores is d.scores
    assert d.track_ids is None  # a new object; the original is unchanged
    for bad in (torch.tensor([1]), torch.tensor([1.0, 2.0]), torch.tensor([[1, 2]])):
        with pytest.raises(ValueError, match=r"track_ids must be \(2,\) int64"):
            d.with_track_ids(bad)
