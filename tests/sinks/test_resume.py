"""Resuming from Python: ``vidpipe.detect_to_table(..., resume=True)`` continues a table cut short.

The state a kill leaves (a CSV/JSONL table ending at a batch boundary, possibly with a partial last
line from a large write, and metadata still ``"running"``) is made from an uninterrupted run's
table by cutting it after a frame; the resumed table must equal the uninterrupted one byte for
byte, with ``frame_skip``, ``start`` and ``max_frames`` (frame numbers relative to ``start``, the
stride in step, ``max_frames`` counting the kept frames before the cut). Real SIGKILLs of the CLI
are in tests/cli/test_cli_resume.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import vidpipe
from vidpipe.sinks.resume import ResumeError

OPTS = dict(device="cpu", imgsz=160, batch_size=4)


@pytest.fixture(scope="module")
def bikes(tmp_path_factory) -> Path:
    from vidpipe.data import sample_video

    d = tmp_path_factory.mktemp("pyresume")
    shutil.copy(sample_video(), d / "bikes.mp4")
    return d / "bikes.mp4"


def dead_pid() -> int:
    """The pid of a process that has exited (a killed writer's)."""
    import subprocess

    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_a_table_still_being_written_is_not_resumed(bikes, tmp_path):
    import os

    out = tmp_path / "dets.csv"
    vidpipe.detect_to_table(bikes, out, max_frames=4, **OPTS)
    meta = json.loads(Path(f"{out}.meta.json").read_text())
    meta.update(status="running", finished=False, complete=False, pid=os.getppid())  # alive: pytest's parent
    Path(f"{out}.meta.json").write_text(json.dumps(meta))
    with pytest.raises(ResumeError, match=f"pid {os.getppid()}.* still running"):
        vidpipe.detect_to_table(bikes, out, resume=True, max_frames=4, **OPTS)


def killed(ref: Path, out: Path, last_frame: int, *, partial_line: bool) -> int:
    """Write to ``out`` what a kill after frame ``last_frame``'s batch leaves; returns the rows kept."""
    header, *rows = ref.read_text().splitlines(keepends=True)
    if ref.suffix == ".jsonl":
        keep = [r for r in [header, *rows] if json.loads(r)["frame"] <= last_frame]
        header = ""
    else:
        keep = [r for r in rows if int(r.split(",")[1]) <= last_frame]
    text = header + "".join(keep) + ('bikes.mp4,9999,99.0,0,per' if partial_line else "")
    out.write_text(text)
    meta = json.loads(Path(f"{ref}.meta.json").read_text())
    meta.update(status="running", finished=False, complete=False, pid=dead_pid())
    meta["resume"]["done"] = []
    Path(f"{out}.meta.json").write_text(json.dumps(meta))
    return len(keep)


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_resume_with_frame_skip_start_and_max_frames(bikes, tmp_path, fmt):
    opts = dict(OPTS, frame_skip=2, start=1.0, max_frames=45)
    ref = tmp_path / f"ref.{fmt}"
    summary = vidpipe.detect_to_table(bikes, ref, **opts)
    assert summary is not None and summary.status == "ok" and summary.frames == 45
    text = ref.read_text()
    frames = sorted({json.loads(r)["frame"] if fmt == "jsonl" else int(r.split(",")[1])
                     for r in text.splitlines()[(fmt == "csv"):]})
    assert frames and all(f % 2 == 0 for f in frames) and frames[-1] <= 88  # kept: 0, 2, ... 88 from start
    cuts = (frames[len(frames) // 3], frames[-2]) if fmt == "csv" else (frames[len(frames) // 2],)
    for last in cuts:
        out = tmp_path / f"dets.{fmt}"
        killed(ref, out, last, partial_line=True)
        summary = vidpipe.detect_to_table(bikes, out, resume=True, **opts)
        assert out.read_bytes() == ref.read_bytes(), f"cut after frame {last}"
        # it went on from the last frame with a row: that frame and the kept frames after it
        assert summary is not None and summary.frames == 45 - last // 2
        meta = json.loads(Path(f"{out}.meta.json").read_text())
        assert meta["status"] == "complete" and meta["rows"] == len(text.splitlines()) - (fmt == "csv")


def test_resume_refuses_other_options_naming_the_argument(bikes, tmp_path):
    out = tmp_path / "dets.csv"
    vidpipe.detect_to_table(bikes, out, max_frames=8, **OPTS)
    with pytest.raises(ResumeError, match=r"conf=0\.25.*conf=0\.5"):
        vidpipe.detect_to_table(bikes, out, resume=True, max_frames=8, conf=0.5, **OPTS)
    with pytest.raises(ResumeError, match="track="):
        vidpipe.detect_to_table(bikes, out, resume=True, max_frames=8, track=True, **OPTS)
    assert vidpipe.detect_to_table(bikes, out, resume=True, max_frames=8, **OPTS) is None  # done: skipped


def test_parquet_complete_is_skipped_unfinished_is_written_again(bikes, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "dets.parquet"
    opts = dict(OPTS, max_frames=48)
    assert vidpipe.detect_to_table(bikes, out, **opts).status == "ok"
    ref = pq.read_table(out)
    assert ref.num_rows > 0
    assert vidpipe.detect_to_table(bikes, out, resume=True, **opts) is None  # complete: not decoded
    # a kill leaves the metadata "running" and no Parquet file (only an unreadable temporary one)
    meta = json.loads(Path(f"{out}.meta.json").read_text())
    temporary = tmp_path / f".dets.parquet.tmp-{dead_pid()}"
    temporary.write_bytes(b"PAR1 unfinished")
    meta.update(status="running", finished=False, complete=False, pid=dead_pid(), temporary=str(temporary))
    meta["resume"]["done"] = []
    Path(f"{out}.meta.json").write_text(json.dumps(meta))
    out.unlink()
    summary = vidpipe.detect_to_table(bikes, out, resume=True, **opts)
    assert summary is not None and summary.frames == 48  # from the first frame
    assert pq.read_table(out).equals(ref)
    assert not temporary.exists()  # the killed run's unreadable temporary file is removed


@pytest.mark.gpu
@pytest.mark.nvdec
@pytest.mark.parametrize("processes", [0, 2], ids=["threads", "processes"])
def test_nvdec_resume_keeps_frame_numbers_and_times(bikes, tmp_path, processes):
    """On the GPU (NVDEC seeks to the keyframe before the cut): the resumed rows carry the frame
    numbers and times of the uninterrupted run. Detections are compared loosely (FP16/CUDA graphs
    and other batch shapes may move a score across the threshold); numbering exactly."""
    import csv

    opts = dict(device="cuda", decoder="nvdec", batch_size=8, decoder_processes=processes, max_frames=200)
    ref = tmp_path / "ref.csv"
    assert vidpipe.detect_to_table(bikes, ref, **opts).status == "ok"
    rows = list(csv.DictReader(ref.read_text().splitlines()))
    frames = sorted({int(r["frame"]) for r in rows})
    last = frames[len(frames) // 2]  # mid-file, past the keyframes at 1.2 and 3.04 s
    out = tmp_path / "dets.csv"
    killed(ref, out, last, partial_line=True)
    summary = vidpipe.detect_to_table(bikes, out, resume=True, **opts)
    assert summary is not None and summary.frames == 200 - last
    assert summary.sources[0].decoder == "nvdec"
    got = list(csv.DictReader(out.read_text().splitlines()))
    ref_pts = {int(r["frame"]): r["pts"] for r in rows}
    got_pts = {int(r["frame"]): r["pts"] for r in got}
    assert all(got_pts[f] == ref_pts[f] for f in got_pts.keys() & ref_pts.keys())
    common = got_pts.keys() & ref_pts.keys()
    assert len(common) >= 0.95 * len(ref_pts), (len(common), len(ref_pts))
    assert max(got_pts) <= 199 and [int(r["frame"]) for r in got] == sorted(int(r["frame"]) for r in got)
