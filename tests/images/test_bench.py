"""The images benchmark harness, its report writer and its measurements (tiny inputs, CPU)."""

from __future__ import annotations

import json
import time

import pytest
from imgfactory import encode, pattern, write
from PIL import Image

from vidpipe.bench.images import bench_images, generate_jpegs
from vidpipe.bench.report import bar_chart_png, markdown_table, write_report
from vidpipe.bench.sysstats import measure


def test_markdown_table_alignment_and_missing_values():
    rows = [{"peer": "a|b", "rate": 1234.5, "n": 3}, {"peer": "c", "rate": None, "n": 10}]
    assert markdown_table(rows, ["peer", "rate", "n"], headers={"rate": "img/s"}).splitlines() == [
        "| peer | img/s |  n |",
        "|------|------:|---:|",
        "| a\\|b | 1,234 |  3 |",
        "| c    |     - | 10 |",
    ]


def test_write_report_outputs(tmp_path):
    rows = [{"peer": "x", "v": 10.0}, {"peer": "y", "v": 30.0}, {"peer": "z", "v": None}]
    out = write_report(tmp_path, "r", rows, title="T", label="peer", value="v", unit="img/s", meta={"k": (1, 2)})
    assert json.loads(out["json"].read_text())["meta"] == {"k": [1, 2]}
    assert out["markdown"].read_text().startswith("# T\n")
    with Image.open(out["png"]) as im:
        assert im.format == "PNG" and im.width == 960
        px = im.convert("RGB")

        def bar_length(y):  # coloured (not white, grey or black) pixels on a row through a bar
            return sum(1 for x in range(im.width) if len(set(px.getpixel((x, y)))) > 1)

        # Rows start at y=56, 36 px apart, bars 26 px high: y is 3x x.
        assert bar_length(56 + 36 + 13) == pytest.approx(3 * bar_length(56 + 13), rel=0.05)
        assert bar_length(56 + 72 + 13) == 0  # "n/a", no bar


def test_bar_chart_all_missing_values(tmp_path):
    p = bar_chart_png(tmp_path / "c.png", [{"a": "only", "b": None}], label="a", value="b")
    assert p.stat().st_size > 0


def test_measure_wall_and_cpu():
    with measure() as m:
        t = time.process_time()
        while time.process_time() - t < 0.05:
            pass
    u = m.usage
    # the CPU clock starts a moment before the wall clock: allow a millisecond of difference
    assert u.wall_s >= 0.049 and u.cpu_s >= 0.05 and u.cpu_percent > 0 and u.gpu_peak_mib is None


def test_generate_jpegs_is_reused(tmp_path):
    paths = generate_jpegs(tmp_path, "720p-jpeg", 3, threads=2)
    assert len(paths) == 3
    with Image.open(paths[0]) as im:
        assert im.size == (1280, 720) and im.format == "JPEG"
    stamp = [p.stat().st_mtime_ns for p in map(__import__("pathlib").Path, paths)]
    assert generate_jpegs(tmp_path, "720p-jpeg", 3) == paths
    assert [p.stat().st_mtime_ns for p in map(__import__("pathlib").Path, paths)] == stamp
    with pytest.raises(ValueError, match="preset"):
        generate_jpegs(tmp_path, "8k-png", 1)


def test_bench_images_runs_cpu_peers(tmp_path):
    for k in range(6):
        write(tmp_path / "in" / f"{k}.jpg", encode(pattern(60, 80, seed=k)))
    r = bench_images(str(tmp_path / "in"), device="cpu", batch_size=4, threads=2, size=(32, 32),
                     peers=("pil", "nvjpeg", "vidpipe-cpu"), repeat=1)  # fmt: skip
    by = {row["key"]: row for row in r.rows}
    assert by["pil"]["images"] == 6 and by["pil"]["img_per_s"] > 0
    assert by["vidpipe-cpu"]["images"] == 6 and by["vidpipe-cpu"]["cpu_percent"] is not None
    assert by["nvjpeg"]["img_per_s"] is None and by["nvjpeg"]["note"] == "needs a CUDA device"
    assert "vidpipe CPU" in r.markdown()
    files = r.write(tmp_path / "out")
    assert json.loads(files["json"].read_text())["rows"][0]["key"] == "pil"
