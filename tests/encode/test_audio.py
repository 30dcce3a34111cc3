"""The source's audio in the output: AAC copied as it is, G.711 (pcm_mulaw / pcm_alaw from a MOV,
as IP cameras record) transcoded to AAC for MP4 and FLV, kept for MOV; trimmed with the video."""

from __future__ import annotations

import json
import subprocess

import av
import pytest
import torch

from _clips import decoded, with_g711
from ffmpeg_cli import require
from media import make_video
from vidpipe.encode import VideoWriter


def streams(path) -> list[dict]:
    out = subprocess.run([require("ffprobe"), "-v", "error", "-show_entries",
                          "stream=codec_type,codec_name,start_time,duration", "-of", "json", str(path)],
                         capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)["streams"]


def audio_span(path) -> tuple[float, float, int]:
    """(first pts, end of the last frame, samples) of the decoded audio, seconds."""
    with av.open(str(path)) as f:
        fr = list(f.decode(audio=0))
    first = float(fr[0].pts * fr[0].time_base)
    last = fr[-1]
    return first, float(last.pts * last.time_base) + last.samples / last.sample_rate, sum(x.samples for x in fr)


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    d = tmp_path_factory.mktemp("audio")
    aac = make_video(d / "aac.mp4", width=160, height=96, frames=40, fps=20, audio=True, bframes=0)
    plain = make_video(d / "plain.mp4", width=160, height=96, frames=40, fps=20, bframes=0)
    return {"aac": aac.path, "mulaw": with_g711(plain.path, d / "mulaw.mov"),
            "alaw": with_g711(plain.path, d / "alaw.mov", codec="pcm_alaw"), "none": plain.path}


def write(src, dst, *, skip: int = 0) -> dict:
    frames = decoded(src)[skip:]
    with VideoWriter(dst, width=160, height=96, fps=20, audio_from=str(src)) as w:
        for rgb, pts in frames:
            w.write(torch.from_numpy(rgb).permute(2, 0, 1), pts=pts)
    return w.report()


@pytest.mark.parametrize("kind, suffix, mode, codec", [
    ("aac", ".mp4", "copy", "aac"),
    ("mulaw", ".mp4", "aac", "aac"),
    ("alaw", ".flv", "aac", "aac"),
    ("mulaw", ".mov", "copy", "pcm_mulaw"),
])
def test_audio_copied_or_transcoded(sources, tmp_path, kind, suffix, mode, codec):
    out = tmp_path / f"out{suffix}"
    rep = write(sources[kind], out)
    assert rep["audio"] == mode and rep["audio_packets"] > 0
    got = {s["codec_type"]: s["codec_name"] for s in streams(out)}
    assert got == {"video": "h264", "audio": codec}
    first, end, _ = audio_span(out)
    assert first == pytest.approx(0.0, abs=0.03)  # AAC's encoder delay at 48 kHz is 21 ms
    assert end == pytest.approx(2.0, abs=0.15)  # 40 frames at 20 fps
    # every video frame keeps its time (a transcoded track's first packet once shifted all but the first)
    want = [round(t - decoded(sources[kind])[0][1], 3) for _, t in decoded(sources[kind])]
    assert [round(t, 3) for _, t in decoded(out)] == pytest.approx(want, abs=1.5e-3)


def test_trimmed_video_trims_the_audio(sources, tmp_path):
    """Frames from 1 s on: the output starts at 0 with the audio of the source's second 1 on."""
    out = tmp_path / "trim.mp4"
    rep = write(sources["aac"], out, skip=20)
    assert rep["origin_s"] == pytest.approx(1.0) and rep["audio"] == "copy"
    first, end, samples = audio_span(out)
    assert first == pytest.approx(0.0, abs=0.07) and end == pytest.approx(1.0, abs=0.1)
    assert samples == pytest.approx(16000 * 1.0, rel=0.1)  # make_video's tone: 16 kHz


def test_source_without_audio(sources, tmp_path):
    out = tmp_path / "silent.mp4"
    rep = write(sources["none"], out)
    assert rep["audio"] is None
    assert [s["codec_type"] for s in streams(out)] == ["video"]
