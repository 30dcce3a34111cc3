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
    import time

    import vidpipe

    clip = _cut(tmp_path / "street.mp4", 100, 40)  # people and bicycles riding through
    cfg = tmp_path / "serve.yaml"
    cfg.write_text(
        f"device: cpu\nbatch_size: 8\noutput: out/\n"
        f"cameras:\n  - {{name: a, url: {clip}, track: true}}\n  - {{name: b, url: {clip}}}\n"
    )  # fmt: skip
    with vidpipe.serve(cfg) as server:
        deadline = time.monotonic() + 240
        while not server.idle:
            assert time.monotonic() < deadline, "the serve run did not end"
            time.sleep(0.2)
        streams = {s["camera"]: s for s in server.status()["streams"]}
    assert "tracks" in streams["a"] and "tracks" not in streams["b"]
    assert server.summary.to_dict()["track"]["streams"]["0"]["frames"] == 40
    a = list(csv.DictReader((tmp_path / "out" / "a.detections.csv").open()))
    b = list(csv.DictReader((tmp_path / "out" / "b.detections.csv").open()))
    assert "track_id" in a[0] and "track_id" in b[0]
    ids_a = [int(r["track_id"]) for r in a if r["track_id"]]
    assert len(set(ids_a)) >= 2 and len(ids_a) >= 0.3 * len(a)
    assert max(ids_a.count(i) for i in set(ids_a)) >= 20  # a track over most of the 40 frames
    assert all(r["track_id"] == "" for r in b)  # camera b is not tracked (no top-level track)


def test_serve_cli_track_flags_override_the_file(tmp_path: Path):
    import argparse

    from vidpipe.cli import serve as serve_cli

    cfg = tmp_path / "serve.yaml"
    cfg.write_text("cameras:\n  - {name: a, url: rtsp://h/a}\n  - {name: b, url: rtsp://h/b, track: false}\n")
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    serve_cli.add_parser(sub, argparse.ArgumentParser(add_help=False))
    args = parser.parse_args(["serve", str(cfg), "--track-buffer", "3"])
    config = serve_cli._config(args)
    assert config.track == TrackConfig(track_buffer=3.0)
    assert [config.tracks(c) for c in config.cameras] == [True, False]
    assert serve_cli._config(parser.parse_args(["serve", str(cfg)])).track is None


def test_live_table_shows_tracks_when_streams_have_them():
    from vidpipe.cli._live_table import format_table

    base = {"stream_id": 0, "status": "running", "state": "live", "fps": 25.0, "frames": 10}
    lines = format_table({"streams": [dict(base, camera="a", tracks=3), dict(base, stream_id=1, camera="b")]})
    assert lines[1].split()[-1] == "tracks"
    assert lines[2].split()[-1] == "3" and lines[3].split()[-1] == "-"
    plain = format_table({"streams": [dict(base, camera="a")]})
    assert "tracks" not in plain[1]
