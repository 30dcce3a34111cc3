"""The metrics endpoint on its own: a ``status()``-shaped dict (the documented schema) and observed
results in, Prometheus text scraped over real HTTP and parsed with prometheus_client's own parser,
JSON at /status. The end-to-end checks over a real run are in tests/serve/test_serve_run.py."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request

import pytest

pytest.importorskip("prometheus_client")

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from vidpipe.errors import ConfigError  # noqa: E402
from vidpipe.metrics import LATENCY_BUCKETS, MetricsServer, RunMetrics  # noqa: E402


def _stream(sid: int, source: str, **kw) -> dict:
    base = {"stream_id": sid, "source": source, "kind": "live", "status": "running", "state": "live",
            "decoder": "pyav", "frames_in": 0, "frames": 0, "drops": 0, "reconnects": 0, "stalls": 0,
            "decode_errors": 0, "detections": 0, "fps": 0.0,
            "latency_ms": {"p50": None, "p99": None, "count": 0}}  # fmt: skip
    base.update(kw)
    return base


STATUS = {
    "time": 1.7e9,
    "uptime_s": 12.5,
    "streams": [
        _stream(0, "rtsp://***@10.0.0.5/s", frames_in=310, frames=300, drops=10, drop_causes={"queue": 7, "late": 3},
                reconnects=2, stalls=1,
                decode_errors=3, detections=45, fps=29.5, latency_ms={"p50": 40.0, "p99": 95.0, "count": 300}),
        _stream(1, "clip.mp4", kind="file", status="ok", state=None, frames=250, fps=0.0),
        _stream(2, "rtsp://cam2/s", state="reconnecting"),
    ],
    "stats": {"frames": 550, "gpu_memory_mib": 512.0, "gpu_peak_memory_mib": 600.0, "gpu_util_percent": 40.0,
              "nvdec_util_percent": 25.0, "cpu_percent": 150.0},
}


def _results(sid: int, source: str, latencies: list[float], classes: list[list[int]], names=("person", "car")):
    import torch

    from vidpipe.types import Detections, FrameMeta, FrameResult

    now = time.monotonic()
    out = []
    for i, (lat, ids) in enumerate(zip(latencies, classes)):
        n = len(ids)
        dets = Detections(torch.zeros((n, 4)), torch.full((n,), 0.9), torch.tensor(ids, dtype=torch.int64),
                          torch.zeros((n,), dtype=torch.int64))  # fmt: skip
        meta = FrameMeta(source, sid, i, i / 30, 240, 320, captured_at=None if lat is None else time.time() - lat,
                         captured_mono=None if lat is None else now - lat)  # fmt: skip
        out.append(FrameResult(meta, dets, names))
    return out, now


def scrape(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/plain")
        text = resp.read().decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def value(families: dict, name: str, sample: str | None = None, **labels) -> float:
    fam = families[name]
    for s in fam.samples:
        if (sample is None or s.name == sample) and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    raise KeyError(f"{name} {sample} {labels}")


def test_metrics_and_status_over_http() -> None:
    metrics = RunMetrics(lambda: STATUS, camera_of={0: "front", 1: "clip", 2: "yard"}.get)
    results, now = _results(0, "rtsp://***@10.0.0.5/s", [0.004, 0.04, 0.09, 0.3], [[0], [0, 1], [], [0, 0, 1]])
    metrics.observe(results, now=now)
    metrics.observe(_results(1, "clip.mp4", [None], [[1]])[0])  # a file frame: no capture time, no latency
    with MetricsServer(metrics, host="127.0.0.1", port=0) as server:
        assert server.url == f"http://127.0.0.1:{server.port}/metrics"
        fam = scrape(server.url)
        front = {"stream_id": "0", "stream": "rtsp://***@10.0.0.5/s", "camera": "front"}
        assert value(fam, "vidpipe_stream_fps", **front) == 29.5
        assert value(fam, "vidpipe_stream_frames", "vidpipe_stream_frames_total", **front) == 300
        assert value(fam, "vidpipe_stream_frames_in", "vidpipe_stream_frames_in_total", **front) == 310
        for name, expected in (("drops", 10), ("reconnects", 2), ("stalls", 1), ("decode_errors", 3),
                               ("detections", 45)):  # fmt: skip
            assert value(fam, f"vidpipe_stream_{name}", f"vidpipe_stream_{name}_total", **front) == expected
        assert value(fam, "vidpipe_stream_latency_p99_seconds", **front) == pytest.approx(0.095)
        for cause, n in (("queue", 7), ("late", 3)):
            assert value(fam, "vidpipe_stream_drops_by_cause", "vidpipe_stream_drops_by_cause_total", cause=cause,
                         **front) == n  # fmt: skip
        # one 0/1 gauge per state: live for front, reconnecting for yard, none for the file
        assert value(fam, "vidpipe_stream_state", state="live", **front) == 1
        assert value(fam, "vidpipe_stream_state", state="stalled", **front) == 0
        assert value(fam, "vidpipe_stream_state", state="reconnecting", camera="yard") == 1
        assert not [s for s in fam["vidpipe_stream_state"].samples if s.labels["camera"] == "clip"]
        assert value(fam, "vidpipe_stream_status", status="ok", camera="clip") == 1
        # the histogram: 4 observations, bucket counts by latency
        h = dict(front)
        assert value(fam, "vidpipe_stream_latency_seconds", "vidpipe_stream_latency_seconds_count", **h) == 4
        assert value(fam, "vidpipe_stream_latency_seconds", "vidpipe_stream_latency_seconds_bucket", le="0.005", **h) == 1
        assert value(fam, "vidpipe_stream_latency_seconds", "vidpipe_stream_latency_seconds_bucket", le="0.1", **h) == 3
        assert value(fam, "vidpipe_stream_latency_seconds", "vidpipe_stream_latency_seconds_bucket", le="+Inf", **h) == 4
        assert value(fam, "vidpipe_stream_latency_seconds", "vidpipe_stream_latency_seconds_sum", **h) == pytest.approx(
            0.434, abs=1e-3)
        assert len(LATENCY_BUCKETS) + 1 == len(
            [s for s in fam["vidpipe_stream_latency_seconds"].samples if s.name.endswith("_bucket") and s.labels["camera"] == "front"])
        assert not [s for s in fam["vidpipe_stream_latency_seconds"].samples if s.labels.get("camera") == "clip"]
        # detections per class
        assert value(fam, "vidpipe_class_detections", "vidpipe_class_detections_total", **{"class": "person"}, **front) == 4
        assert value(fam, "vidpipe_class_detections", "vidpipe_class_detections_total", **{"class": "car"}, **front) == 2
        assert value(fam, "vidpipe_class_detections", "vidpipe_class_detections_total", **{"class": "car"}, camera="clip") == 1
        # run-wide
        assert value(fam, "vidpipe_uptime_seconds") == 12.5
        assert value(fam, "vidpipe_frames", "vidpipe_frames_total") == 550
        assert value(fam, "vidpipe_streams") == 2
        assert value(fam, "vidpipe_gpu_memory_bytes") == 512 * 2**20
        assert value(fam, "vidpipe_nvdec_utilization_ratio") == pytest.approx(0.25)
        assert value(fam, "vidpipe_gpu_utilization_ratio") == pytest.approx(0.40)

        with urllib.request.urlopen(server.status_url, timeout=10) as resp:
            assert resp.headers["Content-Type"].startswith("application/json")
            assert json.loads(resp.read()) == json.loads(json.dumps(STATUS))
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(server.url.replace("/metrics", "/nope"), timeout=10)
        assert err.value.code == 404
        metrics.forget(0)  # a camera removed for good: its observed series go
        fam = scrape(server.url)
        assert not [s for s in fam["vidpipe_stream_latency_seconds"].samples if s.labels.get("camera") == "front"]
        port = server.port
    # closed: the port is free again and nothing answers
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    with socket.socket() as s:  # (SO_REUSEADDR: past TIME_WAIT; a live listener would still refuse)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen()


def test_cpu_run_has_no_gpu_series_and_own_registry() -> None:
    status = {**STATUS, "stats": {"frames": 1, "gpu_memory_mib": None, "nvdec_util_percent": None}}
    a, b = RunMetrics(lambda: status), RunMetrics(lambda: status)
    assert a.registry is not b.registry  # two runs in one process never share series
    with MetricsServer(a, port=0) as server:
        fam = scrape(server.url)
    assert "vidpipe_gpu_memory_bytes" not in fam and "vidpipe_nvdec_utilization_ratio" not in fam
    assert set(fam["vidpipe_stream_fps"].samples[0].labels) == {"stream_id", "stream"}  # no camera label


def test_default_host_is_loopback_and_taken_port_is_a_clear_error() -> None:
    metrics = RunMetrics(lambda: STATUS)
    with MetricsServer(metrics, port=0) as server:
        assert server.host == "127.0.0.1"
        assert server._httpd.server_address[0] == "127.0.0.1"  # noqa: SLF001 - where it listens
        with pytest.raises(ConfigError, match=rf"cannot serve metrics on 127.0.0.1:{server.port} .*choose another port"):
            MetricsServer(metrics, port=server.port)
    with pytest.raises(ConfigError, match="cannot serve metrics on no-such-host.invalid"):
        MetricsServer(metrics, host="no-such-host.invalid", port=0)


def test_a_failing_status_gives_500_not_a_dead_server() -> None:
    calls = {"n": 0}

    def status():
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("boom")
        return STATUS

    with MetricsServer(RunMetrics(status), port=0) as server:
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(server.status_url, timeout=10)
        assert err.value.code == 500
        assert scrape(server.url)["vidpipe_stream_fps"].samples
