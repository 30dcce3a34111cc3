"""Detection tables: CSV, JSON Lines or Parquet, one row per detection.

Columns, always in this order: ``source, frame, pts, class_id, class_name, confidence, x1, y1,
x2, y2`` (+ ``track_id`` when tracking; + ``captured_at, latency_ms`` with ``capture_times``, for
live sources), boxes in source pixels. A frame without detections has no row; the number of
frames seen (per source) is in the metadata. ``source`` never carries credentials: a URL's user
and password are written as ``***`` (as are every string of the metadata).

Live sources: every ``write()`` of CSV/JSONL reaches the file (the OS) before it returns, so a
reader sees each batch as soon as it is detected and a SIGKILL loses no row already written;
the pipeline delivers a live stream's results within its batch deadline (well under a second),
which bounds what a kill can lose. ``captured_at`` is the UTC time the frame was received (ISO
8601 with milliseconds, ``Z``); ``latency_ms`` the time from then to its row being written.

Live, crash-safe files (what a reader sees, and what a crash leaves):

- **CSV and JSON Lines** are written under their real name from the start, one whole batch of
  rows per ``write()`` (a single write of complete lines, flushed to the OS at once), so the file
  is readable while the run goes on and always ends at a row boundary: Ctrl-C, an error or a
  killed process (SIGKILL) leave a valid file of every row written so far. Such a file replaces
  a previous output of the same name when the run starts.
- **Parquet** cannot be read before its footer is written (so it is not readable while a live
  run goes on; use CSV/JSONL, or rotation, :mod:`vidpipe.sinks.rotate`, to get complete Parquet
  files each hour), so it goes to a hidden temporary file
  next to the target (``.dets.parquet.tmp-<pid>``), in row groups as they fill;
  :meth:`TableSink.close` (or :meth:`~vidpipe.sinks.base.Sink.abort` after an error or Ctrl-C)
  writes the footer, fsyncs and renames it over the target in one atomic step. A process killed
  outright (SIGKILL, power loss) leaves the target as it was (a previous file, or none) and an
  unreadable temporary file beside it that may be deleted.

Completion is marked in the sidecar ``<output>.meta.json`` (always replaced atomically): at the
start it says ``"status": "running"`` (with the writer's ``pid``); when the sink is finalised it
says ``"finished": true`` and the run's outcome: ``"status"`` ``"complete"`` (every input read to
its end), ``"partial"`` (stopped early, or some input failed or was cut short) or ``"failed"``
(no frame of any input could be processed), with ``"complete"`` true only for the first. A file
whose metadata still says ``"running"`` after its writer died is a killed run's partial output.

Resume: the metadata's ``"resume"`` section records the run's options, its inputs and the inputs
done (``resume=`` here; :meth:`TableSink.mark_done`), so that a killed or interrupted run can be
continued from the table (:mod:`vidpipe.sinks.resume`); ``keep_bytes`` reopens a CSV/JSONL table
cut to its first ``keep_bytes`` bytes (header and kept rows) and appends to it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

from vidpipe._validate import check_range
from vidpipe.errors import ConfigError, SinkError
from vidpipe.sinks import _atomic
from vidpipe.sinks._host import to_host
from vidpipe.sinks._writers import CAPTURE_COLUMNS, COLUMN_TYPES, COLUMNS, TRACK_COLUMN, make_writer, writer_class
from vidpipe.sinks.base import Sink
from vidpipe.sinks.paths import table_format
from vidpipe.sources.redact import redact_text, redact_url
from vidpipe.summary import jsonable, redacted, vidpipe_version

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


#: Formats written live under their real name (append-only text, valid at every row boundary).
LIVE_FORMATS: tuple[str, ...] = ("csv", "jsonl")


def _outcome(summary: "RunSummary | None", *, complete: bool) -> str:
    """The metadata status of a finalised output: complete, partial or failed."""
    if not complete:
        return "partial"
    if summary is None:
        return "complete"
    status = summary.status
    if status == "ok":
        return "complete"
    if status in ("failed", "skipped"):
        return "failed"
    return "partial"


def outcome(summary: "RunSummary | None", *, complete: bool, reason: str | None) -> tuple[str, str | None]:
    """A finalised table's status (:func:`_outcome`) and its reason (a default one when it is not
    complete), credentials masked."""
    status = _outcome(summary, complete=complete)
    if reason is None and status != "complete":
        reason = "no input could be read" if status == "failed" else "some inputs failed or were cut short"
    return status, None if reason is None else redact_text(reason)


def sealed(meta: dict[str, Any], extra: Any, summary: "RunSummary | None") -> dict[str, Any]:
    """``meta`` with the caller's ``extra`` metadata and the stage reports (``"zones"``: counts)
    at the top, as in the summary; JSON-safe, credentials masked."""
    meta.update(jsonable(extra))
    if summary is not None:
        for name, report in summary.stages.items():
            meta.setdefault(name, jsonable(report))
    return redacted(meta)


def running(meta: dict[str, Any], temp_path: "Path | None") -> dict[str, Any]:
    """``meta`` marked as the sidecar of a table still being written (by this process)."""
    meta.update(status="running", finished=False, pid=os.getpid())
    if temp_path is not None:
        meta["temporary"] = str(temp_path)
    return meta


def finish_table(sink: Any, meta: dict[str, Any]) -> SinkError | None:
    """Finish ``sink``'s file (its writer's end, then the rename or the live file's close);
    on failure, a CSV/JSONL file is kept as it is (it ends at a row boundary), a Parquet
    temporary file is removed (the target is left as it was), ``meta`` says so and the error is
    returned (to raise once the metadata is written)."""
    try:
        sink._writer.finish(meta)
        if sink._stream is not None:
            pass
        elif sink.temp_path is not None:
            _atomic.commit(sink._file, sink.temp_path, sink.path)
        else:
            _atomic.close_live(sink._file, sink.path)
        return None
    except Exception as exc:  # noqa: BLE001 - returned, raised by the caller
        error = exc if isinstance(exc, SinkError) else SinkError(
            f"cannot finish output {str(sink.path)!r}: {getattr(exc, 'strerror', None) or exc}"
        )  # fmt: skip
    if sink._stream is None and getattr(error, "kept", None) is not None:
        meta["note"] = f"the table could not be renamed into place: it was left as {str(error.kept)!r}"
    elif sink._stream is None and sink.temp_path is not None:
        _atomic.discard(sink._file, sink.temp_path)
        meta["note"] = "the table could not be finished: nothing was written to its path"
    elif sink._stream is None:
        try:
            sink._file.close()
        except OSError:
            pass
    if meta.get("status") == "complete":
        meta.update(status="partial", complete=False)
    meta["reason"] = redact_text(f"{meta['reason']}; {error}" if meta.get("reason") else str(error))
    return error


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
        stream: write to this open text stream instead (e.g. ``sys.stdout``; CSV or JSONL only);
            ``path`` is then only a label, and no file or metadata is written.
        capture_times: add the ``captured_at`` and ``latency_ms`` columns (live sources; files
            and images have no capture time: null).
        extra_metadata: more JSON-safe keys for the metadata (e.g. a rotated file's period).
        resume: the ``"resume"`` metadata section (:func:`vidpipe.sinks.resume.resume_section`):
            options, inputs, inputs done; updated by :meth:`mark_done`.
        keep_bytes: CSV/JSONL: keep the first ``keep_bytes`` bytes of the existing file (its
            header and the rows kept by :func:`vidpipe.sinks.resume.plan_table`) and append;
            ``kept_rows`` is the number of rows kept (counted in the metadata's ``rows``).

    Raises:
        ConfigError: unknown format or extension, or Parquet to a stream.
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
        stream: "IO[str] | None" = None,
        capture_times: bool = False,
        extra_metadata: dict[str, Any] | None = None,
        resume: dict[str, Any] | None = None,
        keep_bytes: int | None = None,
        kept_rows: int = 0,
    ) -> None:
        super().__init__()
        self.format = table_format(path, format)
        self.row_group_size = check_range("row_group_size", row_group_size, low=1, integer=True)
        self.names = tuple(str(n) for n in names)
        self.tracking = bool(tracking)
        self.capture_times = bool(capture_times)
        self.columns: tuple[str, ...] = (
            COLUMNS + ((TRACK_COLUMN,) if self.tracking else ()) + (CAPTURE_COLUMNS if self.capture_times else ())
        )
        self._extra_metadata = dict(extra_metadata or {})
        if resume is not None:
            self._extra_metadata["resume"] = resume
        self._source_names: dict[str, str] = {}
        self.frames = 0
        self.rows = int(kept_rows)
        self._per_source: dict[str, list[int]] = {}
        self._d2h_copies = 0
        self._d2h_bytes = 0
        self._batches = 0
        self._stream = stream
        self.temp_path: Path | None = None
        self._appending = keep_bytes is not None
        self.gone = False  # the file was deleted while it was written (see write())
        if stream is not None:
            if self.format not in LIVE_FORMATS:
                raise ConfigError(f"format={self.format!r} cannot be streamed; use 'csv' or 'jsonl'")
            self.path = Path(os.fspath(path))
            self.write_metadata = False
            self.live = True
            self._file: IO[Any] = stream
        else:
            self.write_metadata = bool(metadata)
            self.path = _atomic.prepare_target(path)
            self.live = self.format in LIVE_FORMATS
            if keep_bytes is not None and not self.live:
                raise ConfigError(f"keep_bytes: format={self.format!r} cannot be appended to; use 'csv' or 'jsonl'")
            if keep_bytes is not None:
                self._file = _atomic.open_append(self.path, keep_bytes)
            elif self.live:
                self._file = _atomic.open_live(self.path)
            else:
                self.temp_path, self._file = _atomic.open_temp(self.path, binary=writer_class(self.format).binary)
        try:
            self._writer = make_writer(
                self.format, self._file, self.columns, row_group_size=self.row_group_size, source_of=self._source_name,
                header=keep_bytes is None,
            )
            self._file.flush()
            if self.write_metadata:
                _atomic.write_json_atomic(self.metadata_path, self._running_metadata())
        except Exception as exc:
            self._discard()
            if isinstance(exc, SinkError):
                raise
            raise SinkError(f"cannot write output {str(self.path)!r}: {exc}") from exc
        logger.debug("writing %s to %s%s", self.format, self.path,
                     f" (temporary {self.temp_path.name})" if self.temp_path else "")

    def _source_name(self, location: str) -> str:
        """The ``source`` column of ``location``: credentials masked (memoised per location)."""
        name = self._source_names.get(location)
        if name is None:
            name = self._source_names[location] = redact_url(location)
        return name

    def _discard(self) -> None:
        """Error path of the constructor: close and delete what was created (never a stream)."""
        if self._stream is not None:
            return
        if self.temp_path is not None:
            _atomic.discard(self._file, self.temp_path)
        elif self._appending:  # a resumed table: its kept rows stay
            self._file.close()
        else:
            _atomic.discard(self._file, self.path)

    def __repr__(self) -> str:
        return f"TableSink({str(self.path)!r}, format={self.format!r}, state={self.state!r})"

    @property
    def outputs(self) -> tuple[str, ...]:
        return () if self._stream is not None else (str(self.path),)

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

        CSV/JSONL rows reach the file (the OS) before this returns; Parquet rows are buffered
        into row groups. Frames without detections add no row but are counted in the metadata.
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
        if self._stream is None and _atomic.removed(self._file):
            self.gone = True  # nothing to finalise: no metadata is written beside a deleted file
            raise _atomic.removed_error("output", self.path, f"{self.rows + len(rows)} rows")
        self._batches += 1
        self.frames += len(results)
        self.rows += len(rows)
        self._d2h_copies += rows.d2h_copies
        self._d2h_bytes += rows.d2h_bytes
        for result, count in zip(results, rows.counts.tolist()):
            entry = self._per_source.setdefault(self._source_name(result.meta.source), [0, 0])
            entry[0] += 1
            entry[1] += count

    def mark_done(self, source: str) -> None:
        """Record in the metadata that input ``source`` (as in the ``source`` column) is done: read
        to its end, every row of it written (a resumed run skips it). No-op without ``resume``."""
        section = self._extra_metadata.get("resume")
        name = self._source_name(source)
        if section is None or name in section["done"] or self.closed:
            return
        section["done"].append(name)
        if self.write_metadata:
            try:
                _atomic.write_json_atomic(self.metadata_path, self._running_metadata())
            except SinkError as exc:  # progress only: the run goes on; finalising says what failed
                logger.warning("%s; a resume of this run would decode %s again", exc, name)

    def _running_metadata(self) -> dict[str, Any]:
        return running(self.metadata(None, complete=False), self.temp_path)

    def metadata(
        self, summary: "RunSummary | None" = None, *, complete: bool = True, reason: str | None = None
    ) -> dict[str, Any]:
        """The metadata dict stored in the sidecar (and in Parquet files), JSON-safe.

        ``complete=False`` is an aborted output; otherwise the status follows ``summary``
        (see the module docstring).
        """
        status, reason = outcome(summary, complete=complete, reason=reason)
        meta = {
            "vidpipe_version": vidpipe_version(),
            "path": str(self.path),
            "format": self.format,
            "columns": list(self.columns),
            "column_types": {c: COLUMN_TYPES[c] for c in self.columns},
            "rows_are": "one row per detection; frames without detections have no row",
            "frame_is": FRAME_NUMBERING,
            "finished": True,
            "complete": status == "complete",
            "status": status,
            "reason": reason,
            "frames": self.frames,
            "rows": self.rows,
            "sources": [{"source": s, "frames": f, "rows": r} for s, (f, r) in self._per_source.items()],
            "stats": jsonable(self.stats),
            "written_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "summary": None if summary is None else summary.to_dict(),
        }
        return sealed(meta, self._extra_metadata, summary)

    def _finalize(self, summary: "RunSummary | None", *, complete: bool, reason: str | None) -> None:
        if self.gone:  # deleted during the run (the error said so): close it, write nothing beside it
            _atomic.discard(self._file, self.temp_path) if self.temp_path is not None else self._file.close()
            return
        meta = self.metadata(summary, complete=complete, reason=reason)
        error = finish_table(self, meta)
        if self.write_metadata:
            try:
                _atomic.write_json_atomic(self.metadata_path, meta)
            except SinkError as exc:
                if error is None:
                    raise
                logger.warning("%s; its metadata %s still says it is running", exc, self.metadata_path)
        if error is not None:
            raise error
        where = "stdout" if self._stream is not None else str(self.path)
        if meta["status"] == "complete":
            logger.info("wrote %d detections of %d frames to %s", self.rows, self.frames, where)
        else:
            logger.warning(
                "output %s marked %s (%s): %d detections of %d frames", where, meta["status"], meta["reason"],
                self.rows, self.frames,
            )
