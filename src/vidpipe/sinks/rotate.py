"""Detection tables rotated per hour: ``dets.csv`` -> ``dets-2026-11-26T10.csv``, ``...T11.csv``.

Each hour's file is a complete table of its own (header, or Parquet footer) with its own
``<file>.meta.json``; a file is finalised (``"finished": true``, status ``"complete"``, its
``"period"``) as soon as a row of a later hour arrives, so the files of past hours are final
while a live run goes on; the last one is finalised with the run's summary.

Which hour a row belongs to: the frame's capture time (``FrameMeta.captured_at``, UTC) for live
sources, the wall clock at write time (UTC) otherwise. Rows are never lost or reordered: a row
whose capture hour is earlier than the open file's (a late frame of a slower camera) goes to the
open file, and its ``captured_at`` column says when it was captured.

A run started again within the same hour writes that hour's file anew (replacing it), as a
plain table of the same name would be.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from vidpipe._validate import check_choice, check_range
from vidpipe.sinks.base import Sink
from vidpipe.sinks.paths import table_format
from vidpipe.sinks.table import TableSink

if TYPE_CHECKING:
    from vidpipe.summary import RunSummary
    from vidpipe.types import FrameResult

logger = logging.getLogger(__name__)

__all__ = ["RotatingTableSink", "Rotate", "ROTATIONS", "rotated_path"]

Rotate = Literal["none", "hourly"]
ROTATIONS: tuple[str, ...] = ("none", "hourly")


def _label(start: float, period_s: float) -> str:
    t = datetime.fromtimestamp(start, timezone.utc)
    if period_s >= 3600 and period_s % 3600 == 0:
        return t.strftime("%Y-%m-%dT%H")
    if period_s >= 1 and period_s % 1 == 0:
        return t.strftime("%Y-%m-%dT%H-%M-%S")  # sub-hour periods (tests)
    return t.strftime("%Y-%m-%dT%H-%M-%S") + f".{t.microsecond // 1000:03d}"


def rotated_path(path: str | os.PathLike[str], start: float, *, period_s: float = 3600.0) -> Path:
    """The file of the period starting at ``start`` (UTC epoch s): ``dets.csv`` ->
    ``dets-2026-11-26T10.csv`` (hourly; shorter periods add minutes and seconds)."""
    p = Path(path)
    return p.with_name(f"{p.stem}-{_label(start, period_s)}{p.suffix}")


class RotatingTableSink(Sink):
    """A :class:`~vidpipe.sinks.table.TableSink` per hour (see the module docstring).

    Args:
        path: the name the hourly files are derived from (``dets.csv``).
        rotate: ``"hourly"``.
        capture_times: live sources: rotate on the frames' capture time (and add the
            ``captured_at``/``latency_ms`` columns); else on the wall clock.
        clock: the wall clock (UTC epoch seconds), ``time.time`` unless a test injects one.
        period_s: seconds per file (3600; shorter only for tests).
        **table: the :class:`TableSink` options (``format``, ``names``, ``tracking``, ...).
    """

    #: the sink of each period's file (an events table rotates the same way)
    table_class: type[Any] = TableSink

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        rotate: Rotate = "hourly",
        capture_times: bool = False,
        clock: Callable[[], float] = time.time,
        period_s: float = 3600.0,
        **table: Any,
    ) -> None:
        super().__init__()
        check_choice("rotate", rotate, ("hourly",))
        self.period_s = float(check_range("period_s", period_s, low=0.001))
        self.path = Path(os.fspath(path))
        table_format(self.path, table.get("format", "auto"))  # a bad format fails now, not at the first row
        self.capture_times = bool(capture_times)
        self._clock = clock
        self._table = dict(table, capture_times=self.capture_times)
        self._sink: Any = None
        self._start: float | None = None  # the open file's period start (UTC epoch s)
        self._written: list[str] = []
        self.frames = 0
        self.rows = 0

    def __repr__(self) -> str:
        return f"RotatingTableSink({str(self.path)!r}, period_s={self.period_s:g}, state={self.state!r})"

    @property
    def outputs(self) -> tuple[str, ...]:
        return tuple(self._written)

    @property
    def current(self) -> Any:
        """The open file's sink (``None`` before the first row)."""
        return self._sink

    def _period(self, result: "FrameResult", now: float) -> float:
        at = result.meta.captured_at if self.capture_times else None
        t = now if at is None else at
        return t - (t % self.period_s)

    def _open(self, start: float) -> Any:
        if self._sink is not None:
            self._sink.close(None)  # this period is over: its file is final
        path = rotated_path(self.path, start, period_s=self.period_s)
        period = {
            "start": datetime.fromtimestamp(start, timezone.utc).isoformat(timespec="seconds"),
            "end": datetime.fromtimestamp(start + self.period_s, timezone.utc).isoformat(timespec="seconds"),
            "by": "capture time" if self.capture_times else "wall clock",
        }
        self._sink = self.table_class(path, extra_metadata={"period": period}, **self._table)
        self._start = start
        self._written.append(str(self._sink.path))
        logger.info("writing %s", self._sink.path)
        return self._sink

    def write(self, results: Sequence["FrameResult"]) -> None:
        """Write a batch, split where it crosses into a later period (each part to its file)."""
        self._check_open()
        if not results:
            return
        now = self._clock()
        part: list["FrameResult"] = []
        for r in results:
            start = self._period(r, now)
            if self._sink is None or (self._start is not None and start > self._start):
                if part:
                    self._flush(part)
                    part = []
                self._open(start)
            part.append(r)
        self._flush(part)

    def _flush(self, part: list["FrameResult"]) -> None:
        sink = self._sink if self._sink is not None else self._open(self._period_now())
        before = sink.rows
        sink.write(part)
        self.frames += len(part)
        self.rows += sink.rows - before

    def _finalize(self, summary: "RunSummary | None", *, complete: bool, reason: str | None) -> None:
        # no row ever came: still leave one (empty) table
        sink = self._sink if self._sink is not None else self._open(self._period_now())
        if complete:
            sink.close(summary)
        else:
            sink.abort(reason or "aborted", summary)

    def _period_now(self) -> float:
        t = self._clock()
        return t - (t % self.period_s)
