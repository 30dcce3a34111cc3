"""Prometheus metrics and a JSON status of a run, over HTTP (``--metrics-port``).

::

    run = vidpipe.detect(["rtsp://cam1/stream", "rtsp://cam2/stream"])
    with vidpipe.metrics.serve_metrics(run, port=9100) as endpoint:   # 127.0.0.1:9100
        for batch in run.batches():
            endpoint.metrics.observe(batch)      # latency histogram, detections per class
            ...

``/metrics`` is scraped by Prometheus (names in :mod:`vidpipe.metrics.collector`); ``/status``
is ``run.status()`` as JSON. Needs ``prometheus-client`` (a dependency of vidpipe).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from vidpipe.metrics.collector import LATENCY_BUCKETS, RunMetrics
from vidpipe.metrics.server import MetricsServer

if TYPE_CHECKING:
    from vidpipe.pipeline import DetectionRun

__all__ = ["RunMetrics", "MetricsServer", "serve_metrics", "LATENCY_BUCKETS"]


def serve_metrics(
    run: "DetectionRun",
    *,
    port: int = 0,
    host: str = "127.0.0.1",
    status: Callable[[], Mapping[str, Any]] | None = None,
    camera_of: Callable[[int], str | None] | None = None,
) -> MetricsServer:
    """Serve ``run``'s metrics at ``http://host:port/metrics`` and its status at ``/status``.

    Args:
        run: the run (its ``status()`` feeds both endpoints unless ``status`` is given).
        port: TCP port (``0``: a free one; read ``.port`` / ``.url``).
        host: address to listen on; the default ``127.0.0.1`` keeps it on this machine.
        status: another status function (``vidpipe serve``'s adds camera names).
        camera_of: stream id -> camera name, adding a ``camera`` label to every stream series.

    Returns:
        The running :class:`MetricsServer`; ``close()`` it (or use ``with``) to free the port.
    """
    from vidpipe.metrics.zones import add_zone_metrics

    status = status or run.status
    metrics = RunMetrics(status, camera_of=camera_of)
    add_zone_metrics(metrics, run)  # line crossings, zone entries and occupancy of a zones stage
    return MetricsServer(metrics, status=status, host=host, port=port)
