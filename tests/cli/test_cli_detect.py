"""The vidpipe command, run as a user runs it: a subprocess, exit codes, one-line errors, outputs."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from media import make_text, truncate

SMALL = dict(width=160, height=96, frames=10, fps=10, gop=5)
COLUMNS = ["source", "frame", "pts", "class_id", "class_name", "confidence", "x1", "y1", "x2", "y2"]


def vidpipe(*args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "vidpipe", *map(str, args)],
        capture_output=True, text=True, cwd=cwd, timeout=timeout,
    )


def test_detect_writes_csv_beside_input_and_prints_summary(make_clip, tmp_path):
    clip = make_clip(**SMALL)
    src = tmp_path / "clip.mp4"
    src.write_bytes(Path(clip.path).read_bytes())
    p = vidpipe("detect", src, "--device", "cpu", "--conf", "0.01")
    assert p.returncode == 0, p.stderr
    out = tmp_path / "clip.detections.csv"
    rows = list(csv.reader(out.open()))
    assert rows[0] == COLUMNS
    assert len(rows) > 1
    assert {r[0] for r in rows[1:]} == {str(src)}
    meta = json.loads((tmp_path / "clip.detections.csv.meta.json").read_text())
    assert meta["summary"]["frames"] == clip.frames
    assert "10 frames" in p.stdout and "fps" in p.stdout
    assert "pyav" in p.stdout
    assert "Traceback" not in p.stderr


def test_one_output_for_several_inputs_parquet(make_clip, tmp_path):
    a = make_clip(**SMALL)
    b = make_clip(width=128, height=96, frames=6, fps=6, gop=3)
    out = tmp_path / "all.parquet"
    p = vidpipe("detect", a.path, b.path, "--device", "cpu", "--conf", "0.01", "-o", out)
    assert p.returncode == 0, p.stderr
    table = pq.read_table(out)
    assert table.column_names == COLUMNS
    assert set(table.column("source").to_pylist()) <= {str(a.path), str(b.path)}
    meta = json.loads(pq.read_schema(out).metadata[b"vidpipe"])
    assert meta["summary"]["frames"] == a.frames + b.frames


@pytest.mark.parametrize(
    "make_bad, words",
    [
        (lambda d: d / "missing.mp4", "no such file"),
        (lambda d: (d / "zero.mp4").write_bytes(b"") or d / "zero.mp4", "empty"),
        (lambda d: make_text(d / "notes.mp4"), "not a video"),
        (lambda d: (d / "emptydir").mkdir() or d / "emptydir", "emptydir"),
    ],
    ids=["missing", "zero-byte", "not-a-video", "empty-folder"],
)
def test_bad_input_one_line_exit_2(tmp_path, make_bad, words):
    bad = make_bad(tmp_path)
    p = vidpipe("detect", bad, "--device", "cpu")
    assert p.returncode == 2, (p.stdout, p.stderr)
    errors = [line for line in p.stderr.splitlines() if line.startswith("vidpipe: error:")]
    assert errors and words in errors[0] and str(bad.name) in errors[0]
    assert "Traceback" not in p.stderr


def test_debug_shows_traceback(tmp_path):
    p = vidpipe("detect", tmp_path / "missing.mp4", "--device", "cpu", "--debug")
    assert p.returncode == 2
    assert "Traceback" in p.stderr


@pytest.mark.parametrize(
    "args, words",
    [
        (["--conf", "2"], "--conf"),
        (["--batch-size", "0"], "--batch-size"),
        (["--max-det", "0"], "--max-det"),
        (["--frame-skip", "0"], "--frame-skip"),
        (["--device", "tpu"], "--device"),
        (["--decoder", "ffmpeg"], "--decoder"),
        (["--decoder-processes", "65"], "--decoder-processes"),
        (["--decoder-processes", "some"], "--decoder-processes"),
        (["--classes", "person,unicorn"], "unicorn"),
        (["--model", "nonexistent.onnx"], "nonexistent.onnx"),
        (["--output", "dets.xlsx"], "--format"),
        (["--output", "-", "--format", "parquet"], "stdout"),
    ],
)
def test_invalid_options_exit_2(make_clip, tmp_path, args, words):
    """Each error names the CLI's own flags, never the Python API's arguments (batch_size=)."""
    clip = make_clip(**SMALL)
    p = vidpipe("detect", clip.path, "--device", "cpu", *args, cwd=tmp_path)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert words in p.stderr and "Traceback" not in p.stderr
    assert not re.search(r"\b(batch_size|max_det|frame_skip|conf|device|decoder|classes|format)=", p.stderr)


def test_bad_and_good_inputs_together(make_clip, tmp_path):
    good = make_clip(**SMALL)
    bad = make_text(tmp_path / "bad.mp4")
    out = tmp_path / "dets.csv"
    p = vidpipe("detect", bad, good.path, tmp_path / "gone.mp4", "--device", "cpu", "--conf", "0.01", "-o", out)
    assert p.returncode == 2
    rows = list(csv.DictReader(out.open()))
    assert rows and {r["source"] for r in rows} == {str(good.path)}
    meta = json.loads(Path(str(out) + ".meta.json").read_text())
    status = {s["source"]: s["status"] for s in meta["summary"]["sources"]}
    assert status == {str(bad): "failed", str(good.path): "ok", str(tmp_path / "gone.mp4"): "failed"}
    errors = [line for line in p.stderr.splitlines() if "error" in line]
    # each bad input is reported exactly once, as one line
    assert sum(line.startswith("vidpipe: error:") for line in errors) == 2, p.stderr
    assert sum("bad.mp4" in line for line in p.stderr.splitlines()) == 1, p.stderr
    assert sum("gone.mp4" in line for line in p.stderr.splitlines()) == 1, p.stderr
    assert "error" not in p.stdout  # the summary says failed; the message is on stderr, once


def test_truncated_input_is_partial_with_valid_output(make_clip, tmp_path):
    clip = make_clip(suffix=".mkv", width=160, height=96, frames=40, fps=10, gop=5)
    cut = truncate(clip.path, 0.5, dst=tmp_path / "cut.mkv")
    out = tmp_path / "cut.jsonl"
    p = vidpipe("detect", cut, "--device", "cpu", "--conf", "0.01", "-o", out)
    assert p.returncode == 2
    assert "partial" in p.stdout and "cut.mkv" in p.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines and all(0 <= d["frame"] < clip.frames for d in lines)


def test_info_and_doctor(make_clip):
    clip = make_clip(**SMALL)
    p = vidpipe("info", clip.path)
    assert p.returncode == 0, p.stderr
    assert "h264" in p.stdout and "160x96" in p.stdout
    p = vidpipe("info", "--json", clip.path)
    info = json.loads(p.stdout)[0]
    assert info["frame_count"] == clip.frames and info["width"] == 160
    p = vidpipe("doctor")
    assert p.returncode == 0
    assert "PyAV" in p.stdout and "CUDA" in p.stdout


def test_default_run_on_bundled_sample(tmp_path):
    """`vidpipe detect` with no input: the bundled video, persons and bicycles, CSV in the cwd."""
    p = vidpipe("detect", "--device", "cpu", "--frame-skip", "10", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    rows = list(csv.DictReader((tmp_path / "bikes.detections.csv").open()))
    names = {r["class_name"] for r in rows}
    assert {"person", "bicycle"} <= names
    assert "25 frames" in p.stdout
