"""``vidpipe follow`` end to end: a file in, an MP4 out (read back with PyAV); the broadcaster's
pipeline at low resolution against the real servers (RTSP camera in, RTMP out, the output read
by the ffmpeg tool); per-stage timings printed; clear errors."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from walk_clip import make_walk_clip

SRC = Path(__file__).resolve().parents[2] / "src"
TIMINGS = re.compile(r"ms per frame: decode ([\d.]+), inference ([\d.]+), tracking ([\d.]+), camera ([\d.]+), "
                     r"encode ([\d.]+)")  # fmt: skip


def _vidpipe(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "vidpipe", *args], capture_output=True, text=True, timeout=timeout,
                          env=env)  # fmt: skip


@pytest.fixture(scope="module")
def walk(tmp_path_factory) -> Path:
    return make_walk_clip(tmp_path_factory.mktemp("follow_cli") / "walk.mp4", frames=20, size=(640, 360))


def test_follow_a_file_to_mp4(walk, tmp_path):
    import av

    out = tmp_path / "follow.mp4"
    proc = _vidpipe("follow", str(walk), "--target", "person", "--size", "320x180", "--margin", "1.8",
                    "--device", "cpu", "--batch-size", "4", "--stats-every", "0.001", "-o", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"follow: \d+ frames; ms per frame: decode [\d.]+, inference [\d.]+, tracking [\d.]+, camera "
                     r"[\d.]+, encode", proc.stderr), proc.stderr  # the periodic log line
    m = TIMINGS.search(proc.stdout)
    assert m, proc.stdout
    assert all(float(v) > 0 for v in m.groups()), proc.stdout
    assert re.search(r"20 frames at 320x180 .*target detected in (19|20) frames, inside the window in 100.0 %",
                     proc.stdout), proc.stdout  # fmt: skip
    with av.open(str(out)) as c:
        frames = list(c.decode(video=0))
    assert len(frames) == 20 and (frames[0].width, frames[0].height) == (320, 180)
    times = [float(f.pts * f.time_base) for f in frames]
    assert times == pytest.approx([i / 10 for i in range(20)], abs=2e-3)  # the source's 10 fps timestamps


def test_bad_target_and_size_are_one_line_errors(walk, tmp_path):
    proc = _vidpipe("follow", str(walk), "--target", "persn", "--device", "cpu", "-o", str(tmp_path / "x.mp4"))
    assert proc.returncode == 2 and "--target" in proc.stderr and "person" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    proc = _vidpipe("follow", str(walk), "--size", "1281x720", "-o", str(tmp_path / "x.mp4"))
    assert proc.returncode == 2 and "--size" in proc.stderr and "even" in proc.stderr, proc.stderr


def test_broadcaster_pipeline_rtsp_in_rtmp_out(live_servers, tmp_path):
    """Camera RTSP in -> decode -> detect -> track -> follow-cam -> encode -> RTMP out, at 640x360
    in and 320x180 out on the CPU; a player waiting on the RTMP server receives every frame sent."""
    import av

    clip = make_walk_clip(tmp_path / "cam.mp4", frames=40, size=(640, 360), fps=10, gop=10)
    rtsp = live_servers.rtsp(streams=0, files={"walk": clip})
    rtmp = live_servers.rtmp()
    url = rtmp.url("follow")
    got: list[tuple[int, int]] = []
    errors: list[BaseException] = []

    def play() -> None:  # waits for the stream before it is published; a short probe (the stream is short)
        try:
            with av.open(url, timeout=(60, 3), options={"analyzeduration": "300000", "probesize": "4096"}) as f:
                got.extend((fr.width, fr.height) for fr in f.decode(video=0))
        except (OSError, av.error.FFmpegError) as exc:  # a live stream ends in an I/O error or the read timeout
            errors.append(exc)

    player = threading.Thread(target=play, daemon=True)
    player.start()
    proc = _vidpipe("follow", rtsp.url("walk"), "--target", "person", "--size", "320x180", "--margin", "1.8",
                    "--device", "cpu", "--batch-size", "4", "--max-frames", "25", "--fps", "10", "-o", url,
                    timeout=90)  # fmt: skip
    player.join(timeout=20)
    assert proc.returncode == 0, proc.stderr
    assert not player.is_alive(), "the player did not see the stream end"
    m = TIMINGS.search(proc.stdout)
    assert m and all(float(v) > 0 for v in m.groups()), proc.stdout
    assert re.search(r"latency capture->result ms: p50 [\d.]+, p99 [\d.]+", proc.stdout), proc.stdout
    sent = re.search(r"(\d+) frames at 320x180 to rtmp://", proc.stdout)
    assert sent, proc.stdout
    # a live input drops the oldest frames when the CPU falls behind (this shared 2-core machine):
    # what was sent is what arrived
    assert 3 <= int(sent.group(1)) <= 25, proc.stdout
    assert got == [(320, 180)] * int(sent.group(1)), (len(got), errors, proc.stdout)


def test_bench_follow_command(tmp_path):
    out = tmp_path / "bench.json"
    proc = _vidpipe("bench", "follow", "--scenes", "still,turn", "--seeds", "1", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "| turn | planner |" in proc.stdout and "| turn | none |" in proc.stdout and out.exists()
    proc = _vidpipe("bench", "follow", "--scenes", "nope")
    assert proc.returncode == 2 and "--scenes nope" in proc.stderr, proc.stderr


@pytest.mark.gpu
def test_follow_a_file_on_cuda(walk, tmp_path):
    """The whole command on the GPU: NVDEC/PyAV decode, detection, render and the writer's
    device-side colour conversion; same frames out as on the CPU."""
    import av

    out = tmp_path / "follow_cuda.mp4"
    proc = _vidpipe("follow", str(walk), "--target", "person", "--size", "320x180", "--margin", "1.8",
                    "--device", "cuda", "-o", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    m = TIMINGS.search(proc.stdout)
    assert m and all(float(v) > 0 for v in m.groups()), proc.stdout
    assert re.search(r"target detected in (19|20) frames, inside the window in 100.0 %", proc.stdout), proc.stdout
    with av.open(str(out)) as c:
        frames = list(c.decode(video=0))
    assert len(frames) == 20 and (frames[0].width, frames[0].height) == (320, 180)


@pytest.mark.live
def test_bench_follow_pipeline_smoke():
    """``vidpipe bench follow --pipeline``'s loop (RTMP camera in, RTMP out) runs and reports."""
    from live.need import require
    from live.servers import nginx_missing_reason
    from vidpipe.bench.follow_live import format_pipeline, run_pipeline_bench

    require(nginx_missing_reason())
    r = run_pipeline_bench(seconds=1.0, warmup=0.5, device="cpu", in_size=(320, 180), out_size=(160, 90), fps=10)
    assert r["frames_out"] > 0 and r["received_by_player"] > 0 and r["out_size"] == [160, 90]
    assert set(r["ms_per_frame"]) == {"decode", "inference", "tracking", "camera", "encode"}
    assert all(v is not None and v > 0 for v in r["ms_per_frame"].values()), r["ms_per_frame"]
    text = format_pipeline(r)
    assert "broadcaster pipeline: 320x180@10 RTMP camera" in text and "real time:" in text
