"""``vidpipe detect --resume`` on real killed runs: a ``python -m vidpipe detect`` process killed
with SIGKILL at seeded random moments (after a random number of rows reached the table), then
``--resume``: the final table must equal an uninterrupted run's, row for row and byte for byte.

The independent check is the uninterrupted run of the same inputs and options. Also: inputs
done are not decoded again (the summary counts only the others), other options are refused with
one line naming the difference, and stateful flags are refused.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX signals")

FRAMES = 60  # per input
ARGS = ["--device", "cpu", "--batch-size", "4", "--imgsz", "160", "--progress", "off", "--max-frames", str(FRAMES)]


def vidpipe(*args, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vidpipe", "detect", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, timeout=timeout)


def data_rows(path: Path) -> int:
    try:
        return max(0, path.read_bytes().count(b"\n") - 1)
    except FileNotFoundError:
        return 0


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> Path:
    """Two inputs (copies of the bundled bikes clip, real detections) and their uninterrupted table."""
    from vidpipe.data import sample_video

    d = tmp_path_factory.mktemp("resume")
    for name in ("a.mp4", "b.mp4"):
        shutil.copy(sample_video(), d / name)
    p = vidpipe("a.mp4", "b.mp4", *ARGS, "-o", "ref.csv", "-q", cwd=d)
    assert p.returncode == 0, p.stderr
    assert data_rows(d / "ref.csv") > 40  # enough rows to kill in between
    return d


def split(table: bytes) -> dict[str, bytes]:
    """A single table's per-input tables (header + that input's rows), as ``-o FOLDER/`` writes them."""
    header, *rows = table.decode().splitlines(keepends=True)
    out: dict[str, str] = {}
    for r in rows:
        src = r.split(",", 1)[0]
        out[src] = out.get(src, header) + r
    return {k: v.encode() for k, v in out.items()}


def _kill_at(args: list[str], out: Path, rows: int, cwd: Path, *, resume: bool) -> tuple[int, str]:
    """Run ``vidpipe detect args`` and SIGKILL it once ``out`` has ``rows`` data rows (or it
    ended); its rows and meta status then."""
    proc = subprocess.Popen([sys.executable, "-m", "vidpipe", "detect", *args, *(["--resume"] if resume else []), "-q"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=cwd)  # fmt: skip
    deadline = time.monotonic() + 120
    while data_rows(out) < rows and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    return data_rows(out), json.loads(Path(f"{out}.meta.json").read_text())["status"]


ATTEMPTS = 4


@pytest.mark.parametrize("trial, mode", [(0, "single"), (1, "single"), (2, "folder")])
def test_sigkill_then_resume_equals_uninterrupted(clips, tmp_path, trial, mode):
    ref = (clips / "ref.csv").read_bytes()
    total = ref.count(b"\n") - 1
    # a seeded random moment while input a is written (b's rows, held in memory for input
    # order, come out at once when a is done: a kill then often finds the run finished)
    a_rows = ref.count(b"\na.mp4,")
    first = random.Random(15 + trial).randint(1, a_rows // 2)
    # The kill must land while input a is being written. On a loaded machine the command can
    # write a's last rows between two polls: then the same trial starts over in a new folder,
    # killing sooner (halved), rather than testing a run that was not cut short.
    for attempt in range(ATTEMPTS):
        work = tmp_path / f"attempt{attempt}"
        work.mkdir()
        for name in ("a.mp4", "b.mp4"):
            os.link(clips / name, work / name)
        out = work / "dets.csv" if mode == "single" else work / "out" / "a.detections.csv"
        target = out if mode == "single" else work / "out"
        args = ["a.mp4", "b.mp4", *ARGS, "-o", f"{target}{'/' if mode == 'folder' else ''}"]
        threshold = max(1, first >> attempt)
        kills = [threshold] if trial != 1 else [threshold, threshold + (a_rows - threshold) // 2]  # 1: killed twice
        cut_short = True
        for n, rows in enumerate(kills):
            killed_rows, status = _kill_at(args, out, rows, work, resume=n > 0)
            cut_short = cut_short and status == "running" and 0 < killed_rows < a_rows
        if cut_short:
            break
    else:
        pytest.fail(f"trial {trial}: the command finished input a before a kill in {ATTEMPTS} attempts")
    p = vidpipe(*args, "--resume", cwd=work)
    assert p.returncode == 0, p.stderr
    assert "a.mp4: resuming at frame" in p.stderr, p.stderr  # the input cut short went on, not over
    if mode == "single":
        assert out.read_bytes() == ref, f"trial {trial}: killed after {killed_rows} of {total} rows"
        meta = json.loads((work / "dets.csv.meta.json").read_text())
        assert meta["status"] == "complete" and meta["rows"] == total
        assert meta["resume"]["done"] == ["a.mp4", "b.mp4"]
    else:
        for src, table in split(ref).items():
            path = target / src.replace(".mp4", ".detections.csv")
            assert path.read_bytes() == table, f"trial {trial}: {path.name}, killed after {killed_rows} rows of a"
            assert json.loads(Path(f"{path}.meta.json").read_text())["status"] == "complete"
    if trial == 0:  # resumed again: every input is done, nothing is decoded
        p = vidpipe(*args, "--resume", cwd=work)
        assert p.returncode == 0 and "every input is done" in p.stdout, (p.stdout, p.stderr)
        assert out.read_bytes() == ref


@pytest.fixture
def cli_main():
    """``vidpipe.cli.main`` in this process, the ``vidpipe`` logger restored afterwards."""
    import logging

    from vidpipe.cli import main

    log = logging.getLogger("vidpipe")
    saved = (log.handlers[:], log.level, log.propagate)
    yield main
    log.handlers[:], log.level, log.propagate = saved[0], saved[1], saved[2]


def test_done_tables_are_skipped_and_other_options_refused(clips, tmp_path, monkeypatch, capsys, cli_main):
    main = cli_main

    for name in ("a.mp4", "b.mp4"):
        os.link(clips / name, tmp_path / name)
    p = vidpipe("a.mp4", *ARGS, "-o", "out/", "-q", cwd=tmp_path)  # a's table complete
    assert p.returncode == 0, p.stderr
    a_table = (tmp_path / "out" / "a.detections.csv").read_bytes()
    mtime = (tmp_path / "out" / "a.detections.csv").stat().st_mtime_ns
    p = vidpipe("a.mp4", "b.mp4", *ARGS, "-o", "out/", "--resume", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "a.mp4 is done; skipped" in p.stderr
    assert f"1 source: {FRAMES} frames" in p.stdout  # only b was decoded
    assert (tmp_path / "out" / "a.detections.csv").read_bytes() == a_table
    assert (tmp_path / "out" / "a.detections.csv").stat().st_mtime_ns == mtime
    # the per-input tables hold what the single reference table holds, input by input
    ref = split((clips / "ref.csv").read_bytes())
    assert a_table == ref["a.mp4"] and (tmp_path / "out" / "b.detections.csv").read_bytes() == ref["b.mp4"]
    # other options: one line naming the difference, exit 2, nothing touched (in this process: quick)
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["detect", "a.mp4", "b.mp4", *ARGS, "--conf", "0.3", "-o", "out/", "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0 and "--conf 0.25" in err and "--conf 0.3" in err, err
    assert main(["detect", "a.mp4", *ARGS, "--track", "-o", "out/", "--resume"]) == 2
    err = capsys.readouterr().err
    assert "--track" in err and err.strip().count("\n") == 0, err
    assert (tmp_path / "out" / "a.detections.csv").read_bytes() == a_table
