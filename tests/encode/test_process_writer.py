"""``ProcessVideoWriter``: the same files as ``VideoWriter``, encoded in a child process; its
failures are clear and the child never outlives it."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest
import torch

from _clips import decoded, psnr
from test_writer import _chw, ffprobe, frame_times
from media import make_video
from vidpipe.encode.process import ProcessVideoWriter
from vidpipe.errors import ConfigError, SinkError


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    return make_video(tmp_path_factory.mktemp("penc") / "in.mp4", width=320, height=240, frames=20, fps=25,
                      bframes=0, crf=12)


def test_frames_pts_size_and_pixels_as_ffprobe_sees_them(clip, tmp_path, device):
    frames = decoded(clip.path)
    out = tmp_path / "out.mp4"
    with ProcessVideoWriter(out, width=320, height=240, fps=25, options={"crf": "18"}) as w:
        w.wait_ready()
        for rgb, pts in frames:
            w.write(_chw(rgb, device), pts=pts)
    rep = w.report()
    assert rep["process"] is True and rep["frames"] == len(frames) == rep["frames_sent"]
    s = ffprobe(out, "stream=width,height,codec_name,nb_read_frames,color_space,color_range", count=True)["streams"][0]
    assert (s["codec_name"], s["width"], s["height"], int(s["nb_read_frames"])) == ("h264", 320, 240, len(frames))
    assert (s["color_space"], s["color_range"]) == ("smpte170m", "tv")
    assert frame_times(out) == pytest.approx([p for _, p in frames], abs=1e-3)
    got = decoded(out)
    worst = min(psnr(a, b) for (a, _), (b, _) in zip(frames, got))
    assert worst >= 35, f"PSNR {worst:.1f} dB"


def test_a_target_that_cannot_be_opened_is_a_sink_error_naming_it(tmp_path):
    with pytest.raises(SinkError, match="does not exist"):
        ProcessVideoWriter(tmp_path / "no" / "such" / "out.mp4", width=64, height=64, fps=30).wait_ready()
    with pytest.raises(ConfigError, match="codec='nope'"):
        ProcessVideoWriter(tmp_path / "x.mp4", width=64, height=64, fps=30, codec="nope")


def test_a_killed_encoder_process_fails_write_not_hangs_and_the_file_keeps_what_was_encoded(tmp_path):
    out = tmp_path / "out.mp4"
    w = ProcessVideoWriter(out, width=160, height=128, fps=30, queue_frames=2)
    w.wait_ready()
    img = torch.zeros(3, 128, 160, dtype=torch.uint8)
    for k in range(120):  # well past x264's look-ahead and frame threads: packets are muxed
        img[1] = k * 2
        w.write(img, pts=k / 30)
    time.sleep(1.0)
    os.kill(w._proc.pid, signal.SIGKILL)
    t0 = time.monotonic()
    with pytest.raises(SinkError, match="encoder process"):
        for k in range(120, 900):
            w.write(img, pts=k / 30)
    assert time.monotonic() - t0 < 10
    w.close()  # the failure was raised once already (as VideoWriter does); close() collects the child
    assert w._proc.returncode is not None
    n = int(ffprobe(out, "stream=nb_read_frames", count=True)["streams"][0]["nb_read_frames"])
    assert n > 0  # fragmented MP4: what was muxed before the kill plays


def test_the_child_ends_when_the_writer_is_dropped_without_close(tmp_path):
    w = ProcessVideoWriter(tmp_path / "out.mp4", width=64, height=64, fps=30)
    w.wait_ready()
    w.write(torch.zeros(3, 64, 64, dtype=torch.uint8), pts=0.0)
    deadline = time.monotonic() + 10
    while w.frames_sent < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    proc = w._proc
    os.close(proc.stdin.fileno())  # what this process's death does to the pipe
    assert proc.wait(timeout=20) == 0  # the child finished the file with what arrived
    s = ffprobe(tmp_path / "out.mp4", "stream=nb_read_frames", count=True)["streams"][0]
    assert int(s["nb_read_frames"]) == 1


@pytest.mark.gpu
@pytest.mark.parametrize("writer", ["thread", "process"])
def test_cuda_frames_reuse_the_pinned_buffers_and_come_back_intact(clip, tmp_path, writer):
    """Many more CUDA frames than pinned buffers (queue_frames=2: 4 buffers), read back with PyAV."""
    from vidpipe.encode import VideoWriter

    cls = ProcessVideoWriter if writer == "process" else VideoWriter
    frames = decoded(clip.path) * 3  # 60 frames through 4 buffers
    out = tmp_path / "out.mp4"
    with cls(out, width=320, height=240, fps=25, queue_frames=2, options={"crf": "18"}) as w:
        for k, (rgb, _) in enumerate(frames):
            w.write(_chw(rgb, "cuda"), pts=k / 25)
    assert w.report()["frames"] == len(frames)
    got = decoded(out)
    assert len(got) == len(frames)
    worst = min(psnr(a, b) for (a, _), (b, _) in zip(frames, got))
    assert worst >= 35, f"PSNR {worst:.1f} dB"


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("writer", ["thread", "process"])
def test_frames_already_in_yuv420_come_back_intact(clip, tmp_path, writer, device):
    """``write_yuv420``: the frames of one batched conversion (``(N, 3, H, W)``), each written as a
    tensor view, read back with PyAV; a wrong shape is a ValueError."""
    from vidpipe.encode import VideoWriter, rgb_to_yuv420

    cls = ProcessVideoWriter if writer == "process" else VideoWriter
    frames = decoded(clip.path)
    planes = rgb_to_yuv420(torch.stack([_chw(rgb, device) for rgb, _ in frames]), matrix="bt601")
    out = tmp_path / "out.mp4"
    with cls(out, width=320, height=240, fps=25, queue_frames=2, options={"crf": "18"}) as w:
        assert w.matrix == "bt601"
        with pytest.raises(ValueError, match=r"write_yuv420\(\) takes a \(360, 320\) uint8"):
            w.write_yuv420(planes[0, :-2], pts=0.0)
        for k, p in enumerate(planes.unbind(0)):
            w.write_yuv420(p, pts=k / 25)
        planes.zero_()  # the writer copied them (CPU) or queued the copy first (CUDA, same stream)
    got = decoded(out)
    assert len(got) == len(frames)
    worst = min(psnr(a, b) for (a, _), (b, _) in zip(frames, got))
    assert worst >= 35, f"PSNR {worst:.1f} dB"


def test_the_encoder_process_runs_at_the_niceness_asked(tmp_path):
    """``nice``: the child lowers its own priority (read back from /proc), so its encoding yields
    the CPU to decoding and detection; out-of-range values are refused."""
    with pytest.raises(ConfigError, match="nice=20"):
        ProcessVideoWriter(tmp_path / "x.mp4", width=64, height=64, fps=30, nice=20)
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    w = ProcessVideoWriter(tmp_path / "out.mp4", width=64, height=64, fps=30, nice=7)
    try:
        w.wait_ready()  # the child lowers its priority before it opens the target
        assert os.getpriority(os.PRIO_PROCESS, w._proc.pid) == min(19, mine + 7)
        w.write(torch.zeros(3, 64, 64, dtype=torch.uint8), pts=0.0)
    finally:
        w.close()
    assert int(ffprobe(tmp_path / "out.mp4", "stream=nb_read_frames", count=True)["streams"][0]["nb_read_frames"]) == 1
