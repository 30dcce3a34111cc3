"""``track`` in ``vidpipe serve``: the config keys (top level and per camera), their errors, and a
serve run whose table gets ``track_id`` for the tracked camera only."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from vidpipe.errors import ConfigError
from vidpipe.serve import load_config, parse_config
from vidpipe.track import TrackConfig


def test_track_keys_load():
    cfg = parse_config("track: {track_buffer: 2.5}\ncameras:\n  - {name: a, url: rtsp://h/a}\n"
                       "  - {name: b, url: rtsp://h/b, track: false}\n")  # fmt: skip
    assert cfg.track == TrackConfig(track_buffer=2.5)
    assert [cfg.tracks(c) for c in cfg.cameras] == [True, False] and cfg.tracking
    cfg = parse_config("cameras:\n  - {name: a, url: rtsp://h/a, track: true}\n  - {name: b, url: rtsp://h/b}\n")
    assert cfg.track is None and [cfg.tracks(c) for c in cfg.cameras] == [True, False] and cfg.tracking
    assert not parse_config("cameras:\n  - {name: a, url: rtsp://h/a}\n").tracking
    assert parse_config("track: true\ncameras:\n  - {name: a, url: rtsp://h/a}\n").track == TrackConfig()


@pytest.mark.parametrize("text, words", [
    ("track: 3\n", "serve.yaml:1: track: expected true, false or tracker options"),
    ("track: {buffer: 2}\n", "serve.yaml:1: track: invalid track: unknown option 'buffer'"),
    ("track: {track_buffer: -1}\n", "track_buffer"),
    ("cameras:\n  - {name: a, url: rtsp://h/a, track: maybe}\n", "serve.yaml:2: cameras[0].track: expected true or false"),
])  # fmt: skip
def test_track_key_errors_name_the_line(tmp_path: Path, text: str, words: str):
    if not text.startswith("cameras"):
        text += "cameras:\n  - {name: a, url: rtsp://h/a}\n"
    p = tmp_path / "serve.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(p)
    assert words in str(info.value)


def _cut(dst: Path, start: int, frames: int) -> Path:
    """Frames ``start`` .. ``start + frames - 1`` of the bundled bikes.mp4, re-encoded (H.264)."""
    import av

    from vidpipe.data import sample_video

    with av.open(str(sample_video())) as src, av.open(str(dst), "w") as out:
        vin = src.streams.video[0]
        vout = out.add_stream("libx264", rate=25)
        vout.width, vout.height, vout.pix_fmt = vin.width, vin.height, "yuv420p"
        vout.options = {"g": "10", "bf": "0", "crf": "20", "preset": "veryfast"}
        for i, frame in enumerate(src.decode(vin)):
            if i >= start + frames:
                break
            if i >= start:
                frame.pts = None
                out.mux(vout.encode(frame.reformat(format="yuv420p")))
        out.mux(vout.encode(None))
    return dst


def test_serve_tracks_the_tracked_camera(tmp_path: Path):
    clip = _cut(tmp_path / "street.mp4", 100, 40)  # people and bicycles riding through
    cfg = tmp_path / "serve.yaml"
    cfg.write_text(
        f"device: cpu\nbatch_size: 8\noutput: out/\n"
        f"cameras:\n  - {{name: a, url: {clip}, track: true}}\n  - {{name: b, url: {clip}}}\n"
    )  # fmt: skip
    p = subprocess.run([sys.executable, "-m", "vidpipe", "serve", str(cfg), "--table", "off", "-q"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)  # fmt: skip
    assert p.returncode == 0, p.stderr
    a = list(csv.DictReader((tmp_path / "out" / "a.detections.csv").open()))
    b = list(csv.DictReader((tmp_path / "out" / "b.detections.csv").open()))
    assert "track_id" in a[0] and "track_id" in b[0]
    ids_a = [int(r["track_id"]) for r in a if r["track_id"]]
    assert len(set(ids_a)) >= 2 and len(ids_a) >= 0.3 * len(a)
    assert max(ids_a.count(i) for i in set(ids_a)) >= 20  # a track over most of the 40 frames
    assert all(r["track_id"] == "" for r in b)  # camera b is not tracked (no top-level track)
