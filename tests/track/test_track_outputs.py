"""Tracking end to end: the bundled street video through vidpipe.detect(track=True), the CLI's
--track writing track_id, and the track_id column of every table format."""

from __future__ import annotations

import collections
import csv
import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
import torch

import vidpipe
from vidpipe.data import sample_video
from vidpipe.sinks import TableSink
from vidpipe.track.assign import iou_matrix
from vidpipe.types import Detections, FrameMeta, FrameResult

# bikes.mp4 (25 fps) from 4.0 s to 5.6 s: people and bicycles riding through
SPAN = dict(start=4.0, end=5.6)


def test_detect_with_track_gives_stable_ids_on_the_street_video():
    run = vidpipe.detect(str(sample_video()), device="cpu", track=True, **SPAN)
    tracks = collections.defaultdict(list)
    frames = 0
    for r in run:
        frames += 1
        d = r.detections.cpu()
        ids = d.track_ids.tolist()
        assert d.track_ids.dtype == torch.int64
        kept = [i for i in ids if i >= 0]
        assert len(kept) == len(set(kept)), f"frame {r.index}: one id on two detections"
        for box, tid, cls in zip(d.boxes.numpy(), ids, d.class_ids.tolist()):
            if tid >= 0:
                tracks[tid].append((r.meta.index, cls, box))
    assert frames >= 35
    lengths = sorted((len(v) for v in tracks.values()), reverse=True)
    assert lengths[0] >= 25 and len(lengths) >= 2 and lengths[1] >= 12, lengths  # tracks persist
    for tid, seq in tracks.items():
        assert len({c for _, c, _ in seq}) == 1, f"track {tid} changed class"
        for (f0, _, b0), (f1, _, b1) in zip(seq, seq[1:]):
            if f1 - f0 <= 2:  # the same object from one frame to the next: boxes overlap well
                assert iou_matrix(b0[None], b1[None])[0, 0] > 0.3, (tid, f0, f1)
    summary = run.summary().to_dict()
    assert summary["track"]["tracks"] == len(tracks)


def test_cli_track_writes_track_id(tmp_path):
    out = tmp_path / "out.csv"
    p = subprocess.run(
        [sys.executable, "-m", "vidpipe", "detect", "--device", "cpu", "--track", "--start", "4", "--end", "5.6",
         "-o", str(out), "-q"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    rows = list(csv.DictReader(out.open()))
    assert list(rows[0])[-1] == "track_id"
    ids = [r["track_id"] for r in rows]
    tracked = [int(i) for i in ids if i != ""]
    assert len(tracked) >= 0.3 * len(rows) and len(set(tracked)) >= 2
    assert collections.Counter(tracked).most_common(1)[0][1] >= 25
    meta = json.loads((tmp_path / "out.csv.meta.json").read_text())
    assert "track_id" in meta["columns"] and meta["track"]["tracks"] == len(set(tracked))
    bad = subprocess.run([sys.executable, "-m", "vidpipe", "detect", "--track-buffer", "-1"],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert bad.returncode == 2 and "--track-buffer" in bad.stderr


def _tracked_result(index: int, ids: list[int]) -> FrameResult:
    n = len(ids)
    boxes = torch.tensor([[10.0 * i, 0, 10.0 * i + 5, 5] for i in range(n)]).reshape(-1, 4)
    dets = Detections(boxes, torch.full((n,), 0.9), torch.zeros(n, dtype=torch.int64), torch.zeros(n, dtype=torch.int64),
                      torch.tensor(ids, dtype=torch.int64))  # fmt: skip
    return FrameResult(FrameMeta("v.mp4", 0, index, index / 30, 100, 100), dets, names=("person",))


@pytest.mark.parametrize("ext", ["csv", "jsonl", "parquet"])
def test_track_id_column_in_every_format_null_when_unconfirmed(tmp_path, ext):
    path = tmp_path / f"t.{ext}"
    sink = TableSink(path, tracking=True)
    sink.write([_tracked_result(0, [3, -1]), _tracked_result(1, [3, 7])])
    sink.close()
    if ext == "csv":
        got = [r["track_id"] for r in csv.DictReader(path.open())]
        assert got == ["3", "", "3", "7"]
    elif ext == "jsonl":
        got = [json.loads(line)["track_id"] for line in path.open()]
        assert got == [3, None, 3, 7]
    else:
        table = pq.read_table(path)
        assert str(table.schema.field("track_id").type) == "int64"
        assert table.column("track_id").to_pylist() == [3, None, 3, 7]


def test_untracked_tables_have_no_track_id_column(tmp_path):
    """Tracking off (the default): the columns are unchanged."""
    path = tmp_path / "t.csv"
    sink = TableSink(path)
    sink.write([_tracked_result(0, [1])])
    sink.close()
    assert "track_id" not in next(csv.reader(path.open()))
