"""Faults during a real ``python -m vidpipe detect`` run: each ends with one clear line, exit
code 2, and outputs that are valid for what was done.

- **Disk full (ENOSPC)**: the output folder is a tiny tmpfs mounted in a private mount namespace
  (``unshare --user --map-root-user --mount``, or ``unshare --mount`` as root), so nothing needs
  privileges outside the test; where the kernel or the container forbids both, the test skips
  with the reason (the same code path runs in the file-size-limit test, which always runs, and
  ``-o -`` into ``/dev/full`` gives a real ENOSPC anywhere).
- **A file-size limit (EFBIG)**: ``RLIMIT_FSIZE`` makes the kernel refuse a write half way: the
  CSV must end at a row boundary, with exactly the rows the metadata counts.
- **The output folder removed mid-run** (``-o DIR/x.csv`` and ``-o DIR/``): the run stops at its
  next batch with one line (its rows went with the folder; nothing is recreated).

Rows kept are held against an uninterrupted run of the same frames (same detections).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import time
from functools import cache
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux mount namespaces and resource limits")

ARGS = ["--device", "cpu", "--batch-size", "4", "--imgsz", "160", "--progress", "off", "-q"]
FRAMES = 100


def detect(*args, timeout: float = 240, **kwargs) -> subprocess.CompletedProcess:
    kwargs.setdefault("capture_output", True)
    return subprocess.run([sys.executable, "-m", "vidpipe", "detect", *map(str, args)], text=True, timeout=timeout,
                          **kwargs)  # fmt: skip


def rows_of(path: Path) -> list[dict]:
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n"), "the table must end at a row boundary"
    return list(csv.DictReader(text.splitlines()))


def one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("vidpipe: error:")]
    assert len(errors) == 1, stderr
    return errors[0]


@pytest.fixture(scope="module")
def reference(bikes_path, tmp_path_factory) -> list[dict]:
    """The rows of an uninterrupted run of the first FRAMES frames."""
    out = tmp_path_factory.mktemp("ref") / "ref.csv"
    p = detect(bikes_path, *ARGS, "--max-frames", FRAMES, "-o", out)
    assert p.returncode == 0, p.stderr
    return rows_of(out)


def kept_rows_match(rows: list[dict], reference: list[dict], frames: int) -> None:
    """``rows`` are the reference's rows of its first ``frames`` frames, whole frames only."""
    want = [r for r in reference if int(r["frame"]) < frames]
    assert len(rows) == len(want)
    for a, b in zip(rows, want):
        assert (a["frame"], a["class_name"]) == (b["frame"], b["class_name"])
        assert abs(float(a["confidence"]) - float(b["confidence"])) < 0.01
        assert all(abs(float(a[k]) - float(b[k])) <= 1.0 for k in ("x1", "y1", "x2", "y2"))


# -- disk full ------------------------------------------------------------------------------------
@cache
def _namespace() -> tuple[list[str] | None, str]:
    """How to run a shell with a private mount namespace where a tmpfs can be mounted (the
    command prefix), or ``None`` and why not."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None, "no unshare command (util-linux)"
    tries = [[unshare, "--user", "--map-root-user", "--mount"]]
    if os.geteuid() == 0:
        tries.append([unshare, "--mount"])
    why = ""
    for prefix in tries:
        p = subprocess.run([*prefix, "sh", "-c", 'd=$(mktemp -d) && mount -t tmpfs -o size=4k tmpfs "$d"'],
                           capture_output=True, text=True, timeout=30)  # fmt: skip
        if p.returncode == 0:
            return prefix, ""
        why += f"{' '.join(prefix[1:])}: {p.stderr.strip()}; "
    return None, f"cannot mount a tmpfs in a private mount namespace here ({why.rstrip('; ')})"


def detect_on_full_disk(tmp_path: Path, size: str, name: str, *args) -> tuple[subprocess.CompletedProcess, Path]:
    """``vidpipe detect ... -o MNT/name`` with MNT a tmpfs of ``size``; what MNT held at the end
    is copied to the returned folder (the mount goes with its namespace)."""
    prefix, why = _namespace()
    if prefix is None:
        pytest.skip(why)
    mnt, kept = tmp_path / "mnt", tmp_path / "kept"
    mnt.mkdir()
    kept.mkdir()
    script = ('mount -t tmpfs -o size="$SIZE" tmpfs "$MNT" || exit 99; "$PY" -m vidpipe detect "$@" -o "$MNT/$NAME"; '
              'rc=$?; cp -a "$MNT"/. "$KEPT"/; exit $rc')  # fmt: skip
    env = dict(os.environ, SIZE=size, MNT=str(mnt), KEPT=str(kept), NAME=name, PY=sys.executable)
    p = subprocess.run([*prefix, "sh", "-c", script, "sh", *map(str, args)], env=env, capture_output=True, text=True,
                       timeout=240)  # fmt: skip
    assert p.returncode != 99, p.stderr
    return p, kept


def test_disk_full_keeps_whole_rows_and_says_partial(bikes_path, tmp_path, reference):
    # 8 KiB: the metadata takes one page, the table fills the other after ~40 frames
    p, kept = detect_on_full_disk(tmp_path, "8k", "dets.csv", bikes_path, *ARGS, "--max-frames", FRAMES)
    assert p.returncode == 2, p.stderr
    line = one_error_line(p.stderr)
    assert "dets.csv" in line and "no space left on device" in line.lower()
    meta = json.loads((kept / "dets.csv.meta.json").read_text())
    assert meta["finished"] is True and meta["status"] == "partial" and meta["complete"] is False
    assert "No space left on device" in meta["reason"]
    rows = rows_of(kept / "dets.csv")
    assert 0 < meta["frames"] < FRAMES and meta["rows"] == len(rows) > 0
    kept_rows_match(rows, reference, meta["frames"])


def test_disk_full_parquet_leaves_no_half_file(bikes_path, tmp_path):
    """Parquet is written whole at the end (renamed into place): on a full disk nothing is left
    at its path, and the metadata says so."""
    p, kept = detect_on_full_disk(tmp_path, "8k", "dets.parquet", bikes_path, *ARGS, "--max-frames", 40)
    assert p.returncode == 2, p.stderr
    line = one_error_line(p.stderr)
    assert "dets.parquet" in line and "no space left on device" in line.lower()
    assert sorted(f.name for f in kept.iterdir()) == ["dets.parquet.meta.json"]  # no temporary file left
    meta = json.loads((kept / "dets.parquet.meta.json").read_text())
    assert meta["finished"] is True and meta["status"] == "partial" and "No space left on device" in meta["reason"]
    assert "nothing was written" in meta["note"]


def test_disk_full_on_stdout(bikes_path):
    """``-o -`` into ``/dev/full`` (every write: ENOSPC; needs no privileges): one line, exit 2."""
    with open("/dev/full", "w") as full:
        p = detect(bikes_path, *ARGS, "--max-frames", 40, "-o", "-", stdout=full, stderr=subprocess.PIPE,
                   capture_output=False)  # fmt: skip
    assert p.returncode == 2, p.stderr
    line = one_error_line(p.stderr)
    assert "stdout" in line and "no space left on device" in line.lower()


# -- a write refused half way (file-size limit) -----------------------------------------------------
def test_a_write_refused_half_way_leaves_whole_rows(bikes_path, tmp_path, reference):
    import resource

    out = tmp_path / "dets.csv"
    limit = 6000  # bytes: the table reaches it within the first ~40 frames; the metadata stays below

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))  # Python ignores SIGXFSZ: writes get EFBIG

    p = detect(bikes_path, *ARGS, "--max-frames", FRAMES, "-o", out, preexec_fn=limited)
    assert p.returncode == 2, p.stderr
    line = one_error_line(p.stderr)
    assert str(out) in line and "file too large" in line.lower()
    rows = rows_of(out)  # the half-written batch was cut back
    assert out.stat().st_size < limit
    meta = json.loads((tmp_path / "dets.csv.meta.json").read_text())
    assert meta["status"] == "partial" and "File too large" in meta["reason"]
    assert meta["rows"] == len(rows) > 0 and 0 < meta["frames"] < FRAMES
    kept_rows_match(rows, reference, meta["frames"])


# -- the output folder removed --------------------------------------------------------------------
@pytest.mark.parametrize("target", ["out/dets.csv", "out/"], ids=["file", "folder"])
def test_output_folder_removed_mid_run(bikes_path, tmp_path, target):
    folder = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "vidpipe", "detect", str(bikes_path), *ARGS, "-o", target],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not any(f.suffix == ".csv" and f.stat().st_size > 200 for f in folder.glob("*")):  # rows came
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no rows within 120 s"
            time.sleep(0.05)
        shutil.rmtree(folder)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2, err
    line = one_error_line(err)
    assert "was deleted while the run was writing it" in line and "is gone" in line
    assert not folder.exists()  # not recreated: the user removed it


# -- the output folder made read-only -------------------------------------------------------------
@cache
def _without_privileges() -> tuple[list[str] | None, str]:
    """A command prefix that runs a program subject to file permissions even as root (a new
    user namespace without a mapping: no capability over the files outside it), or why not."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None, "no unshare command (util-linux)"
    if os.geteuid() != 0:
        return [], ""
    p = subprocess.run([unshare, "--user", "true"], capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        return None, f"cannot create a user namespace here ({p.stderr.strip()})"
    return [unshare, "--user"], ""


def test_folder_made_read_only_keeps_the_finished_parquet(bikes_path, tmp_path):
    """The folder becomes read-only during the run: the finished Parquet file cannot be renamed
    into place; it is kept under its temporary name, which the one error line gives."""
    import pyarrow.parquet as pq

    prefix, why = _without_privileges()
    if prefix is None:
        pytest.skip(why)
    folder = tmp_path / "out"
    folder.mkdir()
    meta_path = folder / "dets.parquet.meta.json"
    proc = subprocess.Popen([*prefix, sys.executable, "-m", "vidpipe", "detect", str(bikes_path), *ARGS,
                             "--max-frames", "60", "-o", str(folder / "dets.parquet")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not meta_path.exists():  # the table is open: rows are being written
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run did not start within 120 s"
            time.sleep(0.05)
        folder.chmod(0o500)
        _, err = proc.communicate(timeout=120)
    finally:
        folder.chmod(0o700)
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2, err
    line = one_error_line(err)
    assert "dets.parquet" in line and "permission denied" in line.lower() and "left as" in line
    kept = Path(line.rsplit("left as ", 1)[1].strip("'"))
    assert kept.parent == folder and not (folder / "dets.parquet").exists()
    assert pq.read_table(kept).num_rows > 0  # complete: footer written
    assert json.loads(meta_path.read_text())["status"] == "running"  # the folder refused the update too
