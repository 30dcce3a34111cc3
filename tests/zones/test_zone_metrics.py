"""Line and zone series on the metrics endpoint, scraped over real HTTP and parsed with
prometheus_client's parser; credentials never in a label."""

from __future__ import annotations

import types
import urllib.request

import pytest

pytest.importorskip("prometheus_client")

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from vidpipe.metrics import serve_metrics  # noqa: E402
from vidpipe.stages import StageRunner  # noqa: E402
from vidpipe.zones import Zones  # noqa: E402
from zone_scene import frame, linear  # noqa: E402


def test_crossings_entries_and_occupancy_are_scraped_per_stream_with_masked_sources():
    import dataclasses

    zones = Zones(["door=100,200,500,200"], ["bay=100,100,300,100,300,300,100,300"], hysteresis=1)
    runner = StageRunner([zones])
    path = linear((200, 150), (200, 260), range(12))
    batch = []
    for i, (x, y) in path.items():
        f = frame(i, [(1, 0, x, y), (2, 2, x + 20, 410 - y)], stream_id=1)
        batch.append(dataclasses.replace(f, meta=dataclasses.replace(f.meta, source="rtsp://admin:secret@10.0.0.9/s")))
    runner(batch)
    run = types.SimpleNamespace(stages=runner, status=lambda: {"streams": [], "stats": {}, "uptime_s": 1.0})
    with serve_metrics(run, port=0) as endpoint:
        with urllib.request.urlopen(endpoint.url, timeout=10) as resp:
            text = resp.read().decode()
    assert "secret" not in text
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    got = {(s.labels["line"], s.labels["class"], s.labels["direction"]): s.value
           for s in fams["vidpipe_line_crossings"].samples if s.name.endswith("_total")}
    assert got == {("door", "person", "out"): 1.0, ("door", "car", "in"): 1.0}
    sample = fams["vidpipe_line_crossings"].samples[0]
    assert sample.labels["stream_id"] == "1" and sample.labels["stream"] == "rtsp://***@10.0.0.9/s"
    occ = {s.labels["zone"]: s.value for s in fams["vidpipe_zone_occupancy"].samples}
    assert occ == {"bay": 2.0}
    entries = {s.labels["class"]: s.value for s in fams["vidpipe_zone_entries"].samples if s.name.endswith("_total")}
    assert entries == {"person": 1.0, "car": 1.0}
