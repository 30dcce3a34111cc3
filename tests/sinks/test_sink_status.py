"""The metadata status of a finalised table follows the run, and a table can stream to a text
stream (``vidpipe detect -o -``)."""

from __future__ import annotations

import io
import json

import pytest
from sink_helpers import EXPECTED, sample_batches

from vidpipe.errors import ConfigError
from vidpipe.sinks import TableSink, metadata_path
from vidpipe.summary import RunSummary, SourceSummary


def summary_of(*statuses: str, frames: int = 0) -> RunSummary:
    return RunSummary(
        sources=tuple(SourceSummary(source=f"in{i}.mp4", status=s) for i, s in enumerate(statuses)), frames=frames
    )


@pytest.mark.parametrize(
    "statuses, frames, status",
    [
        (("ok",), 5, "complete"),
        (("ok", "ok"), 5, "complete"),
        (("failed",), 0, "failed"),  # the only input failed: never "complete"
        (("ok", "failed"), 5, "partial"),
        (("partial",), 3, "partial"),
        (("skipped",), 0, "failed"),
    ],
)
def test_status_follows_the_run(tmp_path, statuses, frames, status):
    path = tmp_path / "dets.csv"
    sink = TableSink(path)
    sink.close(summary_of(*statuses, frames=frames))
    meta = json.loads(metadata_path(path).read_text())
    assert meta["status"] == status and meta["complete"] is (status == "complete") and meta["finished"] is True
    assert (meta["reason"] is None) is (status == "complete")


def test_abort_is_partial_whatever_the_summary(tmp_path):
    path = tmp_path / "dets.jsonl"
    sink = TableSink(path)
    sink.abort("interrupted (SIGINT)", summary_of("ok", frames=5))
    meta = json.loads(metadata_path(path).read_text())
    assert meta["status"] == "partial" and meta["reason"] == "interrupted (SIGINT)"


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_stream_sink_writes_rows_and_no_file(tmp_path, monkeypatch, fmt):
    monkeypatch.chdir(tmp_path)
    stream = io.StringIO()
    sink = TableSink("<stdout>", format=fmt, stream=stream)
    first, second = sample_batches()
    sink.write(first)
    n_first = len(stream.getvalue().splitlines())
    assert n_first == 3 + (fmt == "csv")  # rows reach the stream at each write
    sink.write(second)
    sink.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == len(EXPECTED) + (fmt == "csv")
    if fmt == "jsonl":
        assert [json.loads(line)["frame"] for line in lines] == [e[0] for e in EXPECTED]
    assert list(tmp_path.iterdir()) == [] and sink.outputs == ()
    assert not stream.closed  # the stream belongs to the caller


def test_parquet_cannot_stream():
    with pytest.raises(ConfigError, match="format='parquet' cannot be streamed"):
        TableSink("<stdout>", format="parquet", stream=io.StringIO())
