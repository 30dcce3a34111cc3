"""Row encoders of the events table: CSV, JSON Lines and Parquet (one row per
:class:`~vidpipe.stages.Event`, columns :data:`EVENT_COLUMNS`).

Values follow the detection tables' conventions (:mod:`vidpipe.sinks._writers`): ``pts`` in seconds
(6 decimals in text), ``time`` as UTC ISO 8601 with milliseconds and ``Z`` in CSV/JSONL and
``timestamp[ms, UTC]`` in Parquet, unknown values empty (CSV) or null.
"""

from __future__ import annotations

import csv
import io
import json
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any

from vidpipe.sinks._writers import PTS_DECIMALS, format_utc

if TYPE_CHECKING:
    from vidpipe.stages.base import Event

__all__ = ["EVENT_COLUMNS", "EVENT_COLUMN_TYPES", "EventWriter", "make_event_writer", "event_writer_class"]

#: The columns of every events table, in this order: every field of :class:`~vidpipe.stages.Event`.
EVENT_COLUMNS: tuple[str, ...] = (
    "kind", "name", "stream_id", "source", "frame", "pts", "time", "track_id", "class_id", "class_name",
    "direction", "dwell_s",
)
EVENT_COLUMN_TYPES: dict[str, str] = {
    "kind": "string: enter | leave (a zone), cross (a line), dwell (in a zone longer than its threshold)",
    "name": "string: the zone's or line's name",
    "stream_id": "int64: the input's stream id (its position among the run's inputs)",
    "source": "string: the input (credentials masked)",
    "frame": "int64: the frame's index in its stream (as in the detections table)",
    "pts": "float64 seconds in the stream, null when unknown",
    "time": "UTC time of the event, ISO 8601 with milliseconds (2026-11-26T10:15:02.123Z; Parquet: "
    "timestamp[ms, UTC]): a live frame's capture time, else when its result was made",
    "track_id": "int64",
    "class_id": "int64",
    "class_name": "string",
    "direction": "string in | out for cross events, else null",
    "dwell_s": "float64 seconds in the zone (dwell and leave events), else null",
}


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _utc(t: float | None) -> str | None:
    t = _finite(t)
    return None if t is None else format_utc(t)


def _ms(t: float | None) -> int | None:
    t = _finite(t)
    return None if t is None else int(round(t * 1000))


def _row(e: "Event", source_of: Any) -> list[Any]:
    """The row of ``e`` in column order, text-format values (``time`` as ISO, rounded floats)."""
    pts, dwell = _finite(e.pts), _finite(e.dwell_s)
    return [
        e.kind, e.name, int(e.stream_id), source_of(e.source), int(e.frame),
        None if pts is None else round(pts, PTS_DECIMALS), _utc(e.time), int(e.track_id), int(e.class_id),
        e.class_name, e.direction, None if dwell is None else round(dwell, 3),
    ]


class EventWriter(ABC):
    """Encodes events into an open file; :meth:`finish` flushes what is pending (not closing it)."""

    binary: bool = False

    def __init__(self, fileobj: IO[Any], *, row_group_size: int, source_of: Any = str) -> None:
        self.fileobj = fileobj
        self.row_group_size = row_group_size
        self.source_of = source_of

    @abstractmethod
    def write(self, events: Sequence["Event"]) -> None: ...

    def finish(self, metadata: dict[str, Any]) -> None:
        self.fileobj.flush()


class CsvEventWriter(EventWriter):
    """RFC 4180 CSV, ``\\n`` line ends, a header row; null values are empty fields."""

    def __init__(self, fileobj: IO[Any], **kwargs: Any) -> None:
        super().__init__(fileobj, **kwargs)
        csv.writer(fileobj, lineterminator="\n").writerow(EVENT_COLUMNS)

    def write(self, events: Sequence["Event"]) -> None:
        buf = io.StringIO()  # one write per batch: the file only grows by whole rows
        w = csv.writer(buf, lineterminator="\n")
        for e in events:
            w.writerow(["" if v is None else (f"{v:.{PTS_DECIMALS}f}" if i == 5 else v)
                        for i, v in enumerate(_row(e, self.source_of))])
        if buf.tell():
            self.fileobj.write(buf.getvalue())


class JsonlEventWriter(EventWriter):
    """One JSON object per event and line, keys in column order."""

    def write(self, events: Sequence["Event"]) -> None:
        lines = [json.dumps(dict(zip(EVENT_COLUMNS, _row(e, self.source_of))), ensure_ascii=False) for e in events]
        if lines:
            self.fileobj.write("\n".join(lines) + "\n")


class ParquetEventWriter(EventWriter):
    """Parquet via ``pyarrow.parquet.ParquetWriter`` in row groups of ``row_group_size`` events;
    values unrounded; the run metadata in the key-value metadata under ``"vidpipe"``."""

    binary = True

    def __init__(self, fileobj: IO[Any], **kwargs: Any) -> None:
        super().__init__(fileobj, **kwargs)
        import pyarrow as pa
        import pyarrow.parquet as pq

        types = {
            "kind": pa.string(), "name": pa.string(), "stream_id": pa.int64(), "source": pa.string(),
            "frame": pa.int64(), "pts": pa.float64(), "time": pa.timestamp("ms", tz="UTC"),
            "track_id": pa.int64(), "class_id": pa.int64(), "class_name": pa.string(),
            "direction": pa.string(), "dwell_s": pa.float64(),
        }
        nullable = {"pts", "time", "direction", "dwell_s"}
        self._pa = pa
        self.schema = pa.schema([pa.field(c, types[c], nullable=c in nullable) for c in EVENT_COLUMNS])
        self._writer = pq.ParquetWriter(fileobj, self.schema, store_schema=False)
        self._pending: list[dict[str, Any]] = []

    def write(self, events: Sequence["Event"]) -> None:
        for e in events:
            self._pending.append({
                "kind": e.kind, "name": e.name, "stream_id": int(e.stream_id), "source": self.source_of(e.source),
                "frame": int(e.frame), "pts": _finite(e.pts), "time": _ms(e.time),
                "track_id": int(e.track_id), "class_id": int(e.class_id), "class_name": e.class_name,
                "direction": e.direction, "dwell_s": _finite(e.dwell_s),
            })
        if len(self._pending) >= self.row_group_size:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            table = self._pa.Table.from_pylist(self._pending, schema=self.schema)
            self._writer.write_table(table, row_group_size=self.row_group_size)
            self._pending = []

    def finish(self, metadata: dict[str, Any]) -> None:
        self._flush()
        add = getattr(self._writer, "add_key_value_metadata", None)  # pyarrow >= 13
        if add is not None:
            add({"vidpipe": json.dumps(metadata, ensure_ascii=False)})
        self._writer.close()
        self.fileobj.flush()


_WRITERS: dict[str, type[EventWriter]] = {
    "csv": CsvEventWriter, "jsonl": JsonlEventWriter, "parquet": ParquetEventWriter,
}


def event_writer_class(format: str) -> type[EventWriter]:
    return _WRITERS[format]


def make_event_writer(format: str, fileobj: IO[Any], *, row_group_size: int, source_of: Any = str) -> EventWriter:
    return _WRITERS[format](fileobj, row_group_size=row_group_size, source_of=source_of)
