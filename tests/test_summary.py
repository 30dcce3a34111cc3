"""RunSummary / SourceSummary / SummaryBuilder."""

from __future__ import annotations

import json
import math
import threading
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch

from vidpipe.errors import ConfigError
from vidpipe.summary import RunSummary, SourceSummary, SummaryBuilder, jsonable
from vidpipe.types import Detections, FrameMeta, FrameResult


def result(source: str, stream_id: int, index: int, n: int) -> FrameResult:
    det = Detections(
        boxes=torch.zeros((n, 4)), scores=torch.ones(n), class_ids=torch.zeros(n, dtype=torch.int64),
        frame=torch.zeros(n, dtype=torch.int64),
    )
    return FrameResult(FrameMeta(source, stream_id, index, index / 25, 8, 8), det)


def test_builder_counts_from_many_threads():
    builder = SummaryBuilder(device="cpu", model="yolov3-tiny")
    builder.add_source(0, "a.mp4")
    builder.add_source(1, "b.mp4")

    def work(stream_id: int) -> None:
        for _ in range(2000):
            builder.add_frames(stream_id, 1)
            builder.add_detections(stream_id, 3)

    threads = [threading.Thread(target=work, args=(i % 2,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    s = builder.build(seconds=2.0)
    assert [(x.source, x.frames, x.detections) for x in s.sources] == [
        ("a.mp4", 8000, 24000), ("b.mp4", 8000, 24000)
    ]
    assert s.frames == 16000 and s.detections == 48000 and s.fps == 8000.0


def test_builder_record_and_statuses():
    builder = SummaryBuilder(device="cuda:0", model="m")
    builder.add_source(1, "cam", kind="live")
    builder.record([result("a.mp4", 0, 0, 2), result("a.mp4", 0, 1, 0), result("cam", 1, 0, 1)])
    builder.add_source(2, "broken.mp4")
    builder.set_status(2, "failed", error=OSError("moov atom not found"))
    builder.set_decoder(0, "pyav", reason="nvdec: PyNvVideoCodec not installed")
    builder.set_backend("decode", "pyav")
    builder.set_backend("model", "torch-fp32")
    builder.add_output(Path("out.csv"))
    builder.add_output("out.csv")  # de-duplicated
    builder.add_skipped("photos/bad.jpg", "not a JPEG", source="photos")
    builder.set_extra(1, "dropped", 4)
    builder.set_stat("d2h_bytes_per_frame", 48.0)

    interrupted = builder.build(seconds=0.0, default_status="partial")
    assert [x.status for x in interrupted.sources] == ["partial", "partial", "failed"]
    assert interrupted.fps == 0.0 and interrupted.status == "partial"

    s = builder.build(seconds=1.5)
    a, cam, broken = s.sources
    assert (a.frames, a.detections, a.decoder, a.status) == (2, 2, "pyav", "ok")
    assert (cam.kind, cam.frames, cam.detections, cam.extra) == ("live", 1, 1, {"dropped": 4})
    assert broken.status == "failed" and broken.error == "OSError: moov atom not found"
    assert s.frames == 3 and s.detections == 3 and s.fps == pytest.approx(2.0)
    assert s.outputs == ("out.csv",) and s.backends == {"decode": "pyav", "model": "torch-fp32"}
    assert s.status == "partial"

    d = s.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["sources"][2]["error"] == "OSError: moov atom not found"
    assert d["skipped"] == [{"path": "photos/bad.jpg", "reason": "not a JPEG", "source": "photos"}]
    assert d["stats"] == {"d2h_bytes_per_frame": 48.0}
    assert d["vidpipe_version"]

    text = s.format_text()
    for needle in ("a.mp4", "cam", "broken.mp4", "failed", "moov atom", "3 frames, 3 detections",
                   "2.0 fps", "decode=pyav", "model=torch-fp32", "out.csv", "photos/bad.jpg: not a JPEG",
                   "PyNvVideoCodec not installed", "device cuda:0"):
        assert needle in text, needle
    assert text.splitlines()[0].split()[:2] == ["a.mp4", "ok"]


def test_counts_for_unregistered_stream():
    builder = SummaryBuilder()
    builder.add_frames(3, 5)
    builder.add_source(3, "late.mp4")
    s = builder.build(seconds=1)
    assert s.sources[0].source == "late.mp4" and s.sources[0].frames == 5


def test_invalid_status_lists_choices():
    with pytest.raises(ConfigError, match="'ok', 'partial', 'failed', 'skipped'"):
        SourceSummary("a", status="done")
    with pytest.raises(ConfigError):
        SummaryBuilder().set_status(0, "exploded")


def test_run_status():
    ok = SourceSummary("a", frames=1)
    failed = SourceSummary("b", status="failed", error="x")
    assert RunSummary(sources=(ok,), frames=1).status == "ok"
    assert RunSummary(sources=(ok, failed), frames=1).status == "partial"
    assert RunSummary(sources=(failed,), frames=0).status == "failed"
    assert RunSummary(sources=(SourceSummary("c", status="skipped"),)).status == "skipped"
    assert RunSummary().status == "ok"


def test_jsonable_converts_awkward_values():
    value = {
        "path": Path("/x"), "frac": Fraction(1, 4), "nan": math.nan, "inf": -math.inf,
        "np": np.float32(1.5), "npint": np.int64(7), "t": torch.tensor(3), "tuple": (1, 2),
        "set": {"b", "a"}, "dev": torch.device("cuda", 0), 5: "int key",
    }
    out = jsonable(value)
    assert json.loads(json.dumps(out, allow_nan=False)) == {
        "path": "/x", "frac": 0.25, "nan": None, "inf": None, "np": 1.5, "npint": 7, "t": 3,
        "tuple": [1, 2], "set": ["a", "b"], "dev": "cuda:0", "5": "int key",
    }


def test_summary_nan_seconds_are_json_safe():
    s = RunSummary(seconds=math.nan, fps=math.inf, stats={"x": math.nan})
    json.dumps(s.to_dict(), allow_nan=False)
