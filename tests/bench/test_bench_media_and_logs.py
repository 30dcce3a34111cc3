"""Benches leave nothing behind unasked, keep media only in a named cache folder, and log one
readable line per peer (never a raw dict or ``None fps``)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vidpipe.bench.generate import VIDEO_PRESETS, VideoPreset
from vidpipe.bench.report import describe_row
from vidpipe.bench.workdir import folder_bytes, media_folder


def _vidpipe(*args, env=None, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vidpipe", *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)  # fmt: skip


def test_media_folder_is_temporary_unless_named(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    with media_folder() as work:
        (work / "clip.mp4").write_bytes(b"x" * 1000)
        assert work.parent == tmp_path / "tmp"
    assert list((tmp_path / "tmp").iterdir()) == []  # removed
    with pytest.raises(RuntimeError), media_folder() as work:  # removed on an error too
        (work / "clip.mp4").write_bytes(b"x")
        raise RuntimeError("interrupted")
    assert list((tmp_path / "tmp").iterdir()) == []
    cache = tmp_path / "cache"
    with media_folder(cache) as work:
        (work / "clip.mp4").write_bytes(b"x" * 1000)
    assert work == cache and folder_bytes(cache) == 1000  # kept
    with media_folder(needed=False) as work:
        assert work is None


def test_decode_bench_removes_its_generated_clip(tmp_path, monkeypatch):
    import tempfile

    from vidpipe.bench.decode import run_decode_bench

    monkeypatch.setitem(VIDEO_PRESETS, "tiny", VideoPreset(64, 48, "h264", 12))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    result = run_decode_bench(generate="tiny", device="cpu", peers=("pyav",))
    assert result.rows[0]["frames"] == 12
    assert list(tmp_path.iterdir()) == []
    cache = tmp_path / "cache"
    run_decode_bench(generate="tiny", device="cpu", peers=("pyav",), work_dir=cache)
    (clip,) = cache.iterdir()
    assert clip.suffix == ".mp4" and clip.stat().st_size > 0


def test_describe_row():
    row = {"input": "a.mp4", "peer": "opencv", "fps": None, "note": "needs a CUDA device"}
    assert describe_row(row, name="a.mp4 opencv") == "a.mp4 opencv: skipped: needs a CUDA device"
    row = {"fps": None, "note": "failed: RuntimeError: boom"}
    assert describe_row(row, name="x") == "x: failed: RuntimeError: boom"
    row = {"fps": 1234.56, "frames": 250, "wall_s": 0.2025, "cpu_percent": 181.4, "note": "decoder pyav"}
    assert describe_row(row, name="b pyav") == "b pyav: 1,235 frames/s (250 frames in 0.20 s; CPU 181%; decoder pyav)"
    row = {"img_per_s": 88.0, "images": 64, "wall_s": 0.73, "cpu_percent": None, "note": ""}
    assert describe_row(row, name="PIL", value="img_per_s", unit="images/s", count="images") == (
        "PIL: 88 images/s (64 images in 0.73 s)"
    )


def test_bench_logs_read_as_sentences(make_clip, caplog):
    from vidpipe.bench.decode import run_decode_bench

    clip = make_clip(".mp4", frames=12, gop=6, width=160, height=96)
    with caplog.at_level(logging.INFO, logger="vidpipe.bench"):
        run_decode_bench(str(clip.path), device="cpu", peers=("pyav", "nvdec"))
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("vidpipe.bench")]
    assert any(" pyav: " in m and "frames/s (12 frames in" in m for m in lines), lines
    assert any(" nvdec: skipped: " in m for m in lines), lines
    assert not any("None" in m or "{" in m for m in lines), lines


def test_cli_bench_cleans_up_or_keeps_a_named_cache(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    out = tmp_path / "out"
    p = _vidpipe("bench", "decode", "--generate", "720p-h264", "--frames", "3", "--device", "cpu", "--out", out,
                 env=env, cwd=tmp_path)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "| 720p-h264 | pyav " in p.stdout and (out / "bench_decode.json").exists()
    assert list(tmp.iterdir()) == [], "generated media left behind in the temp folder"
    assert "removed" in p.stderr and "generated media" in p.stderr
    cache = tmp_path / "cache"
    p = _vidpipe("bench", "decode", "--generate", "720p-h264", "--frames", "3", "--device", "cpu", "--out", out,
                 "--cache-dir", cache, env=env, cwd=tmp_path)  # fmt: skip
    assert p.returncode == 0, p.stderr
    (clip,) = cache.iterdir()
    mb = clip.stat().st_size / 1e6
    assert f"generated media kept in {cache} ({mb:,.1f} MB)" in p.stdout
    assert list(tmp.iterdir()) == []
    p = _vidpipe("bench", "e2e", "x.mp4", "--cpu-frames", "0", cwd=tmp_path)
    assert p.returncode == 2 and "--cpu-frames" in p.stderr and "positive whole number" in p.stderr
