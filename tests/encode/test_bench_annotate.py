"""``bench e2e --annotate``: detection alone, + drawing, + drawing and encoding, in one run."""

from __future__ import annotations

from media import make_video
from vidpipe.bench.e2e import run_e2e_bench


def test_bench_e2e_annotate_rows(tmp_path):
    clip = make_video(tmp_path / "b.mp4", width=160, height=96, frames=4, fps=10)
    result = run_e2e_bench(str(clip.path), device="cpu", cpu_frames=4, batch_size=4, peers=("vidpipe-cpu",),
                           annotate=True)
    rows = {r["peer"]: r for r in result.rows}
    assert list(rows) == ["vidpipe-cpu", "vidpipe-cpu+draw", "vidpipe-cpu+annotate"]
    for r in rows.values():
        assert r["frames"] == 4 and r["fps"] > 0, r
    assert "stages" in rows["vidpipe-cpu+draw"]["stages"]
    assert "encode " in rows["vidpipe-cpu+annotate"]["note"] and "error" not in rows["vidpipe-cpu+annotate"]["note"]
