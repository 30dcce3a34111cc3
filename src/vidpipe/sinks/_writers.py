"""Row encoders of the detection table: CSV, JSON Lines and Parquet.

Each writer turns :class:`~vidpipe.sinks._host.HostRows` into rows of the fixed columns
(:data:`COLUMNS`, plus :data:`TRACK_COLUMN` when tracking, plus :data:`CAPTURE_COLUMNS` for live
sources) and writes them to an already open file; :class:`~vidpipe.sinks.table.TableSink` owns
the file (and the rename of a temporary one).
"""

from __future__ import annotations

import csv
import io
import json
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timezone
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vidpipe.sinks._host import HostRows
    from vidpipe.types import FrameResult

__all__ = [
    "COLUMNS", "TRACK_COLUMN", "CAPTURE_COLUMNS", "COLUMN_TYPES", "TableWriter", "make_writer", "writer_class",
    "format_utc",
]

#: The columns of every detection table, in this order.
COLUMNS: tuple[str, ...] = (
    "source", "frame", "pts", "class_id", "class_name", "confidence", "x1", "y1", "x2", "y2",
)
#: Appended after :data:`COLUMNS` when tracking is on.
TRACK_COLUMN = "track_id"
#: Appended last for live sources: the frame's capture time and its capture-to-row latency.
CAPTURE_COLUMNS: tuple[str, ...] = ("captured_at", "latency_ms")
#: Logical type of each column (Parquet uses exactly these; CSV/JSONL values follow them).
COLUMN_TYPES: dict[str, str] = {
    "source": "string",
    "frame": "int64",
    "pts": "float64, null when unknown",
    "class_id": "int64",
    "class_name": "string",
    "confidence": "float32",
    "x1": "float32",
    "y1": "float32",
    "x2": "float32",
    "y2": "float32",
    "track_id": "int64, null when the detection is not tracked",
    "captured_at": "UTC time the frame was received, ISO 8601 with milliseconds (2026-11-26T10:15:02.123Z; "
    "Parquet: timestamp[ms, UTC]), null when unknown",
    "latency_ms": "float64 milliseconds from the frame's receipt to its row being written, null when unknown",
}
#: Decimals of the text formats (CSV, JSONL): seconds to the microsecond, boxes to 1/100 pixel.
PTS_DECIMALS, CONF_DECIMALS, BOX_DECIMALS = 6, 4, 2

NamesFor = Callable[["FrameResult"], Sequence[str]]
#: the ``source`` column of a location (credentials masked)
SourceOf = Callable[[str], str]


def format_utc(seconds: float) -> str:
    """UTC epoch seconds as ISO 8601 with milliseconds (rounded, as Parquet's ms timestamps) and a
    ``Z``: ``2026-11-26T10:15:02.123Z``."""
    ms = int(round(seconds * 1000))
    t = datetime.fromtimestamp(ms // 1000, timezone.utc).replace(microsecond=(ms % 1000) * 1000)
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _latency_ms(captured_mono: float | None, now: float) -> float | None:
    return None if captured_mono is None else (now - captured_mono) * 1000.0


def _pts(meta_pts: float | None) -> float | None:
    return meta_pts if meta_pts is not None and math.isfinite(meta_pts) else None


def _class_name(names: Sequence[str], class_id: int) -> str:
    return names[class_id] if 0 <= class_id < len(names) else str(class_id)


def _iter_rows(
    rows: "HostRows", names_for: NamesFor, source_of: SourceOf, *, tracking: bool, capture: bool
) -> Iterator[tuple[Any, ...]]:
    """Python tuples ``(source, frame, pts|None, class_id, class_name, conf, x1, y1, x2, y2
    [, track|None][, captured_at epoch s|None, latency ms|None])``."""
    boxes, scores, ids = rows.boxes.tolist(), rows.scores.tolist(), rows.class_ids.tolist()
    tracks = None
    if tracking and rows.track_ids is not None and rows.track_valid is not None:
        tracks = [t if v else None for t, v in zip(rows.track_ids.tolist(), rows.track_valid.tolist())]
    now = time.monotonic()
    start = 0
    for result, count in zip(rows.results, rows.counts.tolist()):
        if not count:
            continue
        meta, names = result.meta, names_for(result)
        pts, source = _pts(meta.pts), source_of(meta.source)
        tail: tuple[Any, ...] = ()
        if capture:
            tail = (meta.captured_at, _latency_ms(meta.captured_mono, now))
        for j in range(start, start + count):
            row = (source, meta.index, pts, ids[j], _class_name(names, ids[j]), scores[j], *boxes[j])
            if tracking:
                row = (*row, None if tracks is None else tracks[j])
            yield row + tail
        start += count


class TableWriter(ABC):
    """Encodes rows into an open file; :meth:`finish` flushes what is pending (not closing the file)."""

    binary: bool = False

    def __init__(
        self, fileobj: IO[Any], columns: Sequence[str], *, row_group_size: int, source_of: SourceOf = str
    ) -> None:
        self.fileobj = fileobj
        self.columns = tuple(columns)
        self.tracking = TRACK_COLUMN in self.columns
        self.capture = CAPTURE_COLUMNS[0] in self.columns
        self.row_group_size = row_group_size
        self.source_of = source_of

    def _rows(self, rows: "HostRows", names_for: NamesFor) -> Iterator[tuple[Any, ...]]:
        return _iter_rows(rows, names_for, self.source_of, tracking=self.tracking, capture=self.capture)

    @abstractmethod
    def write(self, rows: "HostRows", names_for: NamesFor) -> None: ...

    def finish(self, metadata: dict[str, Any]) -> None:
        """Write anything buffered; ``metadata`` is embedded where the format allows it."""
        self.fileobj.flush()


class CsvWriter(TableWriter):
    """RFC 4180 CSV via the csv module, ``\\n`` line ends, a header row, fixed decimals.

    An unknown ``pts``, an untracked ``track_id`` and an unknown ``captured_at``/``latency_ms``
    are empty fields; ``latency_ms`` has one decimal.
    """

    def __init__(self, fileobj: IO[Any], columns: Sequence[str], *, header: bool = True, **kwargs: Any) -> None:
        super().__init__(fileobj, columns, **kwargs)
        if header:  # not when appending to a resumed table
            csv.writer(fileobj, lineterminator="\n").writerow(self.columns)

    def write(self, rows: "HostRows", names_for: NamesFor) -> None:
        p, c, b = PTS_DECIMALS, CONF_DECIMALS, BOX_DECIMALS

        def fmt(row: tuple[Any, ...]) -> list[Any]:
            src, frame, pts, cid, name, conf, x1, y1, x2, y2 = row[:10]
            out = [
                src, frame, "" if pts is None else f"{pts:.{p}f}", cid, name, f"{conf:.{c}f}",
                f"{x1:.{b}f}", f"{y1:.{b}f}", f"{x2:.{b}f}", f"{y2:.{b}f}",
            ]
            if self.tracking:
                out.append("" if row[10] is None else row[10])
            if self.capture:
                at, lat = row[-2:]
                out += ["" if at is None else format_utc(at), "" if lat is None else f"{lat:.1f}"]
            return out

        # One write per batch: the file only ever grows by whole rows (see TableSink).
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(fmt(r) for r in self._rows(rows, names_for))
        if buf.tell():
            self.fileobj.write(buf.getvalue())


class JsonlWriter(TableWriter):
    """One JSON object per detection and line, keys in column order, numbers rounded as in CSV."""

    def write(self, rows: "HostRows", names_for: NamesFor) -> None:
        p, c, b = PTS_DECIMALS, CONF_DECIMALS, BOX_DECIMALS
        lines = []
        for row in self._rows(rows, names_for):
            src, frame, pts, cid, name, conf, x1, y1, x2, y2 = row[:10]
            values = [
                src, frame, None if pts is None else round(pts, p), cid, name, round(conf, c),
                round(x1, b), round(y1, b), round(x2, b), round(y2, b),
            ]
            if self.tracking:
                values.append(row[10])
            if self.capture:
                at, lat = row[-2:]
                values += [None if at is None else format_utc(at), None if lat is None else round(lat, 1)]
            lines.append(json.dumps(dict(zip(self.columns, values)), ensure_ascii=False))
        if lines:
            self.fileobj.write("\n".join(lines) + "\n")


class ParquetWriter(TableWriter):
    """Parquet via ``pyarrow.parquet.ParquetWriter`` in row groups of ``row_group_size`` rows.

    Values are stored unrounded (float32 boxes and scores, float64 pts). The run metadata is
    stored in the file's key-value metadata under ``"vidpipe"`` (JSON), which pyarrow shows as
    schema metadata (``pq.read_schema(path).metadata[b"vidpipe"]``).
    """

    binary = True

    def __init__(self, fileobj: IO[Any], columns: Sequence[str], **kwargs: Any) -> None:
        super().__init__(fileobj, columns, **kwargs)
        import pyarrow as pa
        import pyarrow.parquet as pq

        types = {
            "source": pa.string(), "frame": pa.int64(), "pts": pa.float64(), "class_id": pa.int64(),
            "class_name": pa.string(), "confidence": pa.float32(), "x1": pa.float32(),
            "y1": pa.float32(), "x2": pa.float32(), "y2": pa.float32(), TRACK_COLUMN: pa.int64(),
            "captured_at": pa.timestamp("ms", tz="UTC"), "latency_ms": pa.float64(),
        }
        nullable = {"pts", TRACK_COLUMN, *CAPTURE_COLUMNS}
        self._pa = pa
        self.schema = pa.schema([pa.field(c, types[c], nullable=c in nullable) for c in self.columns])
        # store_schema=False: the plain Parquet types round-trip exactly, and the key-value
        # metadata added at finish() then shows up as the Arrow schema metadata when read.
        self._writer = pq.ParquetWriter(fileobj, self.schema, store_schema=False)
        self._pending: list[Any] = []
        self._pending_rows = 0

    def write(self, rows: "HostRows", names_for: NamesFor) -> None:
        import numpy as np

        if len(rows) == 0:
            return
        pa = self._pa
        frames = [r for r, k in zip(rows.results, rows.counts.tolist()) if k]
        counts = rows.counts[rows.counts > 0]
        sources = np.repeat(np.array([self.source_of(r.meta.source) for r in frames], dtype=object), counts)
        index = np.repeat(np.array([r.meta.index for r in frames], dtype=np.int64), counts)
        pts_list = [_pts(r.meta.pts) for r in frames]
        pts = np.repeat(np.array([math.nan if p is None else p for p in pts_list], dtype=np.float64), counts)
        ids = rows.class_ids.tolist()
        names = []
        for r, k, start in zip(frames, counts.tolist(), np.cumsum(counts) - counts):
            table = names_for(r)
            names.extend(_class_name(table, i) for i in ids[start : start + k])
        arrays = {
            "source": pa.array(sources, type=pa.string()),
            "frame": pa.array(index),
            "pts": pa.array(pts, mask=np.isnan(pts)),
            "class_id": pa.array(rows.class_ids),
            "class_name": pa.array(names, type=pa.string()),
            "confidence": pa.array(rows.scores),
            "x1": pa.array(rows.boxes[:, 0]),
            "y1": pa.array(rows.boxes[:, 1]),
            "x2": pa.array(rows.boxes[:, 2]),
            "y2": pa.array(rows.boxes[:, 3]),
        }
        if self.tracking:
            valid = rows.track_valid if rows.track_valid is not None else np.zeros(len(rows), bool)
            arrays[TRACK_COLUMN] = pa.array(rows.track_ids, mask=~valid)
        if self.capture:
            now = time.monotonic()
            at = [r.meta.captured_at for r in frames]
            lat = [_latency_ms(r.meta.captured_mono, now) for r in frames]
            at_ms = np.array([-1 if t is None else int(round(t * 1000)) for t in at], dtype=np.int64)
            lat_v = np.array([math.nan if v is None else v for v in lat], dtype=np.float64)
            at_ms, lat_v = np.repeat(at_ms, counts), np.repeat(lat_v, counts)
            arrays["captured_at"] = pa.array(at_ms, type=pa.timestamp("ms", tz="UTC"),
                                             mask=np.repeat(np.array([t is None for t in at]), counts))
            arrays["latency_ms"] = pa.array(lat_v, mask=np.isnan(lat_v))
        self._pending.append(pa.Table.from_arrays([arrays[c] for c in self.columns], schema=self.schema))
        self._pending_rows += len(rows)
        if self._pending_rows >= self.row_group_size:
            self._flush(final=False)

    def _flush(self, *, final: bool) -> None:
        if not self._pending_rows:
            return
        table = self._pa.concat_tables(self._pending)
        full = len(table) if final else len(table) - len(table) % self.row_group_size
        if full:
            self._writer.write_table(table.slice(0, full), row_group_size=self.row_group_size)
        rest = table.slice(full)
        self._pending = [rest] if len(rest) else []
        self._pending_rows = len(rest)

    def finish(self, metadata: dict[str, Any]) -> None:
        self._flush(final=True)
        add = getattr(self._writer, "add_key_value_metadata", None)  # pyarrow >= 13
        if add is not None:
            add({"vidpipe": json.dumps(metadata, ensure_ascii=False)})
        self._writer.close()
        self.fileobj.flush()


_WRITERS: dict[str, type[TableWriter]] = {"csv": CsvWriter, "jsonl": JsonlWriter, "parquet": ParquetWriter}


def writer_class(format: str) -> type[TableWriter]:
    return _WRITERS[format]


def make_writer(
    format: str, fileobj: IO[Any], columns: Sequence[str], *, row_group_size: int, source_of: SourceOf = str,
    header: bool = True,
) -> TableWriter:
    """``header=False``: CSV without its header row (appending to a resumed table)."""
    extra: dict[str, Any] = {} if format != "csv" else {"header": header}
    return _WRITERS[format](fileobj, columns, row_group_size=row_group_size, source_of=source_of, **extra)
