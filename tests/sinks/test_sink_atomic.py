"""Crash safety of TableSink: CSV/JSONL live under the real name (valid at every row boundary),
Parquet through a temporary file + rename; abort keeps a valid partial output; the sidecar
metadata says running / complete / partial / failed."""

from __future__ import annotations

import csv
import json

import pyarrow.parquet as pq
import pytest
from sink_helpers import EXPECTED, make_result, sample_batches

from vidpipe.errors import SinkError
from vidpipe.sinks import TableSink, metadata_path

FORMATS = ["csv", "jsonl", "parquet"]


def read_rows(path, fmt):
    """Rows of a finished output, parsed by the standard reader of its format."""
    if fmt == "csv":
        return list(csv.DictReader(path.open(encoding="utf-8")))
    if fmt == "jsonl":
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return pq.read_table(path).to_pylist()


def test_parquet_appears_only_at_close(tmp_path):
    fmt = "parquet"
    path = tmp_path / f"dets.{fmt}"
    first, second = sample_batches()
    sink = TableSink(path, row_group_size=2)
    sink.write(first)
    sink.write(second)
    temps = list(tmp_path.glob(f".dets.{fmt}.tmp-*"))
    assert temps == [sink.temp_path] and temps[0].stat().st_size > 0  # row groups are on disk
    assert not path.exists()
    running = json.loads(metadata_path(path).read_text())
    assert running["status"] == "running" and running["finished"] is False and running["complete"] is False
    assert running["temporary"] == str(sink.temp_path)
    sink.close()
    assert path.exists() and not sink.temp_path.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"dets.{fmt}", f"dets.{fmt}.meta.json"]
    assert len(read_rows(path, fmt)) == len(EXPECTED)


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_text_tables_are_readable_while_written(tmp_path, fmt):
    """CSV/JSONL: each write() leaves the real file valid and complete up to its last row, and
    the metadata says the run is still going."""
    path = tmp_path / f"dets.{fmt}"
    first, second = sample_batches()
    sink = TableSink(path)
    assert read_rows(path, fmt) == []  # header only (CSV), or empty (JSONL)
    sink.write(first)
    assert len(read_rows(path, fmt)) == 3 and path.read_text().endswith("\n")
    meta = json.loads(metadata_path(path).read_text())
    assert meta["status"] == "running" and meta["finished"] is False and meta["pid"] > 0
    sink.write(second)
    assert len(read_rows(path, fmt)) == len(EXPECTED)
    assert list(tmp_path.glob(".*tmp-*")) == []  # no hidden file for text tables
    sink.close()
    meta = json.loads(metadata_path(path).read_text())
    assert meta["status"] == "complete" and meta["complete"] is True and meta["finished"] is True


def test_previous_parquet_untouched_until_close(tmp_path):
    path = tmp_path / "dets.parquet"
    path.write_bytes(b"previous run\n")
    sink = TableSink(path)
    sink.write(sample_batches()[0])
    assert path.read_bytes() == b"previous run\n"
    sink.close()
    assert len(read_rows(path, "parquet")) == 3


@pytest.mark.parametrize("fmt", FORMATS)
def test_abort_keeps_valid_partial_output(tmp_path, fmt):
    path = tmp_path / f"dets.{fmt}"
    sink = TableSink(path, row_group_size=1000)  # Parquet rows still buffered: abort must flush them
    sink.write(sample_batches()[0])
    sink.abort("stopped by the user")
    assert sink.state == "aborted" and (sink.temp_path is None or not sink.temp_path.exists())
    rows = read_rows(path, fmt)
    assert len(rows) == 3  # the first batch's detections
    meta = json.loads(metadata_path(path).read_text())
    assert meta["complete"] is False and meta["status"] == "partial"
    assert meta["reason"] == "stopped by the user" and meta["frames"] == 3
    if fmt == "parquet":
        embedded = json.loads(pq.read_schema(path).metadata[b"vidpipe"])
        assert embedded["complete"] is False and embedded["reason"] == "stopped by the user"


@pytest.mark.parametrize("fmt", FORMATS)
def test_exception_inside_with_leaves_valid_file(tmp_path, fmt):
    path = tmp_path / f"dets.{fmt}"
    with pytest.raises(RuntimeError, match="decoder exploded"):
        with TableSink(path) as sink:
            sink.write(sample_batches()[0])
            raise RuntimeError("decoder exploded")
    assert len(read_rows(path, fmt)) == 3
    meta = json.loads(metadata_path(path).read_text())
    assert meta["complete"] is False and "RuntimeError: decoder exploded" in meta["reason"]


def test_keyboard_interrupt_inside_with(tmp_path):
    path = tmp_path / "dets.csv"
    with pytest.raises(KeyboardInterrupt):
        with TableSink(path) as sink:
            sink.write(sample_batches()[0])
            raise KeyboardInterrupt
    assert len(read_rows(path, "csv")) == 3
    assert "interrupted" in json.loads(metadata_path(path).read_text())["reason"]


def test_close_is_idempotent_and_final(tmp_path):
    path = tmp_path / "dets.csv"
    sink = TableSink(path)
    sink.write(sample_batches()[0])
    sink.close()
    sink.close()
    sink.abort("late")  # no effect after close
    assert json.loads(metadata_path(path).read_text())["complete"] is True
    with pytest.raises(SinkError, match="closed"):
        sink.write(sample_batches()[1])


def test_no_metadata_when_disabled(tmp_path):
    path = tmp_path / "dets.csv"
    TableSink(path, metadata=False).close()
    assert [p.name for p in tmp_path.iterdir()] == ["dets.csv"]


def test_unwritable_directory_raises_sink_error_with_path(tmp_path):
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("a file where a directory should be")
    target = blocker / "sub" / "dets.csv"
    with pytest.raises(SinkError) as info:
        TableSink(target)
    assert str(target) in str(info.value)
    assert isinstance(info.value, OSError)


def test_target_is_a_directory(tmp_path):
    with pytest.raises(SinkError, match="directory"):
        TableSink(tmp_path, format="csv")


def test_two_sinks_same_target_do_not_share_a_temp_file(tmp_path):
    path = tmp_path / "dets.parquet"
    a, b = TableSink(path), TableSink(path)
    assert a.temp_path != b.temp_path
    a.write([make_result(0, [[0, 0, 1, 1]], [0.5], [0])])
    a.close()
    b.close()  # last one wins, and it is complete
    assert len(read_rows(path, "parquet")) == 0
