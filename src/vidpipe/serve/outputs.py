"""Where ``vidpipe serve`` writes: each camera's rows to its table (its own, a shared file, or
``<folder>/<camera>.detections.<format>``), narrowed by the camera's ``classes`` / ``conf``.

The tables are the library's :class:`~vidpipe.sinks.TableSink` (rows written batch by batch as
they are detected; CSV/JSONL readable while the run goes on; Parquet renamed into place at the
end). A table is opened when its camera is attached (so it exists from the start) and stays open
until the run ends: a camera removed and added again keeps appending to the same table. A table
that a live camera writes to (a stream, a webcam, a file with ``live.realtime``) has the
``captured_at`` / ``latency_ms`` columns; ``output.rotate: hourly`` writes one table per hour.
Used by one thread at a time (the server's loop, then whoever stops it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vidpipe.serve.config import CameraConfig, ServeConfig
    from vidpipe.sinks import Sink
    from vidpipe.summary import RunSummary
    from vidpipe.types import FrameResult

logger = logging.getLogger(__name__)

__all__ = ["CameraOutputs"]


@dataclass(frozen=True)
class _Route:
    camera: str
    sink: "Sink"
    conf: float | None  # keep rows at or above (None: all the model kept)
    class_ids: tuple[int, ...] | None  # keep these classes (None: all the model kept)


class CameraOutputs:
    """The tables of a serve run, fed batch by batch with the run's results."""

    def __init__(
        self, config: "ServeConfig", names: Sequence[str], *, live_of: "Callable[[CameraConfig], bool]"
    ) -> None:
        self._config = config
        self._names = tuple(names)
        self._live_of = live_of
        # tables a live camera of the config writes to get the capture-time columns
        self._live_tables = {
            config.output_of(c).table_for(c.name)[0].resolve() for c in config.cameras if live_of(c)
        }
        self._sinks: dict[Path, "Sink"] = {}
        self._routes: dict[int, _Route] = {}
        self._streams: dict[int, list[int]] = {}  # id(sink) -> stream ids written there
        self.events: Any = None  # vidpipe.events.EventOutputs (attach_events), fed every batch unnarrowed

    def attach_events(self, run: Any, live_of: "Callable[[int], bool]") -> None:
        """Open the event outputs of the config's ``events:`` block for ``run`` (its stages decide
        whether the default table opens now or with the first event)."""
        self.events = event_outputs(self._config, run, live_of=live_of)

    def with_events(self, summary: "RunSummary", reason: str | None = None) -> "RunSummary":
        """Flush the webhooks and MQTT (bounded) and put their counters in ``summary``."""
        if self.events is None:
            return summary
        from vidpipe.events.outputs import with_event_stats

        return with_event_stats(summary, self.events.finish(reason))

    def prepare(self, cam: "CameraConfig", *, path: tuple = ()) -> _Route:
        """Resolve ``cam``'s classes and open its table (unless open already); ``path`` locates
        ``cam`` in the config file for error messages. Then :meth:`route` its stream there."""
        from vidpipe.models.detector import resolve_classes
        from vidpipe.sinks import make_sink

        config = self._config
        class_ids = None
        if cam.classes is not None:
            with config.located(path + ("classes",)):
                class_ids = resolve_classes(list(cam.classes), self._names)
        if cam.blur is not None:  # drawn later, checked now (a line-numbered error at start)
            with config.located(path + ("blur",)):
                resolve_classes(list(cam.blur), self._names)
        conf = cam.conf if cam.conf is not None and cam.conf > config.conf else None
        table, fmt = config.output_of(cam).table_for(cam.name)
        key = table.resolve()
        sink = self._sinks.get(key)
        if sink is None:
            output = config.output_of(cam)
            live = key in self._live_tables or self._live_of(cam)
            with config.located(path + ("output",) if cam.output is not None else ("output",)):
                sink = make_sink(table, names=self._names, format=fmt, rotate=output.rotate, capture_times=live,
                                 tracking=config.tracking)
            self._sinks[key] = sink
            logger.info("camera %s: writing %s", cam.name, table)
        return _Route(cam.name, sink, conf, class_ids)

    def route(self, stream_id: int, route: _Route) -> None:
        """Send the results of ``stream_id`` to ``route`` (a camera's table and filters)."""
        self._routes[stream_id] = route
        self._streams.setdefault(id(route.sink), []).append(stream_id)

    def write(self, batch: "Sequence[FrameResult]") -> None:
        """Write one batch: each result to its camera's table, narrowed by the camera's filters.
        Results of streams without a route (none in a serve run) are left out."""
        if self.events is not None:
            self.events.write(batch)  # every event of every camera (a camera's filters narrow its rows only)
        groups: dict[int, list["FrameResult"]] = {}
        for r in batch:
            groups.setdefault(r.stream_id, []).append(r)
        per_sink: dict[int, tuple["Sink", list["FrameResult"]]] = {}
        for sid, results in groups.items():
            route = self._routes.get(sid)
            if route is None:
                logger.debug("results of stream %d have no table; left out", sid)
                continue
            if route.conf is not None or route.class_ids is not None:
                results = [_narrow(r, route) for r in results]
            per_sink.setdefault(id(route.sink), (route.sink, []))[1].extend(results)
        for sink, results in per_sink.values():
            sink.write(results)

    @property
    def outputs(self) -> list[str]:
        events = self.events.outputs if self.events is not None else []
        return [o for s in self._sinks.values() for o in s.outputs] + events

    def tables(self) -> dict[str, str]:
        """Camera name -> its table path."""
        return {r.camera: str(getattr(r.sink, "path", "")) for r in self._routes.values()}

    def close(self, summary: "RunSummary") -> None:
        """Finalise every table with the summary of its own cameras (their statuses decide the
        table's: a camera read to its end is complete, a camera stopped or removed partial);
        the events table with the whole summary."""
        try:
            self._finish(lambda s: s.close(self._summary_for(s, summary)))
        finally:
            if self.events is not None:
                self.events.close(summary)

    def abort(self, reason: str, summary: "RunSummary | None") -> None:
        """Finalise every table as partial, with ``reason``."""
        try:
            self._finish(lambda s: s.abort(reason, None if summary is None else self._summary_for(s, summary)))
        finally:
            if self.events is not None:
                self.events.abort(reason, summary)

    def _summary_for(self, sink: "Sink", summary: "RunSummary") -> "RunSummary":
        """``summary`` narrowed to the streams written to ``sink`` (a serve run has no inputs
        rejected before it starts, so ``summary.sources[i]`` is stream ``i``)."""
        import dataclasses

        sources = summary.sources
        picked = tuple(sources[i] for i in self._streams.get(id(sink), ()) if i < len(sources))
        frames = sum(s.frames for s in picked)
        return dataclasses.replace(
            summary, sources=picked, frames=frames, detections=sum(s.detections for s in picked),
            fps=frames / summary.seconds if summary.seconds > 0 else 0.0, outputs=tuple(sink.outputs),
        )

    def _finish(self, action: Any) -> None:
        from vidpipe.sinks.multi import finalize_all

        finalize_all(self._sinks.values(), action)


def event_outputs(config: "ServeConfig", run: Any, *, live_of: "Callable[[int], bool]") -> Any:
    """The :class:`~vidpipe.events.outputs.EventOutputs` of ``config.events`` for ``run``, or
    ``None`` (nothing to do); errors name the config file's line of ``events``."""
    from vidpipe.events.outputs import EventOutputs, emits_events, events_path

    ev, out = config.events, config.output
    fmt = ev.format
    if ev.table == "off":
        table = None
    elif ev.table is not None:
        table = Path(ev.table).expanduser()
    elif out.folder:
        fmt = fmt if fmt != "auto" else ("csv" if out.format == "auto" else out.format)
        table = Path(out.path).expanduser() / f"events.{fmt}"
    else:
        table = events_path(Path(out.path).expanduser())
        fmt = fmt if fmt != "auto" else out.format
    if table is None and not ev.webhooks and not ev.mqtt:
        return None
    eager = ev.table not in (None, "off") or emits_events(run.stages.stages)
    with config.located(("events",)):
        events = EventOutputs(
            table_for=None if table is None else (lambda r: table), eager=eager, format=fmt,
            rotate=ev.rotate if ev.rotate is not None else out.rotate, live_of=live_of,
            webhooks=[{"url": h.url, "headers": h.headers} for h in ev.webhooks], mqtt=ev.mqtt,
        )
        if table is not None and eager:
            events.open_table(table, live=any(live_of(c) for c in range(len(run.states))))
    return events


def _narrow(r: "FrameResult", route: _Route) -> "FrameResult":
    """``r`` with only the detections ``route`` keeps (their embeddings too; the frame's image
    and events as they are)."""
    import dataclasses

    import torch

    d = r.detections
    keep = torch.ones(len(d), dtype=torch.bool, device=d.device)
    if route.conf is not None:
        keep &= d.scores >= route.conf
    if route.class_ids is not None:
        keep &= torch.isin(d.class_ids, torch.tensor(route.class_ids, dtype=torch.int64, device=d.device))
    if bool(keep.all()):
        return r
    emb = None if r.embeddings is None else r.embeddings[keep.to(r.embeddings.device)]
    return dataclasses.replace(r, detections=d.select(keep), embeddings=emb)
