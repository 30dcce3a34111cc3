"""probe(): stream facts from PyAV, and one clear SourceError per kind of bad input."""

from __future__ import annotations

import os
import random
from fractions import Fraction

import pytest
from media import make_audio, make_empty, make_text, make_video, truncate

from vidpipe.decode.probe import format_info, probe
from vidpipe.errors import SourceError
from vidpipe.types import ColorSpec


def test_probe_h264_mp4(make_clip):
    clip = make_clip(".mp4", frames=30, fps=25, colorspace="bt709", width=160, height=96)
    info = probe(clip.path)
    assert info.source == str(clip.path)
    assert info.codec == "h264" and info.profile
    assert (info.width, info.height) == (160, 96)
    assert info.pix_fmt == "yuv420p" and info.bit_depth == 8 and info.chroma == "420"
    assert info.fps == pytest.approx(25.0)
    assert info.frame_count == 30 and info.frame_count_exact
    assert info.duration == pytest.approx(1.2, abs=0.01)
    assert isinstance(info.time_base, Fraction)
    assert info.start_time == 0.0
    assert info.color == ColorSpec("bt709", "limited") and info.color_specified
    assert info.rotation == 0
    assert "mp4" in info.container


def test_probe_mkv_estimates_frame_count(make_clip):
    clip = make_clip(".mkv", frames=30, fps=30)
    info = probe(clip.path)
    assert info.frame_count == 30 and not info.frame_count_exact  # Matroska stores no count
    assert info.fps == pytest.approx(30.0)


@pytest.mark.parametrize(
    "kwargs,depth,chroma",
    [
        (dict(pix_fmt="yuv420p10le", colorspace="bt2020"), 10, "420"),
        (dict(pix_fmt="yuv444p"), 8, "444"),
    ],
)
def test_probe_bit_depth_and_chroma(make_clip, kwargs, depth, chroma):
    info = probe(make_clip(".mp4", frames=4, **kwargs).path)
    assert info.bit_depth == depth and info.chroma == chroma


def test_probe_full_range_and_untagged(make_clip):
    full = probe(make_clip(".mp4", frames=4, color_range="full", colorspace="bt601").path)
    assert full.color == ColorSpec("bt601", "full")
    small = probe(make_clip(".mp4", frames=4, tag_color=False, width=160, height=96).path)
    assert small.color == ColorSpec("bt601", "limited") and not small.color_specified
    big = probe(make_clip(".mp4", frames=2, tag_color=False, width=1280, height=720).path)
    assert big.color == ColorSpec("bt709", "limited") and not big.color_specified


def test_probe_mjpeg_is_full_range(make_clip):
    info = probe(make_clip(".avi", codec="mjpeg", frames=3, color_range="full").path)
    assert info.codec == "mjpeg" and info.color.range == "full"


def test_format_info_lines(make_clip):
    info = probe(make_clip(".mp4", frames=30, fps=25, colorspace="bt709", width=160, height=96).path)
    text = format_info(info)
    assert "h264" in text and "160x96" in text and "25.000" in text
    assert "frames     30" in text and "bt709 limited" in text and "(tagged)" in text


def test_probe_rotation(make_clip):
    clip = make_clip(".mp4", frames=3, gop=3, rotation=90)
    info = probe(clip.path)
    assert (info.width, info.height) == (160, 96)  # coded size; rotation is display metadata
    # PyAV 19 exposes the stream's display matrix; on PyAV 18 probe reads the first frame's
    assert info.rotation == 90 and info.extra["rotation_known"]
    assert probe(make_clip(".mp4", frames=3, gop=3).path).rotation == 0


def test_probe_with_audio(make_clip):
    info = probe(make_clip(".mp4", frames=20, gop=10, audio=True).path)
    assert info.codec == "h264" and info.frame_count == 20 and info.stream_index == 0
    assert info.extra["audio_streams"] == 1
    assert "1 audio" in format_info(info)


def test_missing_path(tmp_path):
    path = tmp_path / "nope.mp4"
    with pytest.raises(SourceError, match=r"^no such file: .*nope\.mp4$"):
        probe(path)


def test_directory(tmp_path):
    with pytest.raises(SourceError, match="is a folder"):
        probe(tmp_path)


def test_zero_bytes(tmp_path):
    path = make_empty(tmp_path / "empty.mp4")
    with pytest.raises(SourceError, match=r"empty\.mp4 is empty \(0 bytes\)"):
        probe(path)


def test_text_named_mp4(tmp_path):
    path = make_text(tmp_path / "notes.mp4")
    with pytest.raises(SourceError) as err:
        probe(path)
    msg = str(err.value)
    assert msg.startswith(f"{path} is not a video PyAV can read (")
    assert "convert it with ffmpeg" in msg
    assert isinstance(err.value, OSError)  # SourceError is also an OSError


@pytest.mark.parametrize("seed", range(8))
def test_random_bytes(tmp_path, seed):
    # seeded: FFmpeg's probing reads some noise as a (subtitle) stream, so the message depends on
    # the bytes; either way it is one clear SourceError
    path = tmp_path / "noise.mkv"
    path.write_bytes(random.Random(seed).randbytes(4096))
    with pytest.raises(SourceError, match="is not a video PyAV can read|has no video stream"):
        probe(path)


@pytest.mark.parametrize("suffix,codec", [(".m4a", "aac"), (".wav", "pcm_s16le")])
def test_audio_only(tmp_path, suffix, codec):
    path = make_audio(tmp_path / f"song{suffix}")
    with pytest.raises(SourceError, match=rf"song\{suffix} has no video stream \(streams: audio {codec}\)"):
        probe(path)


def test_truncated_mp4_without_index(tmp_path):
    clip = make_video(tmp_path / "rec.mp4", frames=20)
    cut = truncate(clip.path, 0.5, dst=tmp_path / "cut.mp4")
    with pytest.raises(SourceError, match=r"cut\.mp4 is not a video PyAV can read .*moov atom"):
        probe(cut)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable(tmp_path, make_clip):
    path = tmp_path / "locked.mp4"
    path.write_bytes(make_clip(".mp4", frames=3).path.read_bytes())
    path.chmod(0)
    try:
        with pytest.raises(SourceError, match="permission denied"):
            probe(path)
    finally:
        path.chmod(0o644)
