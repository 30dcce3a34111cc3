"""The pipeline with live sources (a real paced PyAV reader, the real bundled model, on the CPU
at low resolution): deadline batching, fairness against a busy file, sources that never end
(slots), close() from another thread, add/remove at run time, latest-wins drops, status().

Every wait has a timeout; each test runs a few seconds.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from collections import Counter

import pytest
from conftest import device_params
from paced_source import PacedFileSource

from vidpipe.pipeline import DetectionRun, PipelineConfig
from vidpipe.sources.options import LiveOptions
from vidpipe.sources.spec import SourceSpec

CAM = dict(width=320, height=240, frames=30, fps=20, gop=10)  # a small "camera" clip, looped


@pytest.fixture(scope="module")
def detector():
    from vidpipe.api import build_detector

    return build_detector("yolov3-tiny", device="cpu", imgsz=160)


@pytest.fixture
def cam(make_clip):
    return make_clip(**CAM)


def latencies_while(run, until, *, timeout=20.0):
    """Iterate ``run`` batch by batch until ``until(per_stream)`` or ``timeout``; per stream id:
    the capture-to-receipt latency of each result, measured here (seconds)."""
    per: dict[int, list[float]] = {}
    t_end = time.monotonic() + timeout
    for batch in run.batches():
        now = time.monotonic()
        for r in batch:
            if r.meta.captured_mono is not None:
                per.setdefault(r.stream_id, []).append(now - r.meta.captured_mono)
            else:
                per.setdefault(r.stream_id, [])
        if until(per, batch) or now > t_end:
            break
    run.close()
    return per


def test_deadline_batching_a_frame_waits_about_one_interval(detector, cam):
    """A 20 fps camera with batch_size=32: frames leave after about one frame interval, not when
    32 have gathered (1.6 s at 20 fps)."""
    run = DetectionRun([PacedFileSource(cam.path)], detector, PipelineConfig(batch_size=32))
    sizes: list[int] = []

    def until(per, batch):
        sizes.append(len(batch))
        return len(per.get(0, ())) >= 40

    lat = latencies_while(run, until)[0]
    assert len(lat) >= 40
    assert max(sizes) < 8, sizes  # never waited for a full batch (32 frames: 1.6 s)
    assert statistics.median(lat) < 0.4, sorted(lat)
    assert run.batch_timeout == pytest.approx(1 / 20, rel=0.3)  # measured from the camera's pace


def test_explicit_batch_timeout_gathers_frames(detector, cam):
    """batch_timeout=0.3 s at 20 fps: batches of about 6 frames, and no frame waits much longer."""
    config = PipelineConfig(batch_size=32, live=LiveOptions(batch_timeout=0.3, queue_frames=32))
    run = DetectionRun([PacedFileSource(cam.path)], detector, config)
    sizes: list[int] = []

    def until(per, batch):
        sizes.append(len(batch))
        return len(per.get(0, ())) >= 30

    lat = latencies_while(run, until)[0]
    assert statistics.mean(sizes) >= 3, sizes
    assert statistics.median(lat) < 0.3 + 0.4, sorted(lat)
    assert run.batch_timeout == 0.3


def test_busy_file_does_not_delay_a_camera(detector, cam, make_clip):
    """A file decoded as fast as possible keeps the model busy; the camera's frames still leave
    within a batch or two (round-robin), and the file keeps every frame."""
    big = make_clip(width=320, height=240, frames=200, fps=30, gop=30, pattern="bars")
    config = PipelineConfig(batch_size=8)
    run = DetectionRun([SourceSpec("file", str(big.path)), PacedFileSource(cam.path)], detector, config)
    got = Counter()

    def until(per, batch):
        got.update(r.stream_id for r in batch)
        return got[0] >= 200

    lat = latencies_while(run, until, timeout=60)[1]
    assert got[0] == 200 and run.states[0].status == "ok"  # the file: every frame
    assert len(lat) >= 10
    per_batch = run.get_stats()["stages_ms_per_frame"]["model"] * 8 / 1e3  # seconds per batch of 8
    assert statistics.median(lat) < max(0.5, 4 * per_batch), (sorted(lat), per_batch)


def test_six_cameras_all_run_with_four_slots(detector, cam):
    """Live sources never hold the max_open_sources slots: 6 cameras with 4 slots all run."""
    config = PipelineConfig(batch_size=8, max_open_sources=4)
    run = DetectionRun([PacedFileSource(cam.path, fps=10) for _ in range(6)], detector, config)

    def until(per, batch):
        return len(per) == 6 and all(len(v) >= 3 for v in per.values())

    per = latencies_while(run, until, timeout=30)
    assert sorted(per) == list(range(6)) and all(len(v) >= 3 for v in per.values()), {k: len(v) for k, v in per.items()}
    # a live stream's normal end is the run stopping it: ok, with how it ended
    assert all(st.status == "ok" and st.stopped and "stopped by the run" in st.extra["ended"] for st in run.states)


@pytest.mark.parametrize("keep_alive", [False, True])
def test_close_from_another_thread_ends_iteration_within_a_second(detector, cam, keep_alive):
    """The consumer mostly waits (a 4 fps camera); close() from another thread ends its loop."""
    before = {t.ident for t in threading.enumerate()}
    run = DetectionRun([PacedFileSource(cam.path, fps=4)], detector, PipelineConfig(batch_size=4),
                       keep_alive=keep_alive)
    closed_at: list[float] = []

    def closer():
        time.sleep(1.5)
        closed_at.append(time.monotonic())
        run.close()

    t = threading.Thread(target=closer)
    t.start()
    n = 0
    for _ in run:
        n += 1
    ended = time.monotonic()
    t.join(10)
    assert n >= 2
    assert ended - closed_at[0] < 1.0, ended - closed_at[0]
    left = [th.name for th in threading.enumerate() if th.ident not in before and th.name.startswith("vidpipe")]
    assert not left
    assert run.summary().sources[0].status == "ok"  # a live stream ends when the run ends it
    assert run.summary().frames == n  # counted = received, nothing after close


def test_close_of_an_idle_keep_alive_run(detector):
    """keep_alive with no source at all: the consumer waits; close() ends it."""
    run = DetectionRun([], detector, PipelineConfig(), keep_alive=True)
    threading.Timer(0.5, run.close).start()
    t0 = time.monotonic()
    assert list(run) == []
    assert time.monotonic() - t0 < 1.5


def test_add_and_remove_sources_at_run_time(detector, cam, make_clip):
    clip = make_clip(width=320, height=240, frames=24, fps=10, gop=8, pattern="bars")
    run = DetectionRun([PacedFileSource(cam.path)], detector, PipelineConfig(batch_size=4), keep_alive=True)
    got = Counter()
    added = removed_at = None
    t_end = time.monotonic() + 30
    for batch in run.batches():
        got.update(r.stream_id for r in batch)
        if added is None and got[0] >= 5:
            added = run.add_source(str(clip.path))
            assert added == 1 and run.status()["streams"][1]["kind"] == "file"
        if added is not None and removed_at is None and got[1] > 0:
            run.remove_source(0)
            removed_at = got[0]
            worker = run._workers[0]
        if added is not None and run.states[1].status == "ok" and run.states[1].drained:
            run.stop()  # keep_alive: only stop() or close() ends it
        assert time.monotonic() < t_end
    assert got[1] == 24 and run.states[1].status == "ok"  # the file: every frame, in the same run
    assert got[0] <= removed_at + 4 + 2  # at most the batch in flight and the queued frames
    worker.thread.join(1.0)
    assert not worker.thread.is_alive()
    st = run.status()["streams"]
    assert [s["status"] for s in st] == ["removed", "ok"]
    summary = run.summary()
    assert summary.sources[0].extra.get("removed") is True and summary.sources[1].status == "ok"
    with pytest.raises(RuntimeError, match="ended"):
        run.add_source(str(clip.path))


def test_slow_consumer_drops_oldest_frames_and_counts_them(detector, cam):
    """A 30 fps camera and a consumer that takes 0.3 s per batch: latest wins, every drop is
    counted, results stay in frame order, and frames in = delivered + dropped + left at close."""
    config = PipelineConfig(batch_size=2, live=LiveOptions(queue_frames=2))
    run = DetectionRun([PacedFileSource(cam.path, fps=30)], detector, config)
    idx = []
    t_end = time.monotonic() + 4
    for batch in run.batches():
        idx.extend(r.index for r in batch)
        time.sleep(0.3)
        if time.monotonic() > t_end:
            break
    run.close()
    st = run.states[0]
    assert st.drops > 0 and idx == sorted(set(idx))
    assert st.drop_causes.get("queue", 0) > 0 and sum(st.drop_causes.values()) == st.drops, st.drop_causes
    assert len(idx) == st.frames
    left = st.frames_in - st.frames - st.drops  # queued or in flight at close (or decoded after)
    assert 0 <= left <= 2 + 2 + 1, (st.frames_in, st.frames, st.drops)
    extra = run.summary().sources[0].extra
    assert extra["drops"] == st.drops and extra["frames_in"] == st.frames_in
    assert extra["latency_ms"]["count"] == st.frames and extra["latency_ms"]["p99"] >= extra["latency_ms"]["p50"] > 0


def test_status_schema_and_redaction(detector, cam, make_clip):
    clip = make_clip(width=320, height=240, frames=12, fps=10, gop=6)
    url = "rtsp://admin:s3cret@cam.invalid:554/live"
    run = DetectionRun([PacedFileSource(cam.path, location=url), SourceSpec("file", str(clip.path))], detector,
                       PipelineConfig(batch_size=4))
    assert [s["status"] for s in run.status()["streams"]] == ["pending", "pending"]
    status = None
    for batch in run.batches():
        if run.states[0].frames >= 10:
            status = run.status()
            break
    run.close()
    text = json.dumps(status)
    assert "s3cret" not in text and "s3cret" not in json.dumps(run.summary().to_dict())
    assert set(status) == {"time", "uptime_s", "streams", "stats"}
    assert abs(status["time"] - time.time()) < 60 and status["uptime_s"] > 0
    keys = {"stream_id", "source", "kind", "status", "state", "decoder", "frames_in", "frames", "drops", "drop_causes",
            "reconnects", "stalls", "decode_errors", "detections", "fps", "latency_ms"}
    cam_s, file_s = status["streams"]
    assert set(cam_s) == keys and set(file_s) == keys
    assert cam_s["source"] == "rtsp://***@cam.invalid:554/live" and cam_s["kind"] == "live"
    assert cam_s["status"] == "running" and cam_s["state"] == "live" and cam_s["decoder"] == "pyav"
    assert cam_s["frames"] >= 10 and cam_s["frames_in"] >= cam_s["frames"]
    assert 5 < cam_s["fps"] < 40  # a 20 fps camera
    lat = cam_s["latency_ms"]
    assert lat["count"] >= 10 and 0 < lat["p50"] <= lat["p99"] < 2000
    assert file_s["kind"] == "file" and file_s["state"] is None and file_s["latency_ms"]["count"] == 0
    assert file_s["latency_ms"]["p50"] is None
    assert status["stats"]["latency_ms"]["count"] >= 10
    assert list(status["stats"]["stream_latency_ms"]) == ["0"]  # the file has no capture times
    for s in status["streams"]:
        assert isinstance(s["fps"], float) and isinstance(s["frames"], int)


@pytest.mark.parametrize("device", device_params())
def test_split_chunks_and_a_camera_keep_every_frame(make_clip, device):
    """Two files whose chunks get split across batches and a paced camera (on a GPU: worker CUDA
    streams, ready events, the post stream, the CUDA graph at batch 8); every file frame once, in
    order, with the detections of each file run alone."""
    from vidpipe.api import build_detector

    det = build_detector("yolov3-tiny", device=device, imgsz=160)
    a = make_clip(width=320, height=240, frames=23, fps=10, gop=5, pattern="boxes")
    b = make_clip(width=320, height=240, frames=41, fps=25, gop=12, pattern="bars")
    cam = make_clip(**CAM)

    def alone(path):
        run = DetectionRun([SourceSpec("file", str(path))], det, PipelineConfig(batch_size=8, results_on_host=True))
        return {r.index: len(r.detections) for r in run}

    ref = {0: alone(a.path), 1: alone(b.path)}
    run = DetectionRun(
        [SourceSpec("file", str(a.path)), PacedFileSource(cam.path, fps=30, max_frames=30, loop=False),
         SourceSpec("file", str(b.path))],
        det, PipelineConfig(batch_size=8, results_on_host=True),
    )
    seen: dict[int, list[int]] = {0: [], 1: [], 2: []}
    dets: dict[int, dict[int, int]] = {0: {}, 2: {}}
    for batch in run.batches():
        assert len(batch) <= 8
        for r in batch:
            seen[r.stream_id].append(r.index)
            if r.stream_id != 1:
                dets[r.stream_id][r.index] = len(r.detections)
    assert seen[0] == list(range(23)) and seen[2] == list(range(41))
    assert seen[1] == sorted(set(seen[1])) and len(seen[1]) > 0
    assert [s.status for s in run.summary().sources] == ["ok", "ok", "ok"]
    for sid, want in ((0, ref[0]), (2, ref[1])):
        total, got = sum(want.values()), sum(dets[sid].values())
        assert abs(got - total) <= max(2, 0.05 * total), (sid, got, total)
    assert run.get_stats()["stream_latency_ms"]["1"]["count"] == len(seen[1])


def test_live_stream_ends_ok_when_the_run_ends_it_and_failed_when_it_never_delivered(detector, cam):
    """A camera's normal end is the run stopping it (ok, how it ended in extra); a camera that
    never delivered a frame (a port nobody listens on: the real live reader keeps retrying) is
    failed with the reason, while the other camera runs."""
    import socket

    with socket.socket() as s:  # a free port, closed again: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dead = SourceSpec("live", f"rtsp://user:secret@127.0.0.1:{port}/cam")
    config = PipelineConfig(batch_size=8, live=LiveOptions(open_timeout=1, read_timeout=1))
    run = DetectionRun([PacedFileSource(cam.path), dead], detector, config)
    latencies_while(run, lambda per, batch: len(per.get(0, ())) >= 10, timeout=30)
    good, bad = run.summary().sources
    assert good.status == "ok" and good.frames >= 10 and "stopped by the run" in good.extra["ended"]
    assert bad.status == "failed" and "no frame received" in bad.error and "secret" not in bad.error
    assert "refused" in bad.error.lower() or "connection" in bad.error.lower(), bad.error  # the last reason
