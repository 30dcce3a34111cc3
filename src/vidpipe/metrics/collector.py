"""The Prometheus metrics of one run, in their own ``CollectorRegistry`` (never the process-wide
default one: two runs in one process, or a test, never share or collide).

Two kinds of series:

- read from ``run.status()`` at each scrape (a custom collector; nothing to keep in step):
  per stream fps, frames in / processed, drops, reconnects, stalls, decode errors, detections,
  state and status (one 0/1 gauge per value), plus the run's uptime, frames, GPU memory and GPU /
  NVDEC utilisation (from ``get_stats()``; absent where unknown, e.g. on the CPU);
- observed per result by :meth:`RunMetrics.observe`: the capture-to-result latency histogram
  (``time.monotonic() - result.meta.captured_mono``, live frames only) and detections per class.

Labels: ``stream`` is the stream's redacted source name (:attr:`SourceSpec.name`: never a
password), ``stream_id`` its id in the run (two cameras on one URL stay apart); ``vidpipe serve``
adds ``camera`` (the camera's name).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vidpipe.types import FrameResult

__all__ = ["RunMetrics", "LATENCY_BUCKETS", "LIVE_STATES", "STREAM_STATUSES"]

#: capture-to-result latency buckets, seconds (a 30 fps frame interval is 0.033)
LATENCY_BUCKETS = (0.005, 0.01, 0.02, 0.033, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.0, 5.0, 10.0)
LIVE_STATES = ("connecting", "live", "stalled", "reconnecting", "failed", "stopped")
STREAM_STATUSES = ("pending", "running", "ok", "partial", "failed", "skipped", "removed")

_COUNTERS = (
    ("frames_in", "vidpipe_stream_frames_in", "Frames decoded from the stream (before latest-wins drops)."),
    ("frames", "vidpipe_stream_frames", "Frames whose results were delivered."),
    ("drops", "vidpipe_stream_drops", "Decoded frames dropped (latest wins); by cause in vidpipe_stream_drops_by_cause."),
    ("reconnects", "vidpipe_stream_reconnects", "Connections made after the first."),
    ("stalls", "vidpipe_stream_stalls", "Times no frame was decoded for the stall timeout."),
    ("decode_errors", "vidpipe_stream_decode_errors", "Packets or frames the decoder rejected."),
    ("detections", "vidpipe_stream_detections", "Detections delivered."),
)


class RunMetrics:
    """The metrics registry of one run.

    Args:
        status: returns a ``DetectionRun.status()``-shaped dict (called at each scrape).
        camera_of: stream id -> camera name; given, every stream series gets a ``camera`` label.
    """

    def __init__(
        self,
        status: Callable[[], Mapping[str, Any]],
        *,
        camera_of: Callable[[int], str | None] | None = None,
    ) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self._status = status
        self._camera_of = camera_of
        self.labels: tuple[str, ...] = ("stream_id", "stream") + (("camera",) if camera_of is not None else ())
        self.registry = CollectorRegistry(auto_describe=False)
        self.latency = Histogram(
            "vidpipe_stream_latency_seconds",
            "Capture-to-result latency of live frames: time.monotonic() at delivery minus the frame's capture.",
            self.labels,
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.class_detections = Counter(
            "vidpipe_class_detections",
            "Detections delivered, per class.",
            self.labels + ("class",),
            registry=self.registry,
        )
        self._lock = threading.Lock()
        self._label_cache: dict[tuple[int, str], tuple[str, ...]] = {}
        self._class_series: set[tuple[str, ...]] = set()
        self.registry.register(_StatusCollector(self))

    def label_values(self, stream_id: int, stream: str, camera: str | None = None) -> tuple[str, ...]:
        values: tuple[str, ...] = (str(stream_id), stream)
        if self._camera_of is not None:
            values += (camera if camera is not None else (self._camera_of(stream_id) or ""),)
        return values

    def observe(self, batch: "Sequence[FrameResult]", *, now: float | None = None) -> None:
        """Record one batch of delivered results: latency of live frames, detections per class.
        Call it as the batch is handed over (the latency ends there)."""
        now = time.monotonic() if now is None else now
        for r in batch:
            meta = r.meta
            key = (meta.stream_id, meta.source)
            labels = self._label_cache.get(key)
            if labels is None:
                with self._lock:
                    labels = self._label_cache[key] = self.label_values(meta.stream_id, meta.source)
            if meta.captured_mono is not None:
                self.latency.labels(*labels).observe(max(0.0, now - meta.captured_mono))
            n = len(r.detections)
            if n:
                counts: dict[int, int] = {}
                for cid in r.detections.class_ids.tolist():
                    counts[cid] = counts.get(cid, 0) + 1
                for cid, k in counts.items():
                    series = (*labels, r.names[cid] if 0 <= cid < len(r.names) else str(cid))
                    if series not in self._class_series:
                        with self._lock:
                            self._class_series.add(series)
                    self.class_detections.labels(*series).inc(k)

    def forget(self, stream_id: int) -> None:
        """Drop the observed series of ``stream_id`` (its camera was removed for good)."""
        with self._lock:
            for key in [k for k in self._label_cache if k[0] == stream_id]:
                labels = self._label_cache.pop(key)
                try:
                    self.latency.remove(*labels)
                except KeyError:
                    pass
                for series in [c for c in self._class_series if c[: len(labels)] == labels]:
                    self._class_series.discard(series)
                    self.class_detections.remove(*series)

    def status(self) -> Mapping[str, Any]:
        return self._status()


class _StatusCollector:
    """Series computed from ``status()`` at each scrape."""

    def __init__(self, metrics: RunMetrics) -> None:
        self._m = metrics

    def describe(self) -> list:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        m = self._m
        status = m.status()
        labels = list(m.labels)
        fps = GaugeMetricFamily("vidpipe_stream_fps", "Results per second over the last ~5 s.", labels=labels)
        p50 = GaugeMetricFamily(
            "vidpipe_stream_latency_p50_seconds", "Median capture-to-result latency (recent frames).", labels=labels
        )
        p99 = GaugeMetricFamily(
            "vidpipe_stream_latency_p99_seconds", "99th percentile capture-to-result latency (recent frames).",
            labels=labels,
        )
        counters = {
            key: CounterMetricFamily(name, doc, labels=labels) for key, name, doc in _COUNTERS
        }
        state = GaugeMetricFamily(
            "vidpipe_stream_state", "1 for the live stream's current state, 0 for the others.",
            labels=labels + ["state"],
        )
        stat = GaugeMetricFamily(
            "vidpipe_stream_status", "1 for the stream's current status, 0 for the others.", labels=labels + ["status"]
        )
        causes = CounterMetricFamily(
            "vidpipe_stream_drops_by_cause",
            "Decoded frames dropped, by cause: queue (the model was behind), late (the source was behind real "
            "time), slots and startup (decoder processes).",
            labels=labels + ["cause"],
        )
        for s in status.get("streams", ()):
            values = list(m.label_values(int(s["stream_id"]), str(s["source"]), s.get("camera")))
            fps.add_metric(values, float(s.get("fps") or 0.0))
            lat = s.get("latency_ms") or {}
            if lat.get("p50") is not None:
                p50.add_metric(values, float(lat["p50"]) / 1e3)
            if lat.get("p99") is not None:
                p99.add_metric(values, float(lat["p99"]) / 1e3)
            for key, fam in counters.items():
                fam.add_metric(values, float(s.get(key) or 0))
            if s.get("state") is not None:
                for name in LIVE_STATES:
                    state.add_metric(values + [name], 1.0 if s["state"] == name else 0.0)
            for name in STREAM_STATUSES:
                stat.add_metric(values + [name], 1.0 if s.get("status") == name else 0.0)
            for cause, n in sorted((s.get("drop_causes") or {}).items()):
                causes.add_metric(values + [str(cause)], float(n))
        yield from (fps, p50, p99, *counters.values(), causes, state, stat)
        yield from _run_series(status)


def _run_series(status: Mapping[str, Any]) -> Iterator[Any]:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    stats = status.get("stats") or {}
    uptime = float(status.get("uptime_s") or 0.0)
    yield GaugeMetricFamily("vidpipe_uptime_seconds", "Seconds since the run started.", value=uptime)
    yield CounterMetricFamily("vidpipe_frames", "Frames delivered, all streams.", value=float(stats.get("frames") or 0))
    streams = status.get("streams", ())
    active = sum(1 for s in streams if s.get("status") in ("pending", "running"))
    yield GaugeMetricFamily("vidpipe_streams", "Streams pending or running.", value=float(active))
    optional = (
        ("gpu_memory_mib", "vidpipe_gpu_memory_bytes", "GPU memory allocated by PyTorch.", 2**20),
        ("gpu_peak_memory_mib", "vidpipe_gpu_peak_memory_bytes", "Peak GPU memory allocated by PyTorch.", 2**20),
        ("gpu_util_percent", "vidpipe_gpu_utilization_ratio", "GPU utilisation (NVML), 0 to 1.", 0.01),
        ("nvdec_util_percent", "vidpipe_nvdec_utilization_ratio", "NVDEC utilisation (NVML), 0 to 1.", 0.01),
        ("cpu_percent", "vidpipe_process_cpu_ratio", "CPU time of the process per second of wall time.", 0.01),
    )
    for key, name, doc, scale in optional:
        value = stats.get(key)
        if value is not None:
            yield GaugeMetricFamily(name, doc, value=float(value) * scale)
