"""RunSummary / SourceSummary."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import torch

from vidpipe.summary import RunSummary, SourceSummary, jsonable
from vidpipe.types import Detections, FrameMeta, FrameResult


def result(source: str, stream_id: int, index: int, n: int) -> FrameResult:
    det = Detections(
        boxes=torch.zeros((n, 4)), scores=torch.ones(n), class_ids=torch.zeros(n, dtype=torch.int64),
        frame=torch.zeros(n, dtype=torch.int64),
    )
    return FrameResult(FrameMeta(source, stream_id, index, index / 25, 8, 8), det)


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
