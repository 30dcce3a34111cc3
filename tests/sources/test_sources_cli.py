"""A folder holding images and videos, through the command: every video and the images are read."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import DATA_DIR


def test_folder_with_images_and_a_video_reads_both(make_clip, tmp_path):
    folder = tmp_path / "mixed"
    folder.mkdir()
    clip = make_clip(".mp4", width=160, height=96, frames=12, fps=12, gop=6)
    shutil.copy(clip.path, folder / "clip.mp4")
    for name in ("dog.jpg", "person.jpg"):
        shutil.copy(DATA_DIR / "images" / name, folder / name)
    (folder / "notes.txt").write_text("not media\n")
    out = tmp_path / "dets.csv"
    p = subprocess.run(
        [sys.executable, "-m", "vidpipe", "detect", str(folder), "--device", "cpu", "-o", str(out)],
        capture_output=True, text=True, timeout=600,
    )
    assert p.returncode == 0, (p.stdout, p.stderr)
    meta = json.loads(Path(str(out) + ".meta.json").read_text())
    sources = {s["source"]: (s["status"], s["frames"]) for s in meta["summary"]["sources"]}
    assert sources == {str(folder / "clip.mp4"): ("ok", clip.frames), str(folder): ("ok", 2)}
    assert meta["summary"]["skipped"] == []
    rows = list(csv.DictReader(out.open()))
    assert {str(folder / "dog.jpg"), str(folder / "person.jpg")} <= {r["source"] for r in rows}
    assert "notes.txt" in p.stderr  # named as left out
