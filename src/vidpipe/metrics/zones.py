"""Line and zone series of a run's zones stages (:class:`vidpipe.zones.Zones`), read from the
stage's counts at each scrape (nothing to keep in step):

- ``vidpipe_line_crossings_total{stream_id, stream[, camera], line, class, direction}``: crossings
  of each line per class, ``direction`` ``in`` or ``out`` (counter);
- ``vidpipe_zone_entries_total{stream_id, stream[, camera], zone, class}``: entries (counter);
- ``vidpipe_zone_occupancy{stream_id, stream[, camera], zone}``: tracks in the zone now (gauge).

``stream`` is the stream's source name with credentials masked, as in every other series.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vidpipe.metrics.collector import RunMetrics
    from vidpipe.pipeline import DetectionRun

__all__ = ["ZonesCollector", "add_zone_metrics"]


class ZonesCollector:
    """A Prometheus collector over zones stages (anything with ``snapshot()`` ->
    ``{stream_id: StreamCounts}``)."""

    def __init__(self, metrics: "RunMetrics", stages: Sequence[Any]) -> None:
        self._m = metrics
        self._stages = tuple(stages)

    def describe(self) -> list:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        labels = list(self._m.labels)
        crossings = CounterMetricFamily("vidpipe_line_crossings", "Line crossings per class and direction.",
                                        labels=labels + ["line", "class", "direction"])
        entries = CounterMetricFamily("vidpipe_zone_entries", "Zone entries per class.",
                                      labels=labels + ["zone", "class"])
        occupancy = GaugeMetricFamily("vidpipe_zone_occupancy", "Tracked objects in the zone now.",
                                      labels=labels + ["zone"])
        for stage in self._stages:
            for sid, c in sorted(stage.snapshot().items()):
                values = list(self._m.label_values(int(sid), c.source))
                for (line, cls, direction), n in sorted(c.lines.items()):
                    crossings.add_metric(values + [line, cls, direction], float(n))
                for (zone, cls), n in sorted(c.entries.items()):
                    entries.add_metric(values + [zone, cls], float(n))
                for zone in c.zone_names:
                    occupancy.add_metric(values + [zone], float(c.occupancy.get(zone, 0)))
        yield from (crossings, entries, occupancy)


def add_zone_metrics(metrics: "RunMetrics", run: "DetectionRun") -> None:
    """Register the line and zone series of ``run``'s zones stages in ``metrics``'s registry
    (nothing when the run has none)."""
    runner = getattr(run, "stages", None)
    stages = [s for s in getattr(runner, "stages", ()) if getattr(s, "name", None) == "zones" and hasattr(s, "snapshot")]
    if stages:
        metrics.registry.register(ZonesCollector(metrics, stages))
