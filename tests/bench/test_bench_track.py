"""``vidpipe bench track``: the table and JSON of tracker quality on generated scenes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("motmetrics", reason="motmetrics (pyproject's test extra) is not installed")


def test_bench_track_cli_writes_table_and_json(tmp_path):
    out = tmp_path / "track.json"
    p = subprocess.run(
        [sys.executable, "-m", "vidpipe", "bench", "track", "--scenes", "easy,drops", "--seeds", "1", "--clip", "none",
         "--no-rate", "--json", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "MOTA" in p.stdout and "IDF1" in p.stdout
    data = json.loads(out.read_text())
    ours = [r for r in data["scenes"] if r["tracker"] == "vidpipe"]
    assert [r["scene"] for r in ours] == ["easy", "drops"]
    assert ours[0]["idf1"] > 0.95 and ours[0]["fps"] > 0
    assert data["rate"] == []
    if any(r["tracker"] == "trackers (matched)" for r in data["scenes"]):  # (trackers installed: CI has it)
        assert [(t["scene"], t["metric"]) for t in data["targets"]] == [
            ("easy", "mota"), ("easy", "idf1"), ("drops", "mota"), ("drops", "idf1")]
        assert "target: MOTA and IDF1 >= trackers (matched)" in p.stdout
    bad = subprocess.run([sys.executable, "-m", "vidpipe", "bench", "track", "--scenes", "nope"],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert bad.returncode == 2 and "unknown --scenes nope" in bad.stderr


def test_rate_rows_name_the_engine_and_the_table_shows_both():
    from vidpipe.bench.track import TrackBench, measure_rate

    rows = [measure_rate(4, frames=60, repeats=1, engine=e) for e in ("compiled", "numpy")]
    assert [r["engine"] for r in rows] == ["compiled", "numpy"]
    assert all(r["fps"] > 0 and r["objects"] == 4 and r["detections_per_frame"] > 2 for r in rows)
    table = TrackBench(rate=rows).table()
    assert "compiled" in table and "numpy" in table and table.count("detections/frame") == 1


def test_the_target_is_a_paired_difference_over_the_seeds():
    """Per scene and metric: the means, the mean of the per-seed differences and its standard
    error, met where ours is at least theirs; the table says NOT met where it is not."""
    from vidpipe.bench.track import TrackBench, _paired

    def seeds(*values):
        return [({"mota": v, "idf1": v + 0.05}, 100, 1.0) for v in values]

    rows = _paired("crowd", seeds(0.90, 0.80), seeds(0.85, 0.82))
    assert [r["metric"] for r in rows] == ["mota", "idf1"]
    mota = rows[0]
    assert mota["vidpipe"] == pytest.approx(0.85) and mota["trackers"] == pytest.approx(0.835)
    assert mota["diff"] == pytest.approx(0.015) and mota["se"] == pytest.approx(0.035)
    assert mota["met"] is True
    worse = _paired("drops", seeds(0.80), seeds(0.81))[0]
    assert worse["met"] is False and worse["se"] is None
    table = TrackBench(targets=rows + [worse]).table()
    assert "crowd     MOTA  0.8500 vs 0.8350: +0.0150 +- 0.0350  met" in table
    assert "drops     MOTA  0.8000 vs 0.8100: -0.0100  NOT met" in table
