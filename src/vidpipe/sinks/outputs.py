"""Where a run's detection tables go (``vidpipe detect -o``, :func:`vidpipe.detect_to_table`):
one table per input, one table for all, a folder, or stdout.

Rows of several inputs in one table (``-o FILE`` or ``-o -``) come in input order: all rows of
the first input, then the second, ... The inputs are still decoded concurrently, so the rows of
an input are written as soon as they are detected only while it is the earliest unfinished
input; the rows of later inputs are held in memory until the inputs before them are done. On
Ctrl-C/SIGTERM the held rows are written (still in input order) before the table is finalised;
a process killed outright loses them (``--resume`` then decodes those inputs again:
:mod:`vidpipe.sinks.resume_plan`). One table per input (the default, or ``-o FOLDER/``) holds
nothing back.

Live inputs (stream URLs, and files played ``--realtime``) never end, so no row waits for them:
while a run has a live input, a single table takes every row as it comes (input order is kept
only among the rows of each input), and the tables of live inputs get the ``captured_at`` and
``latency_ms`` columns. Every batch reaches the file before the next is asked for, so a reader
sees rows within the pipeline's batch deadline (under a second), and a SIGKILL loses no row
already delivered (CSV, JSONL; Parquet is readable only once finalised: see
:mod:`vidpipe.sinks.table`). ``--rotate hourly`` writes one complete table (and metadata) per
hour: :mod:`vidpipe.sinks.rotate`.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from vidpipe.pipeline import DetectionRun
    from vidpipe.sinks import Sink
    from vidpipe.summary import RunSummary
    from vidpipe.types import FrameResult

logger = logging.getLogger(__name__)

__all__ = ["OutputSpec", "Outputs"]

OutputMode = Literal["beside", "folder", "single", "stdout"]
_EXT = {"csv": ".csv", "jsonl": ".jsonl", "parquet": ".parquet"}


@dataclass(frozen=True)
class OutputSpec:
    """The resolved ``--output``/``--format`` of a run.

    Attributes:
        mode: ``beside`` (``<input>.detections.<ext>`` next to each input), ``folder`` (one table
            per input in ``path``), ``single`` (one table ``path`` for all), ``stdout``.
        path: the folder or file (``None`` for ``beside`` and ``stdout``).
        format: ``csv``/``jsonl``/``parquet``, or ``auto`` (by ``path``'s extension).
        here: write ``beside`` tables in the current folder (the bundled sample's case).
        rotate: ``"none"`` or ``"hourly"`` (one file per hour, see :mod:`vidpipe.sinks.rotate`).
    """

    mode: OutputMode
    path: Path | None
    format: str
    here: bool = False
    rotate: str = "none"

    def table_for(self, source: str) -> Path:
        """The table of one input in the ``beside`` and ``folder`` modes."""
        from vidpipe.sinks.paths import default_output_path

        suffix = ".detections" + _EXT["csv" if self.format == "auto" else self.format]
        path = default_output_path(source, suffix=suffix)
        if self.mode == "folder":
            return (self.path or Path.cwd()) / path.name
        if self.here:
            return Path.cwd() / path.name
        if not os.access(path.parent, os.W_OK):
            fallback = Path.cwd() / path.name
            logger.info("%s is not writable; writing %s instead", path.parent, fallback)
            return fallback
        return path


class Outputs:
    """The sinks of one run, fed batch by batch from :meth:`DetectionRun.batches`."""

    def __init__(
        self, spec: OutputSpec, det_run: "DetectionRun", *, names: Any, events: Any = None, resume: Any = None
    ) -> None:
        from vidpipe.sinks import TableSink, make_sink

        self.spec = spec
        self.resume = resume  # vidpipe.sinks.resume_plan.ResumeSetup: tables' resume metadata and cut points (or None)
        self.events = events  # vidpipe.events.EventOutputs: the events table, webhooks, MQTT (or None)
        self._run = det_run
        self._names = names
        # a `track_id` column when the run tracks (vidpipe detect --track); none otherwise
        self._tracking = any(s.name == "track" for s in getattr(det_run.stages, "stages", ()))
        self._per_source: dict[int, "Sink"] = {}
        self._paths: set[Path] = set()
        self._single: "Sink | None" = None
        if spec.mode == "stdout":
            fmt = "jsonl" if spec.format == "auto" else spec.format
            self._single = TableSink(
                "<stdout>", format=fmt, names=names, stream=sys.stdout, capture_times=self._live_run(),  # type: ignore[arg-type]
                tracking=self._tracking,
            )
        elif spec.mode == "single" and resume is not None and spec.rotate == "none":
            plan = resume.single
            self._single = TableSink(
                spec.path, format=spec.format, names=names, capture_times=self._live_run(),  # type: ignore[arg-type]
                tracking=self._tracking, resume=resume.section(resume.names, plan),
                keep_bytes=None if plan is None else plan.keep_bytes, kept_rows=0 if plan is None else plan.kept_rows,
            )
        elif spec.mode == "single":
            self._single = make_sink(
                spec.path, names=names, format=spec.format, rotate=spec.rotate, capture_times=self._live_run(),
                tracking=self._tracking,
            )
        # input order in a single table: the input being written, and the rows held for later ones
        self._current = 0
        self._held: dict[int, list["FrameResult"]] = {}

    # ---------------------------------------------------------------- writing
    def _is_live(self, stream_id: int) -> bool:
        """Whether input ``stream_id`` is live: a stream URL (or webcam), or any input played
        at its own frame rate (``--realtime``)."""
        states = self._run.states
        if not 0 <= stream_id < len(states):
            return False
        spec = states[stream_id].spec
        if getattr(spec, "kind", None) == "live":
            return True
        live_options = getattr(getattr(self._run, "config", None), "live", None)
        return bool(getattr(live_options, "realtime", False)) and getattr(spec, "kind", None) == "file"

    def _sink_for(self, stream_id: int, source: str) -> "Sink":
        sink = self._per_source.get(stream_id)
        if sink is None and self.resume is not None and self.spec.rotate == "none":
            from vidpipe.sinks import TableSink

            k = self.resume.positions[stream_id]
            path, plan = self.resume.tables[k]
            sink = self._per_source[stream_id] = TableSink(
                path, names=self._names, format=self.spec.format,  # type: ignore[arg-type]
                capture_times=self._is_live(stream_id), tracking=self._tracking,
                resume=self.resume.section([self.resume.names[k]], plan),
                keep_bytes=None if plan is None else plan.keep_bytes, kept_rows=0 if plan is None else plan.kept_rows,
            )
        if sink is None:
            from vidpipe.sinks import make_sink

            path = self.spec.table_for(source)
            stem, n = path, 2
            while path in self._paths:  # two inputs of one name in one folder: a.detections-2.csv
                path = stem.with_name(stem.name.replace(".detections", f".detections-{n}", 1))
                n += 1
            self._paths.add(path)
            sink = make_sink(
                path, names=self._names, format=self.spec.format, rotate=self.spec.rotate,
                capture_times=self._is_live(stream_id), tracking=self._tracking,
            )
            self._per_source[stream_id] = sink
        return sink

    def write(self, batch: "list[FrameResult]") -> None:
        """Write one batch of results (rows reach the files before this returns, except rows
        held for input order, see the module docstring)."""
        if self.events is not None:
            self.events.write(batch)  # events go out as they come (never held for input order)
        groups: dict[int, list["FrameResult"]] = {}
        for r in batch:
            groups.setdefault(r.stream_id, []).append(r)
        if self._single is None:
            for sid, results in groups.items():
                self._sink_for(sid, results[0].source).write(results)
            return
        # (no advance before routing: the run counts a batch as yielded before we get it, so an
        # input whose last batch this is already looks drained)
        for sid, results in groups.items():
            if sid == self._current or self._live_run():
                self._single.write(results)
            else:
                self._held.setdefault(sid, []).extend(results)
        self._advance()

    def _live_run(self) -> bool:
        """A live input is in the run: nothing is held back (it would wait forever)."""
        return any(self._is_live(i) for i in range(len(self._run.states)))

    def _advance(self) -> None:
        """Move past finished inputs, writing what was held for the next one."""
        states = self._run.states
        while self._current < len(states) and states[self._current].drained:
            self._mark_done(self._current)
            self._current += 1
            held = self._held.pop(self._current, None)
            if held and self._single is not None:
                self._single.write(held)

    def _mark_done(self, stream_id: int) -> None:
        """Record in the single table's metadata that input ``stream_id`` is done (read to its
        end, every row written): a resumed run skips it."""
        st = self._run.states[stream_id]
        if self._single is not None and st.drained and st.status == "ok" and not st.stopped:
            mark = getattr(self._single, "mark_done", None)
            if mark is not None:
                mark(st.spec.location)

    def flush_held(self) -> None:
        """Write every held row, in input order (end of the run, or interrupted)."""
        if self._single is None:
            return
        for sid in sorted(self._held):
            self._single.write(self._held.pop(sid))

    # ---------------------------------------------------------------- finishing
    def _all(self) -> list["Sink"]:
        return ([self._single] if self._single is not None else []) + list(self._per_source.values())

    @property
    def outputs(self) -> list[str]:
        events = self.events.outputs if self.events is not None else []
        return [o for s in self._all() for o in s.outputs] + events

    def _summary(self, reason: str | None = None) -> "RunSummary":
        """The run's summary, with the event outputs' counters (after flushing the webhooks and
        MQTT within their bounded waits) in ``stats["events"]``."""
        if self.events is None:
            return self._run.summary(outputs=self.outputs)
        from vidpipe.events.outputs import with_event_stats

        try:
            stats = self.events.finish(reason)
        except KeyboardInterrupt:  # a second Ctrl-C while flushing: finalise the tables at once
            stats = self.events.finish(reason)
        return with_event_stats(self._run.summary(outputs=self.outputs), stats)

    def close(self) -> "RunSummary":
        """Finalise every table with the run's summary (its status decides the metadata's)."""
        self.flush_held()
        summary = self._summary()
        for sid in range(len(self._run.states)):
            self._mark_done(sid)
        for s in self._all():
            s.close(summary)
        if self.events is not None:
            self.events.close(summary)
        return summary

    def abort(self, reason: str) -> "RunSummary":
        """Finalise every table as partial, with ``reason``; held rows are written first."""
        try:
            self.flush_held()
        finally:
            summary = self._summary(reason)
            for sid in range(len(self._run.states)):
                self._mark_done(sid)
            errors: list[Exception] = []
            try:
                for s in self._all():  # each is finalised, whatever another one does
                    try:
                        s.abort(reason, summary)
                    except Exception as exc:  # noqa: BLE001 - the first is raised below
                        errors.append(exc)
                if errors:
                    raise errors[0]
            finally:
                if self.events is not None:
                    self.events.abort(reason, summary)
        return summary
