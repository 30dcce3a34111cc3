"""``vidpipe bench startup``, run as a user runs it: fresh processes, the floor beside the command."""

from __future__ import annotations

import json
import subprocess
import sys

from media import make_video


def test_a_missing_input_is_a_clear_error(tmp_path):
    p = subprocess.run([sys.executable, "-m", "vidpipe", "bench", "startup", str(tmp_path / "nope.mp4"), "--device",
                        "cpu", "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "bench startup: no such file" in p.stderr and "internal error" not in p.stderr


def _startup_report(tmp_path, *options: str) -> dict:
    """``vidpipe bench startup`` of a 12-frame clip on the CPU, once, with ``options``: its report
    (the command printed its table)."""
    clip = make_video(tmp_path / "clip.mp4", width=160, height=96, frames=12, fps=12)
    p = subprocess.run([sys.executable, "-m", "vidpipe", "bench", "startup", str(clip.path), "--device", "cpu",
                        "--repeat", "1", *options, "--out", str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "vidpipe-detect" in p.stdout
    return json.loads((tmp_path / "out" / "bench_startup.json").read_text())


def test_startup_bench_times_the_command_and_the_api_against_the_floor(tmp_path):
    """The command (one series per ``--decoder-processes`` value) and, with ``--api``, each run
    also through ``vidpipe.detect`` in a fresh Python process (the README's quick start), with the
    command's columns: the same frames and detections as the command's; the floor beside them."""
    report = _startup_report(tmp_path, "--api", "--decoder-processes", "auto,0", "--versus-bench")
    rows = {r["peer"]: r for r in report["rows"]}
    assert list(rows) == ["floor", "vidpipe-detect", "vidpipe-detect (0 processes)", "vidpipe.detect",
                          "vidpipe.detect (0 processes)"]  # fmt: skip
    floor, cli, api = rows["floor"], rows["vidpipe-detect"], rows["vidpipe.detect"]
    assert all(r["frames"] == 12 for r in report["rows"][1:])
    assert 0 < floor["wall_s"] and cli["decoder"] == "pyav"
    assert 0 < cli["first_result_s"] < cli["wall_s"]  # the summary's own time is inside the command's
    assert abs(cli["over_floor_s"] - (cli["wall_s"] - floor["wall_s"])) <= 0.011  # (each rounded to 0.01)
    target = report["meta"]["targets"]["clip.mp4"]["vidpipe-detect"]
    assert target["target_s"] == 2.0 and target["within_floor_plus_2s"] == (cli["over_floor_s"] <= 2.0)
    assert "bench_fps" not in target  # the bench rate is a GPU's
    assert cli["rate_fps"] > 0 and cli["decoder_processes"] == "0"  # PyAV on the CPU: no processes
    assert api["detections"] == cli["detections"]
    assert api["decoder"] == "pyav" and api["rate_fps"] > 0 and 0 < api["first_result_s"] < api["wall_s"]
    assert "decoder_processes=0" in rows["vidpipe.detect (0 processes)"]["note"]
    assert report["meta"]["targets"]["clip.mp4"]["vidpipe.detect"]["target_s"] == 2.0
    assert (tmp_path / "out" / "bench_startup.png").stat().st_size > 0


def test_copies_run_several_files_at_once(tmp_path):
    """``--copies 3``: each command decodes three inputs (links to the clip) in one run; its
    frames are all of theirs and its summary has three sources."""
    clip = make_video(tmp_path / "clip.mp4", width=160, height=96, frames=12, fps=12)
    p = subprocess.run([sys.executable, "-m", "vidpipe", "bench", "startup", str(clip.path), "--device", "cpu",
                        "--repeat", "1", "--copies", "3", "--out", str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert p.returncode == 0, p.stderr
    report = json.loads((tmp_path / "out" / "bench_startup.json").read_text())
    floor, detect = report["rows"]
    assert detect["input"] == "clip.mp4 x3" and detect["frames"] == 36 and detect["rate_fps"] > 0
    assert list(report["meta"]["targets"]) == ["clip.mp4 x3"]
    for k in ("0", "257"):  # one command line of them: at most MAX_COPIES
        bad = subprocess.run([sys.executable, "-m", "vidpipe", "bench", "startup", "--copies", k],
                             capture_output=True, text=True, timeout=120)  # fmt: skip
        assert bad.returncode == 2 and "--copies" in bad.stderr


def test_a_bad_series_is_a_usage_error(tmp_path):
    p = subprocess.run([sys.executable, "-m", "vidpipe", "bench", "startup", "--decoder-processes", "auto,x"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "decoder processes" in p.stderr


def test_lengths_measure_real_footage_scaled_and_looped_in_one_report(tmp_path):
    """``--lengths``: the bundled street footage scaled to ``--size`` and looped to each length (the
    clips kept in ``--cache-dir``), each measured against the floor; one report, and per length the
    fastest series named (where decoder processes start to pay, on a GPU)."""
    p = subprocess.run([sys.executable, "-m", "vidpipe", "bench", "startup", "--lengths", "12,30", "--size", "160x96",
                        "--device", "cpu", "--repeat", "1", "--cache-dir", str(tmp_path / "media"),
                        "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=600)  # fmt: skip
    assert p.returncode == 0, p.stderr
    report = json.loads((tmp_path / "out" / "bench_startup.json").read_text())
    rows = report["rows"]
    assert [r["peer"] for r in rows] == ["floor", "vidpipe-detect"] * 2
    names = [rows[0]["input"], rows[2]["input"]]
    assert names == ["bikes-160x96-30fps-12f-gop30.mp4", "bikes-160x96-30fps-30f-gop30.mp4"]
    assert [rows[1]["frames"], rows[3]["frames"]] == [12, 30]  # every frame of each length detected
    assert all(report["meta"]["targets"][n]["fastest"] == "vidpipe-detect" for n in names)
    assert sorted(f.name for f in (tmp_path / "media").iterdir()) == names  # kept for the next run


def test_bad_lengths_and_sizes_are_usage_errors(tmp_path):
    for args in (["--lengths", "0,10"], ["--lengths", "ten"], ["--size", "161x96"], ["--size", "1920"]):
        p = subprocess.run([sys.executable, "-m", "vidpipe", "bench", "startup", *args, "--device", "cpu"],
                           capture_output=True, text=True, timeout=120)  # fmt: skip
        assert p.returncode == 2 and "usage:" in p.stderr and "Traceback" not in p.stderr, (args, p.stderr)
    p = subprocess.run([sys.executable, "-m", "vidpipe", "bench", "startup", str(tmp_path / "nope.mp4"), "--lengths",
                        "10", "--device", "cpu", "--out", str(tmp_path / "out")], capture_output=True, text=True,
                       timeout=120)  # fmt: skip
    assert p.returncode == 2 and "bench startup: no such file" in p.stderr and "internal error" not in p.stderr
