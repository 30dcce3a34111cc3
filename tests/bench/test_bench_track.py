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
