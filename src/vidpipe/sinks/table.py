"""Detection tables: CSV, JSON Lines or Parquet, one row per detection.

Columns, always in this order: ``source, frame, pts, class_id, class_name, confidence, x1, y1,
x2, y2`` (+ ``track_id`` when tracking), boxes in source pixels. A frame without detections has
no row; the number of frames seen (per source) is in the metadata.

Crash safety: rows go to a hidden temporary file next to the target (``.dets.csv.tmp-<pid>``),
written in chunks as batches arrive (Parquet: row groups). :meth:`TableSink.close` (or
:meth:`~vidpipe.sinks.base.Sink.abort`) flushes, fsyncs and renames it over the target in one
atomic step, so the target path holds either the previous file or a complete new one.
An aborted run (error, Ctrl-C) also renames its rows into place - a valid file of what was
written, marked partial in its metadata - replacing a previous run's output of the same name.
A process killed outright (SIGKILL, power loss) leaves the target untouched and a stale
temporary file beside it.

Metadata: ``<output>.meta.json`` (written atomically after the table) holds the vidpipe
version, format, columns and types, ``complete`` (False after an abort, with ``reason``), the
number of frames and rows per source, host-transfer stats and the :class:`RunSummary` given to
``close``/``abort``. Parquet files also embed the same JSON in their key-value metadata under
``"vidpipe"``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from vidpipe._validate import check_range
from vidpipe.errors import SinkError
from vidpipe.sinks import _atomic
from vidpipe.sinks._host import to_host
from vidpipe.sinks._writers import COLUMN_TYPES, COLUMNS, TRACK_COLUMN, make_writer, writer_class
from vidpipe.sinks.base import Sink
from vidpipe.sinks.paths import table_format
from vidpipe.summary import jsonable, vidpipe_version

if TYPE_CHECKING:
    from vidpipe.summary import RunSummary
    from vidpipe.types import FrameResult

logger = logging.getLogger(__name__)

#: what the ``frame`` and ``pts`` columns mean (stored in the metadata as ``frame_is``)
FRAME_NUMBERING = (
    "frame: the frame's position in presentation order within the selected range, 0 = the first "
    "frame at or after --start (the first frame of the video without it), counting the frames "
    "--frame-skip leaves out (kept: 0, N, 2N, ...); FFmpeg's n, as `ffmpeg -ss START -i VIDEO` "
    "numbers frames; never derived from timestamps. pts: presentation time in seconds"
)

__all__ = ["TableSink", "metadata_path"]

TableFormat = Literal["auto", "csv", "jsonl", "parquet"]


def metadata_path(path: str | os.PathLike[str]) -> Path:
    """The sidecar metadata file of an output: ``dets.csv`` -> ``dets.csv.meta.json``."""
    p = Path(path)
    return p.with_name(p.name + ".meta.json")


class TableSink(Sink):
    """Writes one row per detection to ``path`` (CSV, JSONL or Parquet).

    Args:
        path: the output file; its directory is created if missing.
        format: ``"auto"`` picks by extension (``.csv``, ``.jsonl``/``.ndjson``, ``.parquet``/``.pq``).
        names: class names by class id; when empty, each result's own ``names`` are used, and an
            id without a name is written as its number.
        tracking: add the ``track_id`` column (null for untracked detections).
        row_group_size: Parquet rows per row group (rows are buffered until a group is full).
        metadata: write the ``<output>.meta.json`` sidecar.

    Raises:
        ConfigError: unknown format or extension.
        SinkError: the target is a directory, or its directory cannot be created or written.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        format: TableFormat = "auto",
        names: Sequence[str] = (),
        tracking: bool = False,
        row_group_size: int = 65536,
        metadata: bool = True,
    ) -> None:
        super().__init__()
        self.format = table_format(path, format)
        self.row_group_size = check_range("row_group_size", row_group_size, low=1, integer=True)
        self.names = tuple(str(n) for n in names)
        self.tracking = bool(tracking)
        self.columns: tuple[str, ...] = COLUMNS + ((TRACK_COLUMN,) if self.tracking else ())
        self.write_metadata = bool(metadata)
        self.path = _atomic.prepare_target(path)
        self.frames = 0
        self.rows = 0
        self._per_source: dict[str, list[int]] = {}
        self._d2h_copies = 0
        self._d2h_bytes = 0
        self._batches = 0
        binary = writer_class(self.format).binary
        self.temp_path, self._file = _atomic.open_temp(self.path, binary=binary)
        try:
            self._writer = make_writer(self.format, self._file, self.columns, row_group_size=self.row_group_size)
        except Exception as exc:
            _atomic.discard(self._file, self.temp_path)
            raise SinkError(f"cannot write output {str(self.path)!r}: {exc}") from exc
        logger.debug("writing %s to %s (temporary %s)", self.format, self.path, self.temp_path.name)

    def __repr__(self) -> str:
        return f"TableSink({str(self.path)!r}, format={self.format!r}, state={self.state!r})"

    @property
    def outputs(self) -> tuple[str, ...]:
        return (str(self.path),)

    @property
    def metadata_path(self) -> Path:
        return metadata_path(self.path)

    @property
    def stats(self) -> dict[str, Any]:
        """Counters: frames, rows, batches, device->host copies and bytes (total and per frame)."""
        return {
            "frames": self.frames,
            "rows": self.rows,
            "batches": self._batches,
            "d2h_copies": self._d2h_copies,
            "d2h_bytes": self._d2h_bytes,
            "d2h_bytes_per_frame": self._d2h_bytes / self.frames if self.frames else 0.0,
        }

    def _names_for(self, result: "FrameResult") -> Sequence[str]:
        return self.names or result.names

    def write(self, results: Sequence["FrameResult"]) -> None:
        """Append the detections of a batch of frames (one device->host copy per batch).

        Frames without detections add no row but are counted in the metadata.
        """
        self._check_open()
        if not results:
            return
        rows = to_host(results, tracks=self.tracking)
        try:
            self._writer.write(rows, self._names_for)
            self._file.flush()  # each batch reaches the OS: bounded memory, visible progress
        except OSError as exc:
            raise SinkError(f"cannot write output {str(self.path)!r}: {exc.strerror or exc}") from exc
        self._batches += 1
        self.frames += len(results)
        self.rows += len(rows)
        self._d2h_copies += rows.d2h_copies
        self._d2h_bytes += rows.d2h_bytes
        for result, count in zip(results, rows.counts.tolist()):
            entry = self._per_source.setdefault(result.meta.source, [0, 0])
            entry[0] += 1
            entry[1] += count

    def metadata(
        self, summary: "RunSummary | None" = None, *, complete: bool = True, reason: str | None = None
    ) -> dict[str, Any]:
        """The metadata dict stored in the sidecar (and in Parquet files), JSON-safe."""
        return {
            "vidpipe_version": vidpipe_version(),
            "path": str(self.path),
            "format": self.format,
            "columns": list(self.columns),
            "column_types": {c: COLUMN_TYPES[c] for c in self.columns},
            "rows_are": "one row per detection; frames without detections have no row",
            "frame_is": FRAME_NUMBERING,
            "complete": complete,
            "status": "complete" if complete else "partial",
            "reason": reason,
            "frames": self.frames,
            "rows": self.rows,
            "sources": [{"source": s, "frames": f, "rows": r} for s, (f, r) in self._per_source.items()],
            "stats": jsonable(self.stats),
            "written_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "summary": None if summary is None else summary.to_dict(),
        }

    def _finalize(self, summary: "RunSummary | None", *, complete: bool, reason: str | None) -> None:
        meta = self.metadata(summary, complete=complete, reason=reason)
        try:
            self._writer.finish(meta)
        except Exception as exc:
            _atomic.discard(self._file, self.temp_path)
            raise SinkError(f"cannot finish output {str(self.path)!r}: {exc}") from exc
        _atomic.commit(self._file, self.temp_path, self.path)
        if self.write_metadata:
            _atomic.write_json_atomic(self.metadata_path, meta)
        if complete:
            logger.info("wrote %d detections of %d frames to %s", self.rows, self.frames, self.path)
        else:
            logger.warning(
                "output %s is partial (%s): %d detections of %d frames", self.path, reason, self.rows, self.frames
            )
