"""Ctrl-C, SIGTERM and SIGKILL on a real ``python -m vidpipe detect`` process: nothing detected is
lost, the output is readable while the run goes on, and valid after any stop.

The rows of an interrupted run are held against an uninterrupted run of the same frames
(``--max-frames N``): same detections frame by frame (boxes within 1 px, scores within 0.01, as
batch composition may differ).
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX signals")

ARGS = ["--device", "cpu", "--batch-size", "4", "--imgsz", "160", "--progress", "off"]  # 160: ~30 fps on 2 cores


def start(*args, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "vidpipe", "detect", *map(str, args)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
    )


def wait_for(predicate, proc: subprocess.Popen, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"vidpipe ended (rc {proc.returncode}) before the condition: {out}\n{err}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("timed out waiting for rows")
        time.sleep(0.05)


def csv_rows(path: Path) -> list[dict]:
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n"), "the table must end at a row boundary"
    return list(csv.DictReader(text.splitlines()))


def data_rows(path: Path) -> int:
    try:
        return max(0, path.read_text(encoding="utf-8").count("\n") - 1)
    except FileNotFoundError:
        return 0


def by_frame(rows: list[dict]) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = defaultdict(list)
    for r in rows:
        out[int(r["frame"])].append(r)
    return out


def same_detections(got: dict[int, list[dict]], ref: dict[int, list[dict]], frames: int) -> None:
    for f in range(frames):
        a, b = got.get(f, []), ref.get(f, [])
        assert len(a) == len(b), f"frame {f}: {len(a)} rows, the uninterrupted run has {len(b)}"
        for x, y in zip(sorted(a, key=lambda r: float(r["x1"])), sorted(b, key=lambda r: float(r["x1"]))):
            assert x["class_name"] == y["class_name"]
            assert abs(float(x["confidence"]) - float(y["confidence"])) < 0.01
            assert all(abs(float(x[k]) - float(y[k])) <= 1.0 for k in ("x1", "y1", "x2", "y2"))


def reference(bikes: Path, frames: int, tmp: Path) -> dict[int, list[dict]]:
    out = tmp / "ref.csv"
    p = subprocess.run(
        [sys.executable, "-m", "vidpipe", "detect", str(bikes), *ARGS, "--max-frames", str(frames), "-o", str(out), "-q"],
        capture_output=True, text=True, timeout=300,
    )
    assert p.returncode == 0, p.stderr
    return by_frame(csv_rows(out))


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
def test_interrupt_keeps_every_detected_frame(bikes_path, tmp_path, sig, code):
    out = tmp_path / "dets.csv"
    proc = start(bikes_path, *ARGS, "-o", out, cwd=tmp_path)
    wait_for(lambda: data_rows(out) > 0, proc)  # rows are readable while the run goes on
    live = out.read_text(encoding="utf-8")  # a live reader takes the rows up to the last newline
    seen = list(csv.DictReader(live[: live.rfind("\n") + 1].splitlines()))
    assert json.loads((tmp_path / "dets.csv.meta.json").read_text())["status"] == "running"
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == code, (stdout, stderr)
    assert "Traceback" not in stderr
    meta = json.loads((tmp_path / "dets.csv.meta.json").read_text())
    assert meta["finished"] is True and meta["status"] == "partial" and meta["complete"] is False
    assert signal.Signals(sig).name in meta["reason"]
    frames = meta["frames"]
    assert f"{frames} frames" in stdout and f"after {frames} frames" in stderr
    assert meta["summary"]["frames"] == frames and meta["summary"]["sources"][0]["status"] == "partial"
    rows = csv_rows(out)
    assert len(rows) == meta["rows"] >= len(seen) and rows[: len(seen)] == seen
    got = by_frame(rows)
    assert max(got) < frames < 250  # no row of a frame not counted; stopped early
    same_detections(got, reference(bikes_path, frames, tmp_path), frames)


def test_sigkill_leaves_valid_csv_and_says_running(bikes_path, tmp_path):
    out = tmp_path / "dets.csv"
    proc = start(bikes_path, *ARGS, "-o", out, cwd=tmp_path)
    wait_for(lambda: data_rows(out) > 0, proc)
    time.sleep(1.0)
    proc.kill()
    proc.communicate(timeout=60)
    rows = csv_rows(out)  # valid, ends at a row boundary
    assert rows
    meta = json.loads((tmp_path / "dets.csv.meta.json").read_text())
    assert meta["status"] == "running" and meta["finished"] is False and meta["pid"] == proc.pid
    got = by_frame(rows)
    last = max(got)
    # every frame up to the last one written is whole (a batch is written in one piece)
    same_detections(got, reference(bikes_path, last + 1, tmp_path), last + 1)


def test_sigkill_parquet_leaves_previous_target_and_running_metadata(bikes_path, tmp_path):
    """Parquet is renamed into place at the end (documented): a killed run leaves the previous
    file untouched, a hidden temporary file, and metadata that says it was running."""
    out = tmp_path / "dets.parquet"
    out.write_bytes(b"previous")
    meta_path = tmp_path / "dets.parquet.meta.json"
    proc = start(bikes_path, *ARGS, "-o", out, cwd=tmp_path)
    wait_for(lambda: meta_path.exists(), proc)
    time.sleep(1.0)
    proc.kill()
    proc.communicate(timeout=60)
    assert out.read_bytes() == b"previous"
    meta = json.loads(meta_path.read_text())
    assert meta["status"] == "running" and meta["finished"] is False
    temp = Path(meta["temporary"])
    assert temp.parent == tmp_path and temp.name.startswith(".dets.parquet.tmp-")
