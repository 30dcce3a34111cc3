"""TableSink: CSV, JSONL and Parquet round trips, columns, order, values and types."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sink_helpers import EXPECTED, NAMES, make_result, sample_batches

from vidpipe.errors import ConfigError
from vidpipe.sinks import COLUMNS, TableSink, make_sink, metadata_path
from vidpipe.summary import RunSummary, SourceSummary


@pytest.fixture
def batches():
    return sample_batches()


def write_all(path, batches, **kw):
    sink = TableSink(path, **kw)
    with sink:
        for b in batches:
            sink.write(b)
    return sink


def test_csv_round_trip(tmp_path, batches):
    path = tmp_path / "dets.csv"
    write_all(path, batches)
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert lines[0] == ",".join(COLUMNS)
    assert "\r" not in text
    rows = list(csv.reader(lines[1:]))
    assert len(rows) == len(EXPECTED)
    # Fixed formatting: pts 6 decimals (empty when unknown), confidence 4, boxes 2.
    assert rows[0] == ["clip.mp4", "0", "0.000000", "0", "person", "0.9123", "10.00", "20.50", "110.25", "220.00"]
    assert rows[2] == ["clip.mp4", "2", "0.066667", "7", "7", "0.2500", "5.12", "6.00", "7.00", "8.00"]
    assert rows[3][2] == ""
    for row, exp in zip(rows, EXPECTED):
        assert row[0] == "clip.mp4"
        assert int(row[1]) == exp[0]
        assert (row[2] == "") == (exp[1] is None)
        if exp[1] is not None:
            assert float(row[2]) == pytest.approx(exp[1], abs=1e-6)
        assert int(row[3]) == exp[2] and row[4] == exp[3]
        assert float(row[5]) == pytest.approx(exp[4], abs=1e-4)
        assert [float(v) for v in row[6:]] == pytest.approx(exp[5:], abs=0.005)


def test_jsonl_round_trip(tmp_path, batches):
    path = tmp_path / "dets.jsonl"
    write_all(path, batches)
    objs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(objs) == len(EXPECTED)
    for obj, exp in zip(objs, EXPECTED):
        assert list(obj) == list(COLUMNS)  # key order = column order
        assert isinstance(obj["frame"], int) and isinstance(obj["class_id"], int)
        assert obj["frame"] == exp[0] and obj["class_id"] == exp[2] and obj["class_name"] == exp[3]
        if exp[1] is None:
            assert obj["pts"] is None
        else:
            assert obj["pts"] == round(exp[1], 6)
        assert obj["confidence"] == round(float(np.float32(exp[4])), 4)
        assert [obj[k] for k in ("x1", "y1", "x2", "y2")] == [round(float(np.float32(v)), 2) for v in exp[5:]]


@pytest.mark.parametrize("suffix", [".ndjson", ".pq"])
def test_extension_aliases(tmp_path, batches, suffix):
    sink = write_all(tmp_path / f"dets{suffix}", batches)
    assert sink.format == {".ndjson": "jsonl", ".pq": "parquet"}[suffix]


def test_parquet_round_trip(tmp_path, batches):
    path = tmp_path / "dets.parquet"
    write_all(path, batches, row_group_size=4)
    table = pq.read_table(path)
    assert table.column_names == list(COLUMNS)
    types = {f.name: f.type for f in table.schema}
    assert types == {
        "source": pa.string(), "frame": pa.int64(), "pts": pa.float64(), "class_id": pa.int64(),
        "class_name": pa.string(), "confidence": pa.float32(),
        "x1": pa.float32(), "y1": pa.float32(), "x2": pa.float32(), "y2": pa.float32(),
    }
    assert table.schema.field("pts").nullable and not table.schema.field("frame").nullable
    d = table.to_pydict()
    assert d["frame"] == [e[0] for e in EXPECTED]
    assert d["class_name"] == [e[3] for e in EXPECTED]
    assert d["pts"][3] is None and d["pts"][2] == 2 / 30  # stored unrounded, float64
    # float32 values round-trip exactly (not rounded like the text formats)
    assert d["confidence"] == [float(np.float32(e[4])) for e in EXPECTED]
    assert d["x1"] == [float(np.float32(e[5])) for e in EXPECTED]
    # written in row groups of 4 rows: 6 rows -> 2 groups
    assert pq.ParquetFile(path).metadata.num_row_groups == 2
    embedded = json.loads(pq.read_schema(path).metadata[b"vidpipe"])
    assert embedded["complete"] is True and embedded["rows"] == 6 and embedded["columns"] == list(COLUMNS)


def test_sink_names_override_result_names(tmp_path):
    path = tmp_path / "d.csv"
    write_all(path, [[make_result(0, [[0, 0, 1, 1]], [0.5], [1])]], names=["a", "b"])
    assert list(csv.DictReader(path.open()))[0]["class_name"] == "b"


@pytest.mark.parametrize("ext", ["csv", "jsonl", "parquet"])
def test_tracking_column(tmp_path, ext):
    path = tmp_path / f"t.{ext}"
    batch = [
        make_result(0, [[0, 0, 1, 1], [2, 2, 3, 3]], [0.5, 0.6], [0, 1], track_ids=[7, 2**40]),
        make_result(1, [[0, 0, 1, 1]], [0.5], [0]),  # an untracked frame
    ]
    write_all(path, [batch], tracking=True)
    if ext == "csv":
        rows = list(csv.DictReader(path.open()))
        assert list(rows[0]) == [*COLUMNS, "track_id"]
        assert [r["track_id"] for r in rows] == ["7", str(2**40), ""]
    elif ext == "jsonl":
        rows = [json.loads(x) for x in path.read_text().splitlines()]
        assert [r["track_id"] for r in rows] == [7, 2**40, None]
    else:
        table = pq.read_table(path)
        assert table.schema.field("track_id").type == pa.int64()
        assert table.column("track_id").to_pylist() == [7, 2**40, None]


def test_no_track_column_without_tracking(tmp_path):
    path = tmp_path / "t.csv"
    write_all(path, [[make_result(0, [[0, 0, 1, 1]], [0.5], [0], track_ids=[3])]])
    assert path.read_text().splitlines()[0] == ",".join(COLUMNS)


@pytest.mark.parametrize("ext", ["csv", "jsonl", "parquet"])
def test_empty_output_is_valid(tmp_path, ext):
    path = tmp_path / f"e.{ext}"
    write_all(path, [[make_result(0, [], [], [])]])
    if ext == "csv":
        assert path.read_text() == ",".join(COLUMNS) + "\n"
    elif ext == "jsonl":
        assert path.read_text() == ""
    else:
        table = pq.read_table(path)
        assert table.num_rows == 0 and table.column_names == list(COLUMNS)
    meta = json.loads(metadata_path(path).read_text())
    assert meta["frames"] == 1 and meta["rows"] == 0


def test_metadata_counts_frames_without_rows_and_stores_summary(tmp_path, batches):
    path = tmp_path / "out" / "nested" / "dets.csv"  # directories are created
    sink = TableSink(path)
    for b in batches:
        sink.write(b)
    summary = RunSummary(
        sources=(SourceSummary("clip.mp4", frames=5, detections=6, decoder="pyav"),),
        frames=5, detections=6, seconds=0.5, fps=10.0, outputs=(str(path),),
    )
    sink.close(summary)
    meta = json.loads((tmp_path / "out" / "nested" / "dets.csv.meta.json").read_text())
    assert meta["complete"] is True and meta["status"] == "complete" and meta["reason"] is None
    assert meta["frames"] == 5 and meta["rows"] == 6
    assert meta["sources"] == [{"source": "clip.mp4", "frames": 5, "rows": 6}]
    assert meta["columns"] == list(COLUMNS) and meta["format"] == "csv"
    assert meta["summary"]["sources"][0]["decoder"] == "pyav" and meta["summary"]["fps"] == 10.0
    assert meta["vidpipe_version"]


def test_unknown_extension_lists_allowed(tmp_path):
    with pytest.raises(ConfigError) as info:
        TableSink(tmp_path / "dets.txt")
    for ext in (".csv", ".jsonl", ".ndjson", ".parquet", ".pq"):
        assert ext in str(info.value)
    assert not list(tmp_path.iterdir())  # nothing created
    with pytest.raises(ConfigError, match="format"):
        TableSink(tmp_path / "d.csv", format="xlsx")


def test_explicit_format_overrides_extension(tmp_path, batches):
    path = tmp_path / "dets.txt"
    write_all(path, batches, format="jsonl")
    assert len(path.read_text().splitlines()) == len(EXPECTED)


def test_make_sink_by_extension(tmp_path):
    sink = make_sink(tmp_path / "a.PARQUET", names=NAMES)
    assert isinstance(sink, TableSink) and sink.format == "parquet"
    sink.close()
    assert pq.read_table(tmp_path / "a.PARQUET").num_rows == 0


def test_nan_pts_written_as_unknown(tmp_path):
    path = tmp_path / "n.csv"
    write_all(path, [[make_result(0, [[0, 0, 1, 1]], [0.5], [0], pts=math.nan)]])
    assert list(csv.DictReader(path.open()))[0]["pts"] == ""
