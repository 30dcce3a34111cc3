"""The events table: one row per :class:`~vidpipe.stages.Event` (zone entered or left, line
crossed, dwell over a threshold), in CSV, JSON Lines or Parquet, beside the detections.

It is written like the detection tables (:mod:`vidpipe.sinks.table`): CSV/JSONL under their real
name, one whole batch of rows per write, flushed to the OS before :meth:`EventTableSink.write`
returns (readable during the run, valid after any stop, even SIGKILL); Parquet to a hidden
temporary file renamed into place at the end; a ``<events table>.meta.json`` sidecar (replaced
atomically) saying ``"status": "running"`` during the run, then ``complete``/``partial``/``failed``
with the run summary, the number of events per kind and the columns' types. Columns:
:data:`~vidpipe.events._writers.EVENT_COLUMNS` (every field of the Event). ``source`` never
carries credentials. :class:`RotatingEventTableSink` writes one table per hour.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

from vidpipe._validate import check_range
from vidpipe.errors import SinkError
from vidpipe.events._writers import EVENT_COLUMN_TYPES, EVENT_COLUMNS, event_writer_class, make_event_writer
from vidpipe.sinks import _atomic
from vidpipe.sinks.base import Sink
from vidpipe.sinks.paths import table_format
from vidpipe.sinks.rotate import RotatingTableSink
from vidpipe.sinks.table import metadata_path, outcome, running, sealed
from vidpipe.sources.redact import redact_url
from vidpipe.summary import vidpipe_version

if TYPE_CHECKING:
    from vidpipe.stages.base import Event
    from vidpipe.summary import RunSummary
    from vidpipe.types import FrameResult

logger = logging.getLogger(__name__)

__all__ = ["EventTableSink", "RotatingEventTableSink", "events_of"]


def events_of(results: Sequence["FrameResult"]) -> list["Event"]:
    """The events of a batch of results, in the batch's order (frame by frame)."""
    return [e for r in results for e in r.events]


class EventTableSink(Sink):
    """Writes one row per event of the results it is given (see the module docstring).

    Args:
        path: the table file (``.csv``, ``.jsonl``/``.ndjson``, ``.parquet``/``.pq``); its folder
            is created if missing.
        format: ``"auto"`` (by extension), ``"csv"``, ``"jsonl"`` or ``"parquet"``.
        row_group_size: Parquet rows per row group.
        metadata: write the ``<path>.meta.json`` sidecar.
        extra_metadata: more JSON-safe keys for the metadata (a rotated file's period).

    Raises:
        ConfigError: unknown format or extension.
        SinkError: the path is a folder, or cannot be written.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        format: Literal["auto", "csv", "jsonl", "parquet"] = "auto",
        row_group_size: int = 65536,
        metadata: bool = True,
        extra_metadata: dict[str, Any] | None = None,
        **_ignored: Any,  # detection-table options a rotating wrapper passes on (names, tracking, ...)
    ) -> None:
        super().__init__()
        self.format = table_format(path, format)
        self.row_group_size = check_range("row_group_size", row_group_size, low=1, integer=True)
        self.write_metadata = bool(metadata)
        self._extra_metadata = dict(extra_metadata or {})
        self.frames = 0
        self.rows = 0
        self._kinds: dict[str, int] = {}
        self._per_source: dict[str, int] = {}
        self._source_names: dict[str, str] = {}
        self.path = _atomic.prepare_target(path)
        self.temp_path: Path | None = None
        self.live = self.format != "parquet"
        if self.live:
            self._file: IO[Any] = _atomic.open_live(self.path)
        else:
            self.temp_path, self._file = _atomic.open_temp(self.path, binary=event_writer_class(self.format).binary)
        try:
            self._writer = make_event_writer(
                self.format, self._file, row_group_size=self.row_group_size, source_of=self._source_name
            )
            self._file.flush()
            if self.write_metadata:
                _atomic.write_json_atomic(self.metadata_path, self._running_metadata())
        except Exception as exc:
            _atomic.discard(self._file, self.temp_path if self.temp_path is not None else self.path)
            if isinstance(exc, SinkError):
                raise
            raise SinkError(f"cannot write events table {str(self.path)!r}: {exc}") from exc

    def __repr__(self) -> str:
        return f"EventTableSink({str(self.path)!r}, format={self.format!r}, state={self.state!r})"

    def _source_name(self, location: str) -> str:
        name = self._source_names.get(location)
        if name is None:
            name = self._source_names[location] = redact_url(location)
        return name

    @property
    def outputs(self) -> tuple[str, ...]:
        return (str(self.path),)

    @property
    def metadata_path(self) -> Path:
        return metadata_path(self.path)

    @property
    def stats(self) -> dict[str, Any]:
        """``{"path", "written": events written, "by_kind": {kind: count}}``."""
        return {"path": str(self.path), "written": self.rows, "by_kind": dict(self._kinds)}

    def write(self, results: Sequence["FrameResult"]) -> None:
        """Append the events of a batch of results (CSV/JSONL rows reach the OS before this
        returns; Parquet rows are buffered into row groups)."""
        self._check_open()
        if not results:
            return
        events = events_of(results)
        if events:
            try:
                self._writer.write(events)
                self._file.flush()
            except OSError as exc:
                raise SinkError(f"cannot write events table {str(self.path)!r}: {exc.strerror or exc}") from exc
            for e in events:
                self._kinds[e.kind] = self._kinds.get(e.kind, 0) + 1
                src = self._source_name(e.source)
                self._per_source[src] = self._per_source.get(src, 0) + 1
        self.frames += len(results)
        self.rows += len(events)

    def _running_metadata(self) -> dict[str, Any]:
        return running(self.metadata(None, complete=False), self.temp_path)

    def metadata(
        self, summary: "RunSummary | None" = None, *, complete: bool = True, reason: str | None = None
    ) -> dict[str, Any]:
        """The sidecar's content (JSON-safe, credentials masked); status as for detection tables."""
        status, reason = outcome(summary, complete=complete, reason=reason)
        meta = {
            "vidpipe_version": vidpipe_version(),
            "path": str(self.path),
            "format": self.format,
            "columns": list(EVENT_COLUMNS),
            "column_types": dict(EVENT_COLUMN_TYPES),
            "rows_are": "one row per event (zone entered or left, line crossed, dwell over a threshold), "
            "in the order the run's stages emitted them",
            "finished": True,
            "complete": status == "complete",
            "status": status,
            "reason": reason,
            "frames": self.frames,
            "events": self.rows,
            "by_kind": dict(self._kinds),
            "sources": [{"source": s, "events": n} for s, n in self._per_source.items()],
            "written_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "summary": None if summary is None else summary.to_dict(),
        }
        return sealed(meta, self._extra_metadata, summary)

    def _finalize(self, summary: "RunSummary | None", *, complete: bool, reason: str | None) -> None:
        meta = self.metadata(summary, complete=complete, reason=reason)
        try:
            self._writer.finish(meta)
        except Exception as exc:
            _atomic.discard(self._file, self.temp_path if self.temp_path is not None else self.path)
            raise SinkError(f"cannot finish events table {str(self.path)!r}: {exc}") from exc
        if self.temp_path is not None:
            _atomic.commit(self._file, self.temp_path, self.path)
        else:
            _atomic.close_live(self._file, self.path)
        if self.write_metadata:
            _atomic.write_json_atomic(self.metadata_path, meta)
        if meta["status"] == "complete":
            logger.info("wrote %d events to %s", self.rows, self.path)
        else:
            logger.warning("events table %s marked %s (%s): %d events", self.path, meta["status"], meta["reason"],
                           self.rows)


class RotatingEventTableSink(RotatingTableSink):
    """An :class:`EventTableSink` per hour, like :class:`~vidpipe.sinks.rotate.RotatingTableSink`
    (``events.csv`` -> ``events-2026-11-26T10.csv``; by capture time for live sources, else the
    wall clock; each hour's file final as soon as the next hour's first result arrives)."""

    table_class = EventTableSink

    @property
    def stats(self) -> dict[str, Any]:
        return {"path": str(self.path), "files": list(self.outputs), "written": self.rows}
