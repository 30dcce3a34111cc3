"""The events table: every Event field, CSV/JSONL/Parquet read back by other readers (csv, json,
pyarrow, pandas-free), live flushing, atomic Parquet, the metadata, hourly rotation, redaction."""

from __future__ import annotations

import csv
import json
import os
from datetime import datetime, timezone

import pytest

from events.event_helpers import make_event, result_with
from vidpipe.errors import ConfigError
from vidpipe.events import EVENT_COLUMNS, EventTableSink, RotatingEventTableSink, events_path
from vidpipe.sinks import metadata_path


def _iso(t: float) -> str:
    return datetime.fromtimestamp(round(t, 3), timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _batch():
    cross = make_event(0, kind="cross", direction="out")
    enter = make_event(1, kind="enter", stream_id=1, source="rtsp://admin:hunter2@cam/live")
    leave = make_event(2, kind="leave", pts=None)
    return [result_with([cross, enter], index=0), result_with([], index=1), result_with([leave], index=2)]


def test_columns_are_every_event_field():
    from vidpipe.stages import Event

    assert EVENT_COLUMNS == tuple(Event.__dataclass_fields__)


def test_csv_rows_live_then_complete(tmp_path):
    path = tmp_path / "out" / "run.events.csv"
    sink = EventTableSink(path)
    assert json.loads(metadata_path(path).read_text())["status"] == "running"
    batch = _batch()
    sink.write(batch[:1])
    # flushed to the OS with the write: a reader sees the rows during the run
    rows = list(csv.DictReader(path.open(newline="")))
    assert [r["kind"] for r in rows] == ["cross", "enter"]
    sink.write(batch[1:])
    sink.close()
    rows = list(csv.DictReader(path.open(newline="")))
    assert list(rows[0]) == list(EVENT_COLUMNS)
    cross, enter, leave = rows
    assert cross == {
        "kind": "cross", "name": "door", "stream_id": "0", "source": "cam.mp4", "frame": "0", "pts": "0.000000",
        "time": _iso(1_764_151_502.123), "track_id": "7", "class_id": "0", "class_name": "person",
        "direction": "out", "dwell_s": "",
    }
    assert enter["source"] == "rtsp://***@cam/live" and enter["stream_id"] == "1"
    assert leave["pts"] == "" and leave["dwell_s"] == "2.5" and leave["direction"] == ""
    meta = json.loads(metadata_path(path).read_text())
    assert meta["status"] == "complete" and meta["events"] == 3 and meta["frames"] == 3
    assert meta["by_kind"] == {"cross": 1, "enter": 1, "leave": 1}
    assert "hunter2" not in path.read_text() + metadata_path(path).read_text()


def test_jsonl_values(tmp_path):
    path = tmp_path / "e.jsonl"
    with EventTableSink(path) as sink:
        sink.write(_batch())
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [list(x) for x in lines] == [list(EVENT_COLUMNS)] * 3
    assert lines[0]["pts"] == 0.0 and lines[0]["direction"] == "out" and lines[0]["dwell_s"] is None
    assert lines[2]["pts"] is None and lines[2]["dwell_s"] == 2.5 and lines[2]["time"] == _iso(1_764_151_504.123)


def test_parquet_atomic_and_typed(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "e.parquet"
    sink = EventTableSink(path, row_group_size=2)
    sink.write(_batch())
    assert not path.exists()  # only a temporary file until the footer is written
    sink.close()
    table = pq.read_table(path)
    assert table.column_names == list(EVENT_COLUMNS)
    assert table.schema.field("time").type == pa.timestamp("ms", tz="UTC")
    rows = table.to_pylist()
    assert [r["kind"] for r in rows] == ["cross", "enter", "leave"]
    assert rows[0]["time"].timestamp() == pytest.approx(1_764_151_502.123, abs=1e-3)
    assert rows[2]["pts"] is None and rows[2]["dwell_s"] == 2.5 and rows[1]["source"] == "rtsp://***@cam/live"
    meta = json.loads(pq.read_schema(path).metadata[b"vidpipe"])
    assert meta["events"] == 3 and meta["status"] == "complete"
    assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]


def test_abort_marks_partial_and_keeps_rows(tmp_path):
    path = tmp_path / "e.csv"
    with pytest.raises(KeyboardInterrupt):
        with EventTableSink(path) as sink:
            sink.write(_batch())
            raise KeyboardInterrupt
    meta = json.loads(metadata_path(path).read_text())
    assert meta["status"] == "partial" and "KeyboardInterrupt" in meta["reason"]
    assert len(path.read_text().splitlines()) == 4


def test_hourly_rotation_by_capture_time(tmp_path):
    hour = 1_764_151_200.0  # 2025-11-26T10:00:00Z
    sink = RotatingEventTableSink(tmp_path / "e.events.csv", rotate="hourly", capture_times=True)
    sink.write([result_with([make_event(0, time=hour + 10)], captured_at=hour + 10)])
    sink.write([result_with([make_event(1, time=hour + 3700)], captured_at=hour + 3700)])
    first = tmp_path / "e.events-2025-11-26T10.csv"
    assert json.loads(metadata_path(first).read_text())["status"] == "complete"  # final once the next hour began
    sink.close()
    second = tmp_path / "e.events-2025-11-26T11.csv"
    assert [len(p.read_text().splitlines()) for p in (first, second)] == [2, 2]
    assert sink.outputs == (str(first), str(second)) and sink.rows == 2


def test_events_path_beside_detections():
    assert events_path("a/video.detections.csv").as_posix() == "a/video.events.csv"
    assert events_path("dets.parquet").as_posix() == "dets.events.parquet"
    assert events_path("x.detections-2.jsonl").as_posix() == "x.events-2.jsonl"


def test_bad_extension_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="extension"):
        EventTableSink(tmp_path / "e.txt")
