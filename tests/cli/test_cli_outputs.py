"""``vidpipe detect`` outputs and messages: -o FOLDER/, -o -, input order in one table, -q,
run accounting in the metadata, empty selections, NVDEC never mentioned on a CPU device, help."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import av
import pytest

from media import make_text

FAST = ["--device", "cpu", "--imgsz", "160", "--conf", "0.01", "--batch-size", "4"]


def vidpipe(*args, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "vidpipe", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=timeout
    )


def pyav_frames(path) -> int:
    with av.open(str(path)) as c:
        return sum(1 for _ in c.decode(video=0))


@pytest.fixture
def three(make_clip):
    """Three inputs; the first is the longest, so the later ones finish first."""
    return [
        make_clip(width=160, height=96, frames=40, fps=10, gop=5),
        make_clip(width=128, height=96, frames=7, fps=10, gop=3, pattern="bars"),
        make_clip(width=160, height=96, frames=11, fps=10, gop=4, pattern="gradient"),
    ]


def test_one_table_keeps_input_order_and_exact_counts(three, tmp_path):
    out = tmp_path / "all.csv"
    p = vidpipe("detect", *(c.path for c in three), *FAST, "-o", out)
    assert p.returncode == 0, p.stderr
    rows = list(csv.DictReader(out.open()))
    order = [r["source"] for r in rows]
    blocks = [s for i, s in enumerate(order) if i == 0 or order[i - 1] != s]
    assert blocks == [str(c.path) for c in three if str(c.path) in order]  # contiguous, in input order
    for src in set(order):
        frames = [int(r["frame"]) for r in rows if r["source"] == src]
        assert frames == sorted(frames)
    meta = json.loads((tmp_path / "all.csv.meta.json").read_text())
    assert meta["status"] == "complete" and meta["complete"] is True and meta["finished"] is True
    got = {s["source"]: (s["status"], s["frames"]) for s in meta["summary"]["sources"]}
    assert got == {str(c.path): ("ok", pyav_frames(c.path)) for c in three}
    assert {s["source"]: s["frames"] for s in meta["sources"]} == {str(c.path): pyav_frames(c.path) for c in three}


def test_output_folder_one_table_per_input(three, tmp_path):
    folder = tmp_path / "out"
    p = vidpipe("detect", *(c.path for c in three[:2]), *FAST, "-o", f"{folder}/", "--format", "jsonl")
    assert p.returncode == 0, p.stderr
    tables = sorted(folder.glob("*.jsonl"))
    assert [t.name for t in tables] == sorted(Path(c.path).stem + ".detections.jsonl" for c in three[:2])
    for t, clip in zip(tables, sorted(three[:2], key=lambda c: Path(c.path).stem)):
        rows = [json.loads(line) for line in t.read_text().splitlines()]
        assert rows and {r["source"] for r in rows} == {str(clip.path)}
        meta = json.loads(t.with_name(t.name + ".meta.json").read_text())
        assert meta["frames"] == pyav_frames(clip.path) and meta["status"] == "complete"


@pytest.mark.parametrize("fmt", [None, "csv"])
def test_stdout_streams_rows_logs_on_stderr(three, tmp_path, fmt):
    extra = ["--format", fmt] if fmt else []
    p = vidpipe("detect", three[1].path, three[2].path, *FAST, "-o", "-", *extra, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    if fmt == "csv":
        rows = list(csv.DictReader(io.StringIO(p.stdout)))
    else:
        rows = [json.loads(line) for line in p.stdout.splitlines()]  # nothing but JSON lines
    assert rows
    order = [r["source"] for r in rows]
    assert order == sorted(order, key=[str(three[1].path), str(three[2].path)].index)
    assert "frames" in p.stderr and "fps" in p.stderr  # the summary goes to stderr
    assert list(tmp_path.iterdir()) == []  # no file, no metadata


def test_quiet_prints_nothing_but_errors_once(three, tmp_path):
    p = vidpipe("detect", three[1].path, *FAST, "-q", "-o", tmp_path / "a.csv")
    assert p.returncode == 0 and p.stdout == "" and p.stderr == ""
    bad = make_text(tmp_path / "bad.mp4")
    p = vidpipe("detect", three[1].path, bad, *FAST, "-q", "-o", tmp_path / "b.csv")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("bad.mp4") == 1 and p.stderr.startswith("vidpipe: error:"), p.stderr


def test_only_input_failed_metadata_says_failed(tmp_path):
    bad = make_text(tmp_path / "notes.mp4")
    out = tmp_path / "dets.csv"
    p = vidpipe("detect", bad, *FAST, "-o", out)
    assert p.returncode == 2
    meta = json.loads((tmp_path / "dets.csv.meta.json").read_text())  # -o FILE exists from the start
    assert meta["complete"] is False and meta["status"] == "failed" and meta["finished"] is True, meta
    assert meta["summary"]["status"] == "failed" and meta["rows"] == 0
    assert p.stderr.count("notes.mp4") == 1, p.stderr


def test_start_past_the_end_warns(make_clip, tmp_path):
    clip = make_clip(width=160, height=96, frames=20, fps=10, gop=5)
    p = vidpipe("detect", clip.path, *FAST, "--start", "100", "-o", tmp_path / "d.csv")
    assert p.returncode == 0, p.stderr  # an empty selection is not an error; it is said clearly
    assert "start=100 s is at or past its end" in p.stdout
    assert "no frames" in p.stderr


def test_cpu_device_never_mentions_nvdec(make_clip, tmp_path):
    clip = make_clip(width=160, height=96, frames=4, fps=10, gop=2)
    p = vidpipe("detect", clip.path, *FAST, "-o", tmp_path / "d.csv")
    assert p.returncode == 0, p.stderr
    assert "nvdec" not in (p.stdout + p.stderr).lower()
    meta = json.loads((tmp_path / "d.csv.meta.json").read_text())
    (src,) = meta["summary"]["sources"]
    assert src["decoder"] == "pyav" and "nvdec" not in json.dumps(src).lower()


def test_help_texts():
    top = vidpipe("--help").stdout
    assert "Detect objects in videos" in top and "examples:" in top
    assert "thin wrappers" not in top
    info = vidpipe("info", "--help").stdout
    assert "INPUT" in info and "video files" in info
    detect = vidpipe("detect", "--help").stdout
    for word in ("ONNX", "TorchScript", "torch.export", "--max-det", "--format", "FOLDER/"):
        assert word in detect
    doctor = vidpipe("doctor", "--help").stdout
    assert "progress bar" not in doctor  # -q offers nothing that is not there


def test_max_det_caps_detections_per_frame(make_clip, tmp_path):
    clip = make_clip(width=160, height=96, frames=6, fps=10, gop=3)
    out = tmp_path / "d.csv"
    p = vidpipe("detect", clip.path, *FAST, "--conf", "0.001", "--max-det", "2", "-o", out)
    assert p.returncode == 0, p.stderr
    rows = list(csv.DictReader(out.open()))
    per_frame: dict[str, int] = {}
    for r in rows:
        per_frame[r["frame"]] = per_frame.get(r["frame"], 0) + 1
    assert per_frame and max(per_frame.values()) == 2


def test_stdout_reader_closing_the_pipe_stops_quietly(make_clip):
    clip = make_clip(width=160, height=96, frames=100, fps=10, gop=10)
    proc = subprocess.Popen(  # --conf 0.001: far more rows than a pipe buffers (64 KiB)
        [sys.executable, "-m", "vidpipe", "detect", str(clip.path), *FAST, "--conf", "0.001", "-o", "-"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    first = proc.stdout.readline()  # like `| head -1`
    assert json.loads(first)["source"] == str(clip.path)
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141, err
    assert "Traceback" not in err and "error" not in err and "Exception ignored" not in err


def test_library_messages_speak_cli_flags():
    from vidpipe.cli import cli_message

    assert cli_message("invalid batch_size=0; expected") == "invalid --batch-size 0; expected"
    assert cli_message("or pass format= one of csv") == "or pass --format one of csv"
    assert cli_message("invalid classes='person,x'") == "invalid --classes 'person,x'"
    assert cli_message("a backend=x stays") == "a backend=x stays"  # only whole argument names


def test_image_folder_and_video_in_one_table(make_clip, tmp_path):
    import shutil

    from conftest import DATA_DIR

    photos = tmp_path / "photos"
    photos.mkdir()
    jpgs = sorted((DATA_DIR / "images").glob("*.jpg"))[:3]
    for p in jpgs:
        shutil.copy(p, photos / p.name)
    clip = make_clip(width=160, height=96, frames=9, fps=10, gop=3)
    out = tmp_path / "all.jsonl"
    p = vidpipe("detect", photos, clip.path, *FAST, "-o", out)
    assert p.returncode == 0, p.stderr
    meta = json.loads((tmp_path / "all.jsonl.meta.json").read_text())
    got = {s["source"]: (s["status"], s["frames"]) for s in meta["summary"]["sources"]}
    assert got == {str(photos): ("ok", len(jpgs)), str(clip.path): ("ok", pyav_frames(clip.path))}
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    kinds = ["video" if r["source"] == str(clip.path) else "image" for r in rows]
    assert kinds == sorted(kinds, key=["image", "video"].index)  # the folder's rows first (input order)


def test_agnostic_nms_through_the_cli(bikes_path, tmp_path):
    """--agnostic: no two boxes of one frame overlap by IoU > --iou, whatever their classes."""
    import torch
    from torchvision.ops import box_iou

    def max_overlap(*extra: str) -> float:
        out = tmp_path / "d.csv"
        args = (*FAST, "--conf", "0.001", "--max-frames", "8", "--iou", "0.3", *extra)
        p = vidpipe("detect", bikes_path, *args, "-o", out, "-q")
        assert p.returncode == 0, p.stderr
        rows = list(csv.DictReader(out.open()))
        assert len({r["class_name"] for r in rows}) > 1
        worst = 0.0
        for f in {r["frame"] for r in rows}:
            b = torch.tensor([[float(r[k]) for k in ("x1", "y1", "x2", "y2")] for r in rows if r["frame"] == f])
            worst = max(worst, float(box_iou(b, b).fill_diagonal_(0).max()))
        return worst

    assert max_overlap() > 0.5  # class-aware: a person and a bicycle box may overlap
    assert max_overlap("--agnostic") <= 0.3 + 1e-3
