"""``bench decode`` on the CPU: rows, reports and target checks (timings are never asserted)."""

from __future__ import annotations

import json

import av
import pytest

from vidpipe.bench.decode import PEERS, run_decode_bench, targets
from vidpipe.bench.generate import VIDEO_PRESETS, generate_video, parse_presets
from vidpipe.errors import ConfigError


def test_runs_the_cpu_peers_and_explains_the_others(make_clip, tmp_path):
    clip = make_clip(".mp4", frames=48, gop=12, width=160, height=96)
    result = run_decode_bench(
        str(clip.path), device="cpu", batch_size=16, peers=("pyav", "pyav-parallel", "nvdec", "nvdec-ceiling")
    )
    by = {r["peer"]: r for r in result.rows}
    assert by["pyav"]["frames"] == by["pyav-parallel"]["frames"] == 48
    assert by["pyav"]["fps"] > 0 and by["pyav"]["cpu_percent"] > 0
    assert by["nvdec"]["fps"] is None and "CUDA" in by["nvdec"]["note"]  # why it did not run
    files = result.write(tmp_path)
    assert {k: p.exists() for k, p in files.items()} == {"markdown": True, "json": True, "png": True}
    data = json.loads(files["json"].read_text())
    assert [r["peer"] for r in data["rows"]] == ["pyav", "pyav-parallel", "nvdec", "nvdec-ceiling"]
    assert "| pyav " in files["markdown"].read_text()


def test_unknown_peer_and_preset_are_rejected(make_clip):
    clip = make_clip(".mp4", frames=6, gop=3)
    with pytest.raises(ValueError, match="unknown peer"):
        run_decode_bench(str(clip.path), device="cpu", peers=("ffmpeg-cli",))
    with pytest.raises(ConfigError, match="1080p-h264"):
        parse_presets("1080p-vp8")
    assert set(PEERS) >= {"pyav", "opencv", "nvdec-1", "nvdec", "nvdec-ceiling", "dali"}


def test_generated_clip(tmp_path):
    path = generate_video("1080p-h264", tmp_path, frames=4, gop=2)
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        assert (s.codec_context.name, s.width, s.height, s.frames) == ("h264", 1920, 1080, 4)
        assert sum(1 for p in c.demux(s) if p.is_keyframe) == 2
    assert generate_video("1080p-h264", tmp_path, frames=4, gop=2) == path  # cached
    assert VIDEO_PRESETS["2160p-hevc"].width == 3840


def test_targets():
    rows = [
        {"peer": "pyav", "fps": 1000.0},
        {"peer": "nvdec", "fps": 3300.0, "cores_per_kfps": 0.6},
        {"peer": "nvdec-ceiling", "fps": 3800.0},
    ]
    t = targets(rows)
    assert t["target_0.85x_ceiling"] and t["target_2x_pyav"] and t["target_1_core_per_kfps"]
    assert t["nvdec_over_ceiling"] == pytest.approx(3300 / 3800, abs=1e-3)
    rows[1]["fps"] = 1500.0
    assert not targets(rows)["target_0.85x_ceiling"]
    assert targets([{"peer": "pyav", "fps": 10.0}]) == {}


def test_long_clips_repeat_the_encoded_packets(tmp_path, monkeypatch):
    from vidpipe.bench.generate import VideoPreset
    from vidpipe.decode.segments import scan_stream

    monkeypatch.setitem(VIDEO_PRESETS, "tiny", VideoPreset(64, 48, "h264", 50, encode=20))
    path = generate_video("tiny", tmp_path, gop=10)
    index = scan_stream(path)
    assert index.packets == 50 and index.error is None
    assert len(index.keyframes) == 5
    assert sorted(index.pts) == [i * (index.pts[1] - index.pts[0]) for i in range(50)]  # continuous timestamps
    with av.open(str(path)) as c:
        assert sum(1 for _ in c.decode(video=0)) == 50
