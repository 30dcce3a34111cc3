"""VideoWriter to files, checked with someone else's tools: the ffprobe CLI (frames, timestamps,
size, colour tags) and PyAV/FFmpeg's decoder (pixels, PSNR against the frames written)."""

from __future__ import annotations

import json
import subprocess
from fractions import Fraction

import numpy as np
import pytest
import torch

from _clips import decoded, psnr
from ffmpeg_cli import require
from media import make_video
from vidpipe.encode import VideoWriter
from vidpipe.errors import ConfigError, SinkError


def ffprobe(path, *entries: str, count: bool = False) -> dict:
    out = subprocess.run(
        [require("ffprobe"), "-v", "error", *(["-count_frames"] if count else []), "-select_streams", "v:0",
         "-show_entries", ":".join(entries), "-of", "json", str(path)],
        capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


def frame_times(path) -> list[float]:
    return [float(f["pts_time"]) for f in ffprobe(path, "frame=pts_time")["frames"]]


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    """320x240, 25 fps, 20 frames: the moving-boxes pattern."""
    return make_video(tmp_path_factory.mktemp("enc") / "in.mp4", width=320, height=240, frames=20, fps=25,
                      bframes=0, crf=12)


def _chw(a: np.ndarray, device: str = "cpu") -> torch.Tensor:
    return torch.from_numpy(a).permute(2, 0, 1).to(device)


@pytest.mark.parametrize("suffix", [".mp4", ".mkv"])
def test_file_frames_pts_size_and_pixels(clip, tmp_path, device, suffix):
    frames = decoded(clip.path)
    out = tmp_path / f"out{suffix}"
    with VideoWriter(out, width=320, height=240, fps=25, options={"crf": "18"}) as w:
        for rgb, pts in frames:
            w.write(_chw(rgb, device), pts=pts)
    rep = w.report()
    assert rep["frames"] == len(frames) and rep["blocked_ms"] >= 0
    assert rep["device_yuv"] == (len(frames) if device == "cuda" else 0)
    info = ffprobe(out, "stream=width,height,codec_name,nb_read_frames,color_space,color_range", count=True)
    s = info["streams"][0]
    assert (s["codec_name"], s["width"], s["height"]) == ("h264", 320, 240)
    assert (s["color_space"], s["color_range"]) == ("smpte170m", "tv")  # BT.601 below 720 rows
    assert int(s["nb_read_frames"]) == len(frames)
    times = frame_times(out)
    assert times == pytest.approx([p for _, p in frames], abs=1.5e-3)  # Matroska keeps milliseconds
    got = decoded(out)
    assert len(got) == len(frames)
    worst = min(psnr(a, b) for (a, _), (b, _) in zip(frames, got))
    assert worst >= 35, f"PSNR {worst:.1f} dB"


def test_vfr_duplicates_and_trim_keep_spacing(tmp_path):
    """Variable spacing kept exactly (1/90000 s ticks), a duplicate pts nudged by one tick, the
    output starting at 0 at the first frame written."""
    pts = [10.0, 10.033, 10.1, 10.1, 10.25, 10.26, 10.5]
    out = tmp_path / "vfr.mp4"
    img = torch.full((3, 48, 64), 128, dtype=torch.uint8)
    with VideoWriter(out, width=64, height=48, fps=30) as w:
        for p in pts:
            w.write(img, pts=p)
    rep = w.report()
    assert rep["pts_nudged"] == 1 and rep["origin_s"] == 10.0
    want = [p - 10.0 for p in pts]
    want[3] = want[2] + 1 / 90000
    assert frame_times(out) == pytest.approx(want, abs=2e-5)


def test_no_pts_counts_frames_at_fps(tmp_path):
    out = tmp_path / "cfr.mov"
    img = torch.zeros((3, 32, 32), dtype=torch.uint8)
    with VideoWriter(out, width=32, height=32, fps=Fraction(30000, 1001)) as w:
        for _ in range(5):
            w.write(img)
    assert frame_times(out) == pytest.approx([i * 1001 / 30000 for i in range(5)], abs=2e-5)


def test_hevc_and_odd_size_padded(tmp_path):
    # (libx265 of PyAV 18.1 corrupts the heap on some frames under 64x64, e.g. 48x36: sizes here
    # stay above that)
    out = tmp_path / "odd.mkv"
    rgb = np.empty((71, 127, 3), dtype=np.uint8)
    rgb[:] = (40, 160, 90)  # flat: an exact check
    with VideoWriter(out, width=127, height=71, fps=10, codec="libx265") as w:
        for _ in range(3):
            w.write(_chw(rgb))
    s = ffprobe(out, "stream=codec_name,width,height")["streams"][0]
    assert (s["codec_name"], s["width"], s["height"]) == ("hevc", 128, 72)
    got = decoded(out)
    assert len(got) == 3 and np.abs(got[0][0][:71, :127].astype(int) - rgb).max() <= 3


def test_hd_is_tagged_bt709(tmp_path):
    out = tmp_path / "hd.mp4"
    with VideoWriter(out, width=1280, height=720, fps=25, options={"preset": "ultrafast"}) as w:
        w.write(torch.zeros((3, 720, 1280), dtype=torch.uint8))
    s = ffprobe(out, "stream=color_space,color_primaries,color_transfer,color_range")["streams"][0]
    assert (s["color_space"], s["color_primaries"], s["color_transfer"], s["color_range"]) == (
        "bt709", "bt709", "bt709", "tv")


def test_bad_arguments_are_clear(tmp_path):
    with pytest.raises(ConfigError, match="codec="):
        VideoWriter(tmp_path / "a.mp4", width=32, height=32, fps=25, codec="nope264")
    with pytest.raises(ConfigError, match="extension"):
        VideoWriter(tmp_path / "a.xyz", width=32, height=32, fps=25)
    with pytest.raises(ConfigError, match="64x64"):
        VideoWriter(tmp_path / "a.mkv", width=48, height=36, fps=25, codec="libx265")
    with pytest.raises(ConfigError, match="fps"):
        VideoWriter(tmp_path / "a.mp4", width=32, height=32, fps=0)
    with pytest.raises(SinkError, match="does not exist"):
        VideoWriter(tmp_path / "missing" / "a.mp4", width=32, height=32, fps=25)
    with pytest.raises(ConfigError, match="RTMP"):
        VideoWriter("rtmp://127.0.0.1:1/live/x", width=64, height=64, fps=25, codec="libx265")
    with VideoWriter(tmp_path / "a.mp4", width=32, height=32, fps=25) as w:
        with pytest.raises(ValueError, match=r"\(3, 32, 32\) uint8"):
            w.write(torch.zeros((3, 16, 16), dtype=torch.uint8))
        with pytest.raises(ValueError, match="pts"):
            w.write(torch.zeros((3, 32, 32), dtype=torch.uint8), pts=float("nan"))
    w.close()  # idempotent
    with pytest.raises(SinkError, match="after close"):
        w.write(torch.zeros((3, 32, 32), dtype=torch.uint8))


def test_write_blocks_only_on_a_full_queue(tmp_path):
    """The caller returns at once while the queue has room; a full queue makes write() wait (counted)."""
    img = torch.zeros((3, 64, 64), dtype=torch.uint8)
    with VideoWriter(tmp_path / "q.mp4", width=64, height=64, fps=25, queue_frames=64) as w:
        for _ in range(10):
            w.write(img)
        assert w.blocked_writes == 0
    assert w.report()["frames"] == 10
