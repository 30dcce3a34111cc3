"""Tables while live (issue 12, item 7): rows on disk as soon as they are written, capture-time
columns for live sources only, hourly rotation (each file complete, with its own metadata).

The results are real: the bundled sample through the real model on the CPU. Live capture times
are what a live source puts in ``FrameMeta`` (``captured_at``, ``captured_mono``); until the
live sources land, the tests set them on those real results with ``dataclasses.replace``.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from vidpipe.sinks import CAPTURE_COLUMNS, COLUMNS, RotatingTableSink, TableSink, metadata_path
from vidpipe.sinks.rotate import rotated_path

EXT = {"csv": ".csv", "jsonl": ".jsonl", "parquet": ".parquet"}
HOUR = datetime(2026, 11, 26, 10, 0, 0, tzinfo=timezone.utc).timestamp()  # 10:00:00 UTC


@pytest.fixture(scope="module")
def batches():
    """Real results: 24 frames of the bundled sample, batches of 4 (some frames with detections)."""
    import vidpipe
    from vidpipe.data import sample_video

    run = vidpipe.detect(str(sample_video()), device="cpu", batch_size=4, max_frames=24, imgsz=160, conf=0.05,
                         results_on_host=True)
    out = [list(b) for b in run.batches()]
    run.close()
    assert sum(len(r.detections) for b in out for r in b) > 0
    return out


def live(batches, start: float, step: float = 0.04):
    """The same results, as a live source would deliver them: frame i captured at start + i*step."""
    now_mono, now_wall = time.monotonic(), time.time()
    out, i = [], 0
    for b in batches:
        row = []
        for r in b:
            at = start + i * step
            meta = dataclasses.replace(r.meta, captured_at=at, captured_mono=now_mono - (now_wall - at))
            row.append(dataclasses.replace(r, meta=meta))
            i += 1
        out.append(row)
    return out


def read_table(path: Path, fmt: str) -> list[dict]:
    if fmt == "csv":
        return list(csv.DictReader(path.read_text(encoding="utf-8").splitlines()))
    if fmt == "jsonl":
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return pq.read_table(path).to_pylist()


def detections(batches) -> int:
    return sum(len(r.detections) for b in batches for r in b)


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_files_keep_their_columns_exactly(batches, tmp_path, fmt):
    path = tmp_path / f"dets{EXT[fmt]}"
    with TableSink(path) as sink:
        for b in batches:
            sink.write(b)
    if fmt == "parquet":
        assert pq.read_schema(path).names == list(COLUMNS)
    elif fmt == "csv":
        assert path.read_text().splitlines()[0] == ",".join(COLUMNS)
    else:
        assert list(json.loads(path.read_text().splitlines()[0])) == list(COLUMNS)
    assert json.loads(metadata_path(path).read_text())["columns"] == list(COLUMNS)


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_capture_columns_for_live_sources(batches, tmp_path, fmt):
    start = time.time() - 0.5
    feed = live(batches, start)
    path = tmp_path / f"dets{EXT[fmt]}"
    with TableSink(path, capture_times=True) as sink:
        before = time.monotonic()
        for b in feed:
            sink.write(b)
        after = time.monotonic()
    rows = read_table(path, fmt)
    assert len(rows) == detections(batches)
    assert list(rows[0]) == list(COLUMNS + CAPTURE_COLUMNS)
    capture_of = {r.meta.index: r.meta for b in feed for r in b}
    for row in rows:
        meta = capture_of[int(row["frame"])]
        at = row["captured_at"]
        if fmt == "parquet":
            assert at.tzinfo is not None
            got = at.timestamp()
        else:
            assert at.endswith("Z") and len(at) == len("2026-11-26T10:15:02.123Z"), at
            got = datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()
        assert abs(got - meta.captured_at) <= 0.0005 + 1e-6
        latency = float(row["latency_ms"])
        # written between `before` and `after`: latency = write time - capture time (monotonic)
        low = (before - meta.captured_mono) * 1000 - 0.1
        high = (after - meta.captured_mono) * 1000 + 0.1
        assert low <= latency <= high, (low, latency, high)


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_rows_are_on_disk_when_write_returns(batches, tmp_path, fmt):
    """A reader (another file handle, as another process would open it) sees every row of a
    batch as soon as ``write()`` returns: nothing waits for a buffer to fill."""
    path = tmp_path / f"dets{EXT[fmt]}"
    feed = live(batches, time.time())
    with TableSink(path, capture_times=True) as sink:
        expected = 0
        for b in feed:
            sink.write(b)
            t_written = time.monotonic()
            expected += sum(len(r.detections) for r in b)
            text = path.read_text(encoding="utf-8")
            seen = time.monotonic() - t_written
            lines = text.count("\n") - (1 if fmt == "csv" else 0)
            assert lines == expected and text.endswith("\n")
            assert seen < 1.0


def test_hourly_rotation_by_wall_clock(batches, tmp_path):
    """Files, not live: rotation on the wall clock (injected); a real rotation at 11:00 UTC."""
    ticks = iter(HOUR + 3600 - 2 + 0.7 * i for i in range(len(batches)))  # 10:59:58.0, 58.7, 59.4, 11:00:00.1 ...
    base = tmp_path / "dets.csv"
    sink = RotatingTableSink(base, clock=lambda: next(ticks), names=())
    first = rotated_path(base, HOUR)
    second = rotated_path(base, HOUR + 3600)
    assert first.name == "dets-2026-11-26T10.csv" and second.name == "dets-2026-11-26T11.csv"
    for i, b in enumerate(batches):
        sink.write(b)
        if i == 3:  # the first write at 11:00: the 10:00 file is final, the 11:00 file is running
            assert json.loads(metadata_path(first).read_text())["finished"] is True
            assert json.loads(metadata_path(second).read_text())["status"] == "running"
    sink.close()
    assert sink.outputs == (str(first), str(second))
    rows = [read_table(p, "csv") for p in (first, second)]
    assert all(p.read_text().splitlines()[0] == ",".join(COLUMNS) for p in (first, second))  # own header
    split = sum(len(r.detections) for b in batches[:3] for r in b)
    assert [len(r) for r in rows] == [split, detections(batches) - split]
    metas = [json.loads(metadata_path(p).read_text()) for p in (first, second)]
    assert [m["status"] for m in metas] == ["complete", "complete"]
    assert metas[0]["period"] == {"start": "2026-11-26T10:00:00+00:00", "end": "2026-11-26T11:00:00+00:00",
                                  "by": "wall clock"}
    assert metas[0]["frames"] + metas[1]["frames"] == sum(len(b) for b in batches)


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_hourly_rotation_by_capture_time_splits_a_batch(batches, tmp_path, fmt):
    """Live: the frames' capture time (UTC) decides, not the wall clock; a batch that crosses
    the hour is split between the two files; every row is kept once."""
    start = HOUR + 3600 - 0.3  # frames every 40 ms from 10:59:59.7: frame 8 is the first at 11:00
    feed = live(batches, start)
    base = tmp_path / f"dets{EXT[fmt]}"
    with RotatingTableSink(base, capture_times=True, clock=lambda: 0.0) as sink:
        for b in feed:
            sink.write(b)
    files = [rotated_path(base, HOUR), rotated_path(base, HOUR + 3600)]
    assert sink.outputs == tuple(map(str, files))
    tables = [read_table(p, fmt) for p in files]
    frames_of = [{int(r["frame"]) for r in t} for t in tables]
    first_at_11 = 8
    assert all(f < first_at_11 for f in frames_of[0]) and all(f >= first_at_11 for f in frames_of[1])
    assert sum(map(len, tables)) == detections(batches)
    for p in files:
        meta = json.loads(metadata_path(p).read_text())
        assert meta["finished"] and meta["period"]["by"] == "capture time"
        assert meta["columns"] == list(COLUMNS + CAPTURE_COLUMNS)


def test_rotation_with_a_short_period_on_the_real_clock(batches, tmp_path):
    """The real wall clock, a 0.2 s period (tests only): several complete files, no row lost."""
    base = tmp_path / "dets.jsonl"
    with RotatingTableSink(base, period_s=0.2) as sink:
        for b in batches:
            sink.write(b)
            time.sleep(0.11)
    assert len(sink.outputs) >= 3
    total = sum(len(read_table(Path(p), "jsonl")) for p in sink.outputs)
    assert total == detections(batches)
    assert all(json.loads(metadata_path(Path(p)).read_text())["finished"] for p in sink.outputs)


def cli(*args, cwd: Path, **kw):
    return subprocess.Popen([sys.executable, "-m", "vidpipe", "detect", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, **kw)


def test_cli_rotate_hourly_names_the_file_by_hour(tmp_path):
    hours = {datetime.now(timezone.utc).strftime("%Y-%m-%dT%H")}
    p = cli("--device", "cpu", "--imgsz", "160", "--max-frames", "8", "--rotate", "hourly", "-o", "dets.csv",
            cwd=tmp_path)
    out, err = p.communicate(timeout=300)
    hours.add(datetime.now(timezone.utc).strftime("%Y-%m-%dT%H"))
    assert p.returncode == 0, err
    made = sorted(f.name for f in tmp_path.glob("dets-*.csv"))
    assert len(made) == 1 and made[0][len("dets-"):-len(".csv")] in hours
    assert (tmp_path / (made[0] + ".meta.json")).exists()
    assert made[0] in out  # the summary lists the rotated file


def test_cli_rotate_to_stdout_is_refused(tmp_path):
    p = cli("--rotate", "hourly", "-o", "-", cwd=tmp_path)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 2 and "--rotate hourly needs a file or folder output" in err


@pytest.mark.skipif(os.name != "posix", reason="POSIX")
def test_cli_rows_reach_the_file_while_the_run_goes_on(tmp_path):
    """``vidpipe detect`` in a subprocess: rows show up in the CSV batch after batch while it
    runs (read by this process), not at the end."""
    out = tmp_path / "dets.csv"
    p = cli("--device", "cpu", "--imgsz", "160", "--batch-size", "4", "--max-frames", "120", "--conf", "0.05",
            "--progress", "off", "-o", out, cwd=tmp_path)
    seen: list[tuple[float, int]] = []  # (time, data rows) at every change
    deadline = time.monotonic() + 300
    while p.poll() is None and time.monotonic() < deadline:
        try:
            n = out.read_text(encoding="utf-8").count("\n") - 1
        except FileNotFoundError:
            n = -1
        if not seen or n != seen[-1][1]:
            seen.append((time.monotonic(), n))
        time.sleep(0.02)
    stdout, stderr = p.communicate(timeout=60)
    assert p.returncode == 0, stderr
    ended = time.monotonic()
    final = out.read_text(encoding="utf-8").count("\n") - 1
    growth = [(t, n) for t, n in seen if n > 0]
    assert len(growth) >= 3, f"rows appeared in {len(growth)} steps while running: {seen}"
    assert growth[0][1] < final, "the first rows seen were already all the rows"
    assert ended - growth[0][0] > 0.5
