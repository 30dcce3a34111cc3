"""CallbackSink, MultiSink, make_sink and the default output path."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest
from sink_helpers import make_result, sample_batches

from vidpipe.errors import ConfigError, SinkError
from vidpipe.sinks import (
    CallbackSink,
    MultiSink,
    TableSink,
    default_output_path,
    make_sink,
    metadata_path,
    table_format,
)


def test_callback_sink_gets_every_frame_in_order():
    seen = []
    closed = []
    sink = CallbackSink(lambda r: seen.append((r.index, len(r.detections))),
                        on_close=lambda summary, complete, reason: closed.append((complete, reason)))
    with sink:
        for batch in sample_batches():
            sink.write(batch)
    assert seen == [(0, 2), (1, 0), (2, 1), (3, 3), (4, 0)]
    assert closed == [(True, None)] and sink.frames == 5


def test_callback_sink_rejects_non_callable():
    with pytest.raises(ConfigError):
        CallbackSink("not a function")


def test_multi_sink_writes_all_and_closes_all(tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.jsonl"
    seen = []
    multi = MultiSink([TableSink(a), TableSink(b), CallbackSink(seen.append)])
    with multi:
        for batch in sample_batches():
            multi.write(batch)
    assert multi.outputs == (str(a), str(b))
    assert len(list(csv.DictReader(a.open()))) == 6
    assert len(b.read_text().splitlines()) == 6
    assert len(seen) == 5
    assert all(json.loads(metadata_path(p).read_text())["complete"] for p in (a, b))


def test_multi_sink_failure_aborts_the_others_then_raises(tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.parquet"

    def fails_on_frame_3(result):
        if result.index == 3:
            raise ValueError("user callback broke")

    first, second = sample_batches()
    multi = MultiSink([TableSink(a), CallbackSink(fails_on_frame_3), TableSink(b)])
    multi.write(first)
    with pytest.raises(ValueError, match="user callback broke"):
        multi.write(second)
    assert multi.state == "aborted" and all(s.closed for s in multi.sinks)
    for path in (a, b):
        meta = json.loads(metadata_path(path).read_text())
        assert meta["complete"] is False and "user callback broke" in meta["reason"]
    # a got the second batch before the callback failed; b never did. Both are valid files.
    assert json.loads(metadata_path(a).read_text())["frames"] == 5
    assert json.loads(metadata_path(b).read_text())["frames"] == 3


def test_multi_sink_close_finalises_every_sink_before_raising(tmp_path):
    a = tmp_path / "a.csv"

    def broken_close(summary, complete, reason):
        raise SinkError("cannot flush the network output")

    multi = MultiSink([CallbackSink(lambda r: None, on_close=broken_close), TableSink(a)])
    multi.write(sample_batches()[0])
    with pytest.raises(SinkError, match="network"):
        multi.close()
    assert a.exists() and json.loads(metadata_path(a).read_text())["complete"] is True


def test_make_sink_dispatch(tmp_path):
    table = make_sink(tmp_path / "x.jsonl")
    assert isinstance(table, TableSink) and table.format == "jsonl"
    table.close()
    assert make_sink(table) is table
    assert isinstance(make_sink(print), CallbackSink)
    with pytest.raises(ConfigError):
        make_sink(42)


@pytest.mark.parametrize(
    ("name", "fmt"),
    [("a.csv", "csv"), ("a.CSV", "csv"), ("a.jsonl", "jsonl"), ("a.ndjson", "jsonl"),
     ("a.parquet", "parquet"), ("a.pq", "parquet")],
)
def test_table_format_by_extension(name, fmt):
    assert table_format(name) == fmt


def test_table_format_without_extension():
    with pytest.raises(ConfigError, match="no extension"):
        table_format("dets")


def test_default_output_path_for_files_and_folders(tmp_path):
    video = tmp_path / "clips" / "video.mp4"
    assert default_output_path(video) == tmp_path / "clips" / "video.detections.csv"
    assert default_output_path(str(video), suffix=".detections.parquet").name == "video.detections.parquet"
    folder = tmp_path / "photos"
    folder.mkdir()
    assert default_output_path(folder) == tmp_path / "photos.detections.csv"
    assert default_output_path(f"{folder}{os.sep}") == tmp_path / "photos.detections.csv"


def test_default_output_path_for_urls_is_sanitized_in_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = default_output_path("rtsp://admin:secret@cam1.local:554/live/main?token=abc")
    assert out.parent == Path.cwd()
    assert out.name == "cam1.local_554_live_main.detections.csv"
    assert "secret" not in str(out) and "token" not in str(out)
    assert default_output_path("/dev/video0") == Path.cwd() / "video0.detections.csv"
    assert default_output_path("http://[::1]/").name == "1.detections.csv"


def test_write_of_empty_batch_is_a_no_op(tmp_path):
    sink = TableSink(tmp_path / "e.csv")
    sink.write([])
    sink.write([make_result(0, [], [], [])])
    sink.close()
    assert sink.stats["frames"] == 1 and sink.stats["batches"] == 1
