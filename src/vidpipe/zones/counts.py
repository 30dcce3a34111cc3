"""What a zones stage has counted, per stream, and the report built from it (:class:`StreamCounts`,
:func:`build_report`). Counts are history: they survive a stream's reset (a reconnect)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["StreamCounts", "build_report"]


@dataclass
class StreamCounts:
    """Counts of one stream.

    Attributes:
        source: the stream's name (credentials masked).
        lines: ``(line, class name, "in"|"out") -> crossings``.
        entries: ``(zone, class name) -> entries``.
        visits: ``zone -> [visits ended, total dwell seconds, longest dwell seconds]``.
        occupancy: ``zone -> tracks inside now``.
        open_dwell: ``zone -> dwell so far of each visit still open`` (set at each frame).
        line_names, zone_names: the configured names, so lines and zones without counts show.
    """

    source: str
    lines: dict[tuple[str, str, str], int] = field(default_factory=dict)
    entries: dict[tuple[str, str], int] = field(default_factory=dict)
    visits: dict[str, list[float]] = field(default_factory=dict)
    occupancy: dict[str, int] = field(default_factory=dict)
    open_dwell: dict[str, list[float]] = field(default_factory=dict)
    line_names: tuple[str, ...] = ()
    zone_names: tuple[str, ...] = ()

    def cross(self, line: str, cls: str, direction: str) -> None:
        key = (line, cls, direction)
        self.lines[key] = self.lines.get(key, 0) + 1

    def enter(self, zone: str, cls: str) -> None:
        key = (zone, cls)
        self.entries[key] = self.entries.get(key, 0) + 1

    def leave(self, zone: str, dwell_s: float) -> None:
        v = self.visits.setdefault(zone, [0, 0.0, 0.0])
        v[0] += 1
        v[1] += dwell_s
        v[2] = max(v[2], dwell_s)

    def copy(self) -> "StreamCounts":
        return StreamCounts(
            self.source, dict(self.lines), dict(self.entries), {k: list(v) for k, v in self.visits.items()},
            dict(self.occupancy), {k: list(v) for k, v in self.open_dwell.items()}, self.line_names,
            self.zone_names,
        )


def _line_report(names: Iterable[str], counts: Iterable[StreamCounts]) -> dict[str, Any]:
    out: dict[str, Any] = {n: {"in": 0, "out": 0, "classes": {}} for n in names}
    for c in counts:
        for (line, cls, direction), n in sorted(c.lines.items()):
            rep = out.setdefault(line, {"in": 0, "out": 0, "classes": {}})
            rep[direction] += n
            per = rep["classes"].setdefault(cls, {"in": 0, "out": 0})
            per[direction] += n
    return out


def _zone_report(names: Iterable[str], counts: Iterable[StreamCounts]) -> dict[str, Any]:
    counts = list(counts)
    zones: dict[str, Any] = {}
    for n in names:
        zones[n] = {"occupancy": 0, "entries": 0, "classes": {}}
    dwell: dict[str, list[float]] = {}
    for c in counts:
        for zone, n in c.occupancy.items():
            zones.setdefault(zone, {"occupancy": 0, "entries": 0, "classes": {}})["occupancy"] += n
        for (zone, cls), n in sorted(c.entries.items()):
            rep = zones.setdefault(zone, {"occupancy": 0, "entries": 0, "classes": {}})
            rep["entries"] += n
            rep["classes"][cls] = rep["classes"].get(cls, 0) + n
        for zone, (k, total, longest) in c.visits.items():
            d = dwell.setdefault(zone, [0, 0.0, 0.0])
            d[0] += k
            d[1] += total
            d[2] = max(d[2], longest)
        for zone, open_ in c.open_dwell.items():
            d = dwell.setdefault(zone, [0, 0.0, 0.0])
            d[0] += len(open_)
            d[1] += sum(open_)
            d[2] = max([d[2], *open_])
    for zone, rep in zones.items():
        k, total, longest = dwell.get(zone, (0, 0.0, 0.0))
        rep["dwell_s"] = {"visits": int(k), "mean": round(total / k, 3) if k else None,
                          "max": round(longest, 3) if k else None}
    return zones


def build_report(counts: Mapping[int, StreamCounts], *, anchor: str) -> dict[str, Any]:
    """The stage's report (see :meth:`vidpipe.zones.Zones.report`)."""
    if not counts:
        return {}
    streams = list(counts.values())
    line_names = [n for c in streams for n in c.line_names]
    zone_names = [n for c in streams for n in c.zone_names]
    out: dict[str, Any] = {
        "anchor": anchor,
        "lines": _line_report(dict.fromkeys(line_names), streams),
        "zones": _zone_report(dict.fromkeys(zone_names), streams),
    }
    if len(counts) > 1:
        out["streams"] = {
            str(sid): {"source": c.source, "lines": _line_report(c.line_names, [c]),
                       "zones": _zone_report(c.zone_names, [c])}
            for sid, c in sorted(counts.items())
        }
    return out
