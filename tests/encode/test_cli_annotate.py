"""``vidpipe detect ... --annotate``, run as a user runs it (a subprocess)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from _clips import decoded
from ffmpeg_cli import count_frames
from media import make_video


def vidpipe(*args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vidpipe", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def test_detect_annotate_writes_the_drawn_video(tmp_path):
    clip = make_video(tmp_path / "clip.mp4", width=160, height=96, frames=10, fps=10, audio=True)
    p = vidpipe("detect", clip.path, "--device", "cpu", "--imgsz", "128", "--conf", "0.01", "--annotate", "out.mp4",
                "--annotate-preset", "ultrafast", "--line", "gate=0,60,160,60", "--blur", "person", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    out = tmp_path / "out.mp4"
    assert count_frames(out) == clip.frames  # the ffmpeg CLI's count
    assert "annotated: " in p.stdout and "10 frames" in p.stdout.split("annotated: ")[1]
    src, got = decoded(clip.path), decoded(out)
    assert [t for _, t in got] == [t for _, t in src]
    # the counting line (drawn across row 60) is in every frame; the source has none there
    for (a, _), (b, _) in zip(src, got):
        assert np.abs(a[58:63].astype(int) - b[58:63].astype(int)).mean() > 20
    assert (tmp_path / "clip.detections.csv").is_file()


def test_annotate_errors_name_the_flag(tmp_path):
    a = make_video(tmp_path / "a.mp4", frames=2)
    p = vidpipe("detect", a.path, a.path, "--device", "cpu", "--annotate", "one.mp4", cwd=tmp_path)
    assert p.returncode == 2 and "--annotate one.mp4: one file cannot hold 2 inputs" in p.stderr, p.stderr
    assert not (tmp_path / "one.mp4").exists()
    p = vidpipe("detect", a.path, "--device", "cpu", "--annotate-preset", "ultrafast", cwd=tmp_path)
    assert p.returncode == 2 and "--annotate-preset needs --annotate" in p.stderr, p.stderr


def test_nvenc_where_there_is_none_is_a_clear_error(tmp_path):
    a = make_video(tmp_path / "a.mp4", frames=2)
    p = vidpipe("detect", a.path, "--device", "cpu", "--annotate", "out.mp4", "--annotate-codec", "h264_nvenc",
                cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert "--annotate-codec h264_nvenc: NVENC needs a CUDA device; use libx264 or libx265" in p.stderr, p.stderr
    p = vidpipe("detect", a.path, "--annotate", "out.mp4", "--annotate-codec", "hevc_nvenc", "--annotate-preset",
                "fast", cwd=tmp_path)
    assert p.returncode == 2 and "--annotate-preset sets x264/x265 presets" in p.stderr, p.stderr
    assert not (tmp_path / "out.mp4").exists()


@pytest.mark.gpu
def test_nvenc_on_this_gpu_from_the_command_line(tmp_path):
    """A GPU without NVENC (H100, H200): exit 2 naming the GPU, before any frame is read. One
    with NVENC: the annotated video, every frame, read back by the ffmpeg CLI."""
    import torch

    from vidpipe.encode.nvenc import nvenc_unavailable

    clip = make_video(tmp_path / "clip.mp4", width=320, height=240, frames=20, fps=10)
    p = vidpipe("detect", clip.path, "--device", "cuda", "--annotate", "out.mp4", "--annotate-codec", "h264_nvenc",
                cwd=tmp_path)
    if nvenc_unavailable("cuda") is not None:
        assert p.returncode == 2, p.stderr
        assert f"{torch.cuda.get_device_name()} cannot open an NVENC session" in p.stderr, p.stderr
        assert not (tmp_path / "out.mp4").exists() and not (tmp_path / "clip.detections.csv").exists()
    else:
        assert p.returncode == 0, p.stderr
        assert count_frames(tmp_path / "out.mp4") == clip.frames
