"""The zones stage: line crossings, zone entries, leaves, occupancy and dwell of tracked objects,
per stream, as :class:`~vidpipe.stages.Event` objects on each result and counts in the report.

::

    from vidpipe.zones import Line, Zone, Zones

    zones = Zones(lines=[Line("door", (100, 400), (500, 400))],
                  zones=[Zone("bay", [(0, 0), (200, 0), (200, 200), (0, 200)], dwell=30)])
    for frame in vidpipe.detect("street.mp4", track=True, stages=[zones]):
        for event in frame.events:
            print(event.kind, event.name, event.track_id, event.direction, event.dwell_s)

The stage needs track ids (``FrameResult.detections.track_ids``): put a tracker before it.
Detections with track id -1 (not tracked) are ignored.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from vidpipe._validate import check_choice, check_range
from vidpipe.errors import ConfigError
from vidpipe.zones.counts import StreamCounts, build_report
from vidpipe.zones.geometry import ANCHORS, Line, Zone, anchor_points, line_sides, points_in_edges
from vidpipe.zones.lines import LineState
from vidpipe.zones.tracks import TrackSlots
from vidpipe.zones.zones import ZoneState

if TYPE_CHECKING:
    from vidpipe.stages.base import Event
    from vidpipe.types import FrameMeta, FrameResult

__all__ = ["Zones", "ZoneSet", "stream_time"]

logger = logging.getLogger(__name__)

NO_TRACKS = (
    "zones: the detections carry no track ids (detections.track_ids is None); lines and zones count "
    "tracked objects: put a tracker before the zones stage (vidpipe.detect(..., track=True), or --track "
    "on the command line)"
)


@dataclass(frozen=True)
class ZoneSet:
    """The lines and zones of one stream (all streams share one unless ``per_stream`` says);
    ``anchor``: this stream's, else the stage's. An empty set: the stream is passed through."""

    lines: tuple[Line, ...] = ()
    zones: tuple[Zone, ...] = ()
    anchor: str | None = None

    def __post_init__(self) -> None:
        if self.anchor is not None:
            check_choice("anchor", self.anchor, tuple(ANCHORS))
        object.__setattr__(self, "lines", tuple(self.lines))
        object.__setattr__(self, "zones", tuple(self.zones))
        for kind, items, cls in (("lines", self.lines, Line), ("zones", self.zones, Zone)):
            seen: set[str] = set()
            for item in items:
                if not isinstance(item, cls):
                    raise ConfigError(f"{kind}: expected {cls.__name__} objects, got {type(item).__name__}")
                if item.name in seen:
                    raise ConfigError(f"{kind}: two are named {item.name!r}; names must be unique")
                seen.add(item.name)


_NOTHING = ZoneSet()


def stream_time(meta: "FrameMeta", fps: float) -> float:
    """The frame's time on its stream's clock, seconds: the capture clock for live frames
    (``captured_mono``), else ``pts``, else ``index / fps``."""
    if meta.captured_mono is not None:
        return float(meta.captured_mono)
    if meta.pts is not None:
        return float(meta.pts)
    return meta.index / fps


def _norm(c: str | int) -> str:
    return str(c).strip().lower().replace("_", " ")


def _class_ids(owner: str, classes: tuple[str | int, ...], names: tuple[str, ...]) -> np.ndarray:
    index = {_norm(n): i for i, n in enumerate(names)}
    out = []
    for c in classes:
        if isinstance(c, int):
            out.append(c)
        elif c.strip().isdigit():
            out.append(int(c))
        elif _norm(c) in index:
            out.append(index[_norm(c)])
        else:
            known = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
            raise ConfigError(f"{owner}: class {c!r} is not one of the model's classes ({known or 'none named'})")
    return np.asarray(out, dtype=np.int64)


class _Stream:
    """The state of one stream: track slots, line and zone states, class filters."""

    def __init__(self, zs: ZoneSet, anchor: str, hysteresis: int, counts: StreamCounts) -> None:
        self.zs = zs
        self.anchor = zs.anchor or anchor
        self.lines = LineState(zs.lines, hysteresis)
        self.zones = ZoneState(zs.zones, hysteresis)
        self.slots = TrackSlots(self._grow)
        self.counts = counts
        self.names: tuple[str, ...] | None = None
        self.line_filter: list[np.ndarray | None] = []
        self.zone_filter: list[np.ndarray | None] = []

    def _grow(self, capacity: int) -> None:
        self.lines.grow(capacity)
        self.zones.grow(capacity)

    def filters(self, names: tuple[str, ...]) -> None:
        if names == self.names:
            return
        self.line_filter = [None if ln.classes is None else _class_ids(f"line {ln.name!r}", ln.classes, names)
                            for ln in self.zs.lines]
        self.zone_filter = [None if z.classes is None else _class_ids(f"zone {z.name!r}", z.classes, names)
                            for z in self.zs.zones]
        self.names = names

    @staticmethod
    def applies(filters: list[np.ndarray | None], cls: np.ndarray) -> np.ndarray:
        out = np.ones((len(cls), len(filters)), dtype=bool)
        for j, ids in enumerate(filters):
            if ids is not None:
                out[:, j] = np.isin(cls, ids)
        return out


class Zones:
    """Counts line crossings and zone visits of tracked objects (a :class:`~vidpipe.stages.Stage`
    named ``"zones"``).

    Args:
        lines: :class:`~vidpipe.zones.Line` objects (or ``"NAME=x1,y1,x2,y2"`` texts).
        zones: :class:`~vidpipe.zones.Zone` objects (or ``"NAME=x1,y1,x2,y2,x3,y3,..."`` texts).
        anchor: the point of a box that stands for the object (``"bottom_center"``: where it
            touches the ground; ``"center"``, ``"top_center"``, ...; see
            :data:`vidpipe.zones.geometry.ANCHORS`).
        hysteresis: consecutive observations on a line's other side, or in / out of a zone,
            before a crossing, an entry or a leave counts (jitter shorter than that never counts).
        dwell: default dwell threshold in seconds for zones without their own ``dwell``
            (``None``: no dwell events).
        forget_after: seconds of the stream's time after which a track not seen is forgotten:
            it leaves its zones and its state is freed (keeps long live runs small). Keep it above
            the tracker's own lost-track buffer.
        fps: frame rate assumed for frames that carry no time (image folders).
        per_stream: ``stream_id -> ZoneSet`` (or ``None`` for the default ``lines``/``zones``), for
            runs whose cameras each have their own (``vidpipe serve``).

    Raises:
        ConfigError: a bad option; on the first frame, a class filter naming no class of the model;
            at a frame with detections but no track ids (no tracker ran before this stage).
    """

    name = "zones"
    needs_frames = False
    emits_events = True  # the events table exists from the start (vidpipe.events.outputs)

    def __init__(
        self,
        lines: "Sequence[Line | str]" = (),
        zones: "Sequence[Zone | str]" = (),
        *,
        anchor: str = "bottom_center",
        hysteresis: int = 3,
        dwell: float | None = None,
        forget_after: float = 3.0,
        fps: float = 30.0,
        per_stream: "Callable[[int], ZoneSet | None] | Mapping[int, ZoneSet] | None" = None,
    ) -> None:
        from vidpipe.zones.config import parse_line, parse_zone

        check_choice("anchor", anchor, tuple(ANCHORS))
        check_range("hysteresis", hysteresis, low=1, high=1000, integer=True)
        check_range("forget_after", forget_after, low=0, low_inclusive=False)
        check_range("fps", fps, low=0, low_inclusive=False)
        if dwell is not None:
            check_range("dwell", dwell, low=0, low_inclusive=False)
        ls = [parse_line(x, what="lines") if isinstance(x, str) else x for x in lines]
        zs = [parse_zone(x, what="zones") if isinstance(x, str) else x for x in zones]
        if dwell is not None:
            zs = [dataclasses.replace(z, dwell=float(dwell)) if isinstance(z, Zone) and z.dwell is None else z
                  for z in zs]
        self.default = ZoneSet(tuple(ls), tuple(zs))
        if per_stream is None and not (self.default.lines or self.default.zones):
            raise ConfigError("Zones: give at least one line or zone (lines=[...], zones=[...])")
        self.anchor = anchor
        self.hysteresis = int(hysteresis)
        self.forget_after = float(forget_after)
        self.fps = float(fps)
        self._per_stream = per_stream.get if isinstance(per_stream, Mapping) else per_stream
        self._streams: dict[int, _Stream] = {}
        self._sets: dict[int, ZoneSet] = {}
        self._counts: dict[int, StreamCounts] = {}
        self._lock = threading.Lock()  # counts are read by the metrics endpoint's thread

    # ------------------------------------------------------------------ Stage
    def process(self, results: "Sequence[FrameResult]") -> "Sequence[FrameResult]":
        if not results or self._zoneset(results[0].meta.stream_id) is _NOTHING:
            return results  # a stream without lines or zones (a camera of vidpipe serve)
        arrays = _host_arrays(results)
        wall = time.time()
        out = []
        with self._lock:
            st = self._stream(results[0].meta)
            # the geometry of every detection of the call in one pass; the state per frame
            boxes = np.concatenate([a[0] for a in arrays]) if len(arrays) > 1 else arrays[0][0]
            points = anchor_points(boxes, st.anchor)
            sides = line_sides(points, st.lines.segs) if st.zs.lines else None
            inside = points_in_edges(points, st.zones.edges, st.zones.starts) if st.zs.zones else None
            at = 0
            for r, (b, cls, tids) in zip(results, arrays):
                rows = slice(at, at + len(b))
                at += len(b)
                events = self._frame(r, st, cls, tids, points[rows], None if sides is None else sides[rows],
                                     None if inside is None else inside[rows], wall)
                out.append(dataclasses.replace(r, events=r.events + tuple(events)) if events else r)
        return out

    def reset(self, stream_id: int) -> None:
        with self._lock:
            self._streams.pop(stream_id, None)
            self._sets.pop(stream_id, None)
            counts = self._counts.get(stream_id)
            if counts is not None:
                counts.occupancy = dict.fromkeys(counts.occupancy, 0)
                counts.open_dwell = {}

    def report(self) -> dict[str, Any]:
        """``{"anchor", "lines": {name: {"in", "out", "classes": {class: {"in", "out"}}}},
        "zones": {name: {"occupancy" (now), "entries", "classes": {class: entries},
        "dwell_s": {"visits", "mean", "max"}}}}``, summed over streams, plus ``"streams"``
        (the same per stream id, with its ``source``) when there are several. Dwell statistics
        cover every visit, those still open counted up to their last observation inside."""
        with self._lock:
            self._refresh()
            return build_report(self._counts, anchor=self.anchor)

    def snapshot(self) -> dict[int, StreamCounts]:
        """A copy of each stream's counts (for the metrics endpoint; thread-safe)."""
        with self._lock:
            self._refresh()
            return {sid: c.copy() for sid, c in self._counts.items()}

    def _refresh(self) -> None:
        """Occupancy and open visits of the counts, from the streams' states (under the lock)."""
        for st in self._streams.values():
            names = [z.name for z in st.zs.zones]
            st.counts.occupancy = dict(zip(names, st.zones.occupancy().tolist()))
            open_: dict[str, list[float]] = {}
            for z, d in st.zones.open_dwell():
                open_.setdefault(names[z], []).append(d)
            st.counts.open_dwell = open_

    def close(self) -> None:
        pass  # state stays readable: the run's summary asks for the report after closing

    # ------------------------------------------------------------------ one frame
    def _zoneset(self, stream_id: int) -> ZoneSet:
        zs = self._sets.get(stream_id)
        if zs is None:
            zs = self._per_stream(stream_id) if self._per_stream is not None else None
            zs = zs if zs is not None else self.default
            if not (zs.lines or zs.zones):
                zs = _NOTHING
            self._sets[stream_id] = zs
        return zs

    def _stream(self, meta: "FrameMeta") -> _Stream:
        st = self._streams.get(meta.stream_id)
        if st is None:
            zs = self._zoneset(meta.stream_id)
            counts = self._counts.get(meta.stream_id)
            if counts is None:
                from vidpipe.sources.redact import redact_text

                counts = self._counts[meta.stream_id] = StreamCounts(redact_text(meta.source))
            counts.line_names = tuple(ln.name for ln in zs.lines)
            counts.zone_names = tuple(z.name for z in zs.zones)
            st = self._streams[meta.stream_id] = _Stream(zs, self.anchor, self.hysteresis, counts)
            _warn_outside(zs, meta, counts.source)
        return st

    def _frame(self, r: "FrameResult", st: _Stream, cls: np.ndarray, tids: np.ndarray, points: np.ndarray,
               sides: np.ndarray | None, inside: np.ndarray | None, wall: float) -> "list[Event]":
        meta = r.meta
        st.filters(tuple(r.names))
        t = stream_time(meta, self.fps)
        made = _EventMaker(r, st.counts.source, wall)
        events: list[Event] = []
        stale = st.slots.stale(t, self.forget_after)
        if len(stale):
            for kind, slot, z, dwell in st.zones.forget(stale):
                zone = st.zs.zones[z].name
                st.counts.leave(zone, dwell)
                events.append(made(kind, zone, int(st.slots.track_id[slot]), int(st.slots.class_id[slot]),
                                   dwell_s=dwell))
            st.lines.clear(stale)
            st.slots.release(stale)
        keep = tids >= 0
        if len(tids) > 1 or not keep.all():
            rows = np.flatnonzero(keep)
            if len(rows) > 1:
                _, first = np.unique(tids[rows], return_index=True)  # one row per track (the first)
                if len(first) != len(rows):
                    rows = rows[np.sort(first)]
            if len(rows) != len(tids):
                cls, tids, points = cls[rows], tids[rows], points[rows]
                sides = None if sides is None else sides[rows]
                inside = None if inside is None else inside[rows]
        if len(tids):
            slots = st.slots.lookup(tids, cls, t)
            for row, li, direction in st.lines.update(slots, points, sides, st.applies(st.line_filter, cls)):
                d = "in" if direction > 0 else "out"
                line = st.zs.lines[li].name
                c = int(cls[row])
                st.counts.cross(line, made.class_name(c), d)
                events.append(made("cross", line, int(tids[row]), c, direction=d))
            for kind, row, z, dwell in st.zones.update(slots, inside, st.applies(st.zone_filter, cls), t):
                zone = st.zs.zones[z].name
                c = int(cls[row])
                if kind == "enter":
                    st.counts.enter(zone, made.class_name(c))
                elif kind == "leave":
                    st.counts.leave(zone, dwell)
                events.append(made(kind, zone, int(tids[row]), c, dwell_s=None if kind == "enter" else dwell))
        return events


def _warn_outside(zs: ZoneSet, meta: "FrameMeta", source: str) -> None:
    """Log a warning for each line or zone wholly outside the frame (coordinates meant for
    another resolution?): it can never count anything."""
    for kind, items in (("line", zs.lines), ("zone", zs.zones)):
        for item in items:
            pts = np.asarray(item.points if isinstance(item, Zone) else (item.start, item.end))
            if pts[:, 0].max() < 0 or pts[:, 1].max() < 0 or pts[:, 0].min() > meta.width or pts[:, 1].min() > meta.height:
                logger.warning("%s: %s %r lies outside the %dx%d frame; it will count nothing (its points are "
                               "source pixels)", source, kind, item.name, meta.width, meta.height)


class _EventMaker:
    """Events of one frame (its stream, index, pts, time and class names)."""

    def __init__(self, r: "FrameResult", source: str, wall: float) -> None:
        self.meta = r.meta
        self.names = r.names
        self.source = source
        self.time = r.meta.captured_at if r.meta.captured_at is not None else wall

    def class_name(self, c: int) -> str:
        return self.names[c] if 0 <= c < len(self.names) else str(c)

    def __call__(self, kind: str, name: str, track_id: int, class_id: int, *, direction: str | None = None,
                 dwell_s: float | None = None) -> "Event":
        from vidpipe.stages.base import Event

        m = self.meta
        return Event(kind=kind, name=name, stream_id=m.stream_id, source=self.source, frame=m.index,  # type: ignore[arg-type]
                     pts=m.pts, time=self.time, track_id=track_id, class_id=class_id,
                     class_name=self.class_name(class_id), direction=direction, dwell_s=dwell_s)  # type: ignore[arg-type]


def _host_arrays(results: "Sequence[FrameResult]", *, pack: bool | None = None,
                 ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per result ``(boxes (n, 4) float, class ids (n,) int64, track ids (n,) int64)`` on the
    host: views of CPU tensors, or (``pack``, default: any result on a GPU) one packed copy of
    all the results' rows, one device synchronisation per call."""
    dets = [r.detections for r in results]
    for d in dets:
        if d.track_ids is None and len(d):
            raise ConfigError(NO_TRACKS)
    if pack is None:
        pack = any(d.device.type != "cpu" for d in dets)
    if not pack:
        out = []
        for d in dets:
            if d.track_ids is None:
                out.append((np.zeros((0, 4)), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)))
            else:
                out.append((d.boxes.numpy(), d.class_ids.numpy(), d.track_ids.numpy()))
        return out
    import torch

    cols = [torch.cat([d.boxes.double(), d.class_ids.double()[:, None], d.track_ids.double()[:, None]], 1)
            for d in dets if d.track_ids is not None and len(d)]
    packed = torch.cat(cols).cpu().numpy() if cols else np.zeros((0, 6))  # one copy, one sync
    out, at = [], 0
    for d in dets:
        n = len(d) if d.track_ids is not None else 0
        p = packed[at:at + n]
        at += n
        out.append((p[:, :4], p[:, 4].astype(np.int64), p[:, 5].astype(np.int64)))
    return out
