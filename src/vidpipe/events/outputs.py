"""The event outputs of one ``vidpipe detect`` or ``vidpipe serve`` run: :class:`EventOutputs`.

The events table's place: ``--events PATH`` (the config's ``events.table``) when given, else
beside each detection table, ``.detections`` replaced by ``.events`` (``video.detections.csv``
-> ``video.events.csv``) or ``.events`` put before the extension (``out.csv`` ->
``out.events.csv``), in the detection table's format; it rotates hourly when the detection
tables do. A table is opened with its stream's first result when the run has a stage that
declares ``emits_events = True``, or else with the first event (a run whose stages emit nothing
writes no events table); ``--events off`` writes none. Webhooks and MQTT get every event.

End of the run: :meth:`EventOutputs.finish` flushes the webhooks and MQTT (bounded waits) and
returns the counters, which the caller puts in the run summary's ``stats["events"]`` before
finalising the tables with it (:meth:`close` / :meth:`abort`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vidpipe.events._push import PushSink
    from vidpipe.sinks.base import Sink
    from vidpipe.summary import RunSummary
    from vidpipe.types import FrameResult

logger = logging.getLogger(__name__)

__all__ = ["EventOutputs", "events_path", "emits_events", "with_event_stats", "describe"]


def events_path(table: str | os.PathLike[str]) -> Path:
    """The events table beside detection table ``table``: ``x.detections.csv`` ->
    ``x.events.csv``, ``dets.parquet`` -> ``dets.events.parquet``."""
    p = Path(table)
    if ".detections" in p.name:
        head, _, tail = p.name.rpartition(".detections")
        return p.with_name(f"{head}.events{tail}")
    return p.with_name(f"{p.stem}.events{p.suffix}")


def emits_events(stages: Iterable[Any]) -> bool:
    """Whether a stage declares ``emits_events = True`` (lines and zones do)."""
    return any(bool(getattr(s, "emits_events", False)) for s in stages)


def with_event_stats(summary: "RunSummary", stats: Mapping[str, Any] | None) -> "RunSummary":
    """``summary`` with ``stats["events"] = stats`` (unchanged when ``stats`` is empty)."""
    if not stats:
        return summary
    return dataclasses.replace(summary, stats={**summary.stats, "events": dict(stats)})


def describe(stats: Mapping[str, Any]) -> str:
    """One line of a run summary: ``events: 12 (12 written to x.events.csv; webhook
    https://***@h/x: 12 posted, 0 dropped, 0 failed, 0 undelivered; mqtt ...: ...)``."""
    parts = [f"{t.get('written', 0)} written to {t.get('path')}" for t in stats.get("tables", ())]
    for key, verb in (("webhooks", "posted"), ("mqtt", "published")):
        for p in stats.get(key, ()):
            what = "webhook" if key == "webhooks" else "mqtt"
            parts.append(f"{what} {p.get('target')}: {p.get('delivered', 0)} {verb}, "
                         f"{p.get('dropped', 0)} dropped, {p.get('failed', 0)} failed, "
                         f"{p.get('undelivered', 0)} undelivered")
    return f"events: {stats.get('emitted', 0)}" + (f" ({'; '.join(parts)})" if parts else "")


class EventOutputs:
    """The events table(s), webhooks and MQTT of one run, fed every batch of results.

    Args:
        table_for: the events table of a result's stream (``None``: no table for it); called
            once per stream.
        eager: open a stream's table with its first result (a stage emits events), not with
            its first event.
        format: the tables' format (``"auto"``: by extension).
        rotate: ``"none"`` or ``"hourly"``.
        live_of: whether a stream is live (hourly rotation by capture time).
        webhooks: URLs, or mappings ``{"url": ..., "headers": {...}}`` (:class:`WebhookSink`).
        mqtt: an ``mqtt://`` URL (:class:`MqttSink`), or ``None``.
        headers: headers for every webhook given as a plain URL (``Authorization``, ...).

    Raises:
        ConfigError: a bad URL; paho-mqtt missing for ``mqtt``.
    """

    def __init__(
        self,
        *,
        table_for: "Callable[[FrameResult], Path | None] | None" = None,
        eager: bool = False,
        format: str = "auto",
        rotate: str = "none",
        live_of: Callable[[int], bool] = lambda sid: False,
        webhooks: Sequence[str | Mapping[str, Any]] = (),
        mqtt: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        from vidpipe.events.mqtt import MqttSink
        from vidpipe.events.webhook import WebhookSink

        self._table_for = table_for
        self.eager = bool(eager)
        self._format = format
        self._rotate = rotate
        self._live_of = live_of
        self._tables: dict[Path, "Sink"] = {}
        self._of_stream: dict[int, "Sink | None"] = {}
        self.pushers: list["PushSink"] = []
        self.emitted = 0
        self._finished: dict[str, Any] | None = None
        try:
            for hook in webhooks:
                if isinstance(hook, Mapping):
                    self.pushers.append(WebhookSink(hook["url"], headers=hook.get("headers") or headers))
                else:
                    self.pushers.append(WebhookSink(hook, headers=headers))
            if mqtt:
                self.pushers.append(MqttSink(mqtt))
        except BaseException:
            self._stop_pushers()
            raise

    def __bool__(self) -> bool:
        return self._table_for is not None or bool(self.pushers)

    # ------------------------------------------------------------------ tables
    def open_table(self, path: str | os.PathLike[str], *, live: bool = False) -> "Sink":
        """The table at ``path``, opened now if not yet (a single table opened at the start)."""
        from vidpipe.events.table import EventTableSink, RotatingEventTableSink

        key = Path(path).expanduser().resolve()
        sink = self._tables.get(key)
        if sink is None:
            if self._rotate == "hourly":
                sink = RotatingEventTableSink(path, rotate="hourly", capture_times=live, format=self._format)
            else:
                sink = EventTableSink(path, format=self._format)
            self._tables[key] = sink
            logger.info("writing events to %s", path)
        return sink

    def _table_of(self, result: "FrameResult") -> "Sink | None":
        sid = result.stream_id
        if sid in self._of_stream:
            return self._of_stream[sid]
        path = None if self._table_for is None else self._table_for(result)
        sink = None if path is None else self.open_table(path, live=self._live_of(sid))
        self._of_stream[sid] = sink
        return sink

    # ------------------------------------------------------------------ writing
    def write(self, batch: Sequence["FrameResult"]) -> None:
        """Events of one batch to every output (tables written now; pushes queued)."""
        n = sum(len(r.events) for r in batch)
        self.emitted += n
        if self._table_for is not None:
            per_sink: dict[int, tuple["Sink", list["FrameResult"]]] = {}
            for r in batch:
                if r.stream_id in self._of_stream:
                    sink = self._of_stream[r.stream_id]
                elif self.eager or r.events:
                    sink = self._table_of(r)
                else:
                    continue  # no table yet for this stream, and nothing to put in one
                if sink is not None:
                    per_sink.setdefault(id(sink), (sink, []))[1].append(r)
            for sink, results in per_sink.values():
                sink.write(results)
        if n:
            for p in self.pushers:
                p.write(batch)

    # ------------------------------------------------------------------ finishing
    @property
    def outputs(self) -> list[str]:
        return [o for s in self._tables.values() for o in s.outputs]

    def stats(self) -> dict[str, Any]:
        """``{"emitted", "tables": [{"path", "written", ...}], "webhooks": [...], "mqtt": [...]}``."""
        out: dict[str, Any] = {"emitted": self.emitted}
        if self._tables:
            out["tables"] = [getattr(s, "stats", {}) for s in self._tables.values()]
        hooks = [p.stats for p in self.pushers if p.kind == "webhook"]
        brokers = [p.stats for p in self.pushers if p.kind == "mqtt"]
        if hooks:
            out["webhooks"] = hooks
        if brokers:
            out["mqtt"] = brokers
        return out

    def finish(self, reason: str | None = None) -> dict[str, Any]:
        """Flush and close the webhooks and MQTT (each within its bounded wait; shorter with a
        ``reason``: the run was interrupted); the counters of every output. Idempotent."""
        if self._finished is None:
            try:
                self._stop_pushers(reason)
            finally:  # (a KeyboardInterrupt while flushing: the counters so far, then it propagates)
                self._finished = self.stats()
        return self._finished

    def _stop_pushers(self, reason: str | None = None) -> None:
        for p in self.pushers:
            try:
                p.close() if reason is None else p.abort(reason)
            except Exception as exc:  # noqa: BLE001 - never fail the run over an event push
                logger.error("could not close %r: %s", p, exc)

    def close(self, summary: "RunSummary | None") -> None:
        """Finalise the tables with ``summary`` (after :meth:`finish`)."""
        self.finish()
        self._finalize(lambda s: s.close(summary))

    def abort(self, reason: str, summary: "RunSummary | None") -> None:
        """Finalise the tables as partial with ``reason``."""
        self.finish(reason)
        self._finalize(lambda s: s.abort(reason, summary))

    def _finalize(self, action: Callable[["Sink"], Any]) -> None:
        from vidpipe.sinks.multi import finalize_all

        finalize_all(self._tables.values(), action)
