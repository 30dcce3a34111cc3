"""End to end on real pixels: a real person (cut from the Darknet sample photo person.jpg) walks
across a generated street, the bundled COCO model detects her, the tracker tracks her, and the
zones stage counts one crossing "in" and one zone entry; the CLI writes the counts to the
output's .meta.json. Needs the tracker (``vidpipe.track``, ``detect(..., track=True)``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

PERSON = Path(__file__).resolve().parents[1] / "data" / "images" / "person.jpg"
PERSON_BOX = (178, 100, 284, 386)  # around the model's box of the person (184, 106, 277, 380)
W, H, FRAMES, FPS = 640, 384, 40, 10
LINE = "door=320,0,320,384"  # drawn downwards: moving right (east) is "in"
ZONE = "right=400,0,640,0,640,384,400,384"

@pytest.fixture(scope="module")
def walk_clip(tmp_path_factory) -> Path:
    """The person walks from x=60 to x=560 (her feet's centre) over 40 frames at 10 fps."""
    import av
    import cv2

    img = cv2.cvtColor(cv2.imread(str(PERSON)), cv2.COLOR_BGR2RGB)
    x1, y1, x2, y2 = PERSON_BOX
    crop = img[y1:y2, x1:x2]
    ch, cw = crop.shape[:2]
    bg = np.zeros((H, W, 3), np.uint8)
    bg[:] = (118, 122, 110)
    bg[300:] = (90, 90, 92)  # a road
    path = tmp_path_factory.mktemp("zones") / "walk.mp4"
    with av.open(str(path), "w") as out:
        s = out.add_stream("libx264", rate=FPS)
        s.width, s.height, s.pix_fmt = W, H, "yuv420p"
        s.options = {"crf": "18"}
        for i in range(FRAMES):
            cx = 60 + (560 - 60) * i / (FRAMES - 1)
            left = int(round(cx - cw / 2))
            frame = bg.copy()
            lo, hi = max(0, left), min(W, left + cw)
            frame[H - 10 - ch:H - 10, lo:hi] = crop[:, lo - left:hi - left]
            for p in s.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                out.mux(p)
        for p in s.encode():
            out.mux(p)
    return path


def test_the_clip_has_the_person_detected_where_she_walks(walk_clip):
    """Checks the scene itself (no tracker needed): the model finds her in most frames."""
    import vidpipe

    found = 0
    for r in vidpipe.detect(str(walk_clip), device="cpu", classes="person", results_on_host=True):
        b = r.detections.boxes.numpy()
        cx = 60 + 500 * r.index / (FRAMES - 1)
        if len(b) and np.any(np.abs((b[:, 0] + b[:, 2]) / 2 - cx) < 40):
            found += 1
    assert found >= FRAMES * 0.8, found


def test_python_run_counts_one_crossing_and_one_entry(walk_clip):
    import vidpipe
    from vidpipe.zones import Zones

    zones = Zones([LINE], [ZONE])
    run = vidpipe.detect(str(walk_clip), device="cpu", classes="person", track=True, stages=[zones])
    evs = [e for r in run for e in r.events]
    assert [(e.kind, e.name, e.direction, e.class_name) for e in evs if e.kind == "cross"] == [
        ("cross", "door", "in", "person")]
    assert [e.kind for e in evs if e.name == "right"] == ["enter"]
    rep = run.summary().stages["zones"]
    assert rep["lines"]["door"]["in"] == 1 and rep["lines"]["door"]["out"] == 0
    assert rep["zones"]["right"]["entries"] == 1 and rep["zones"]["right"]["occupancy"] == 1


def test_cli_writes_zone_counts_to_the_meta_json(walk_clip, tmp_path):
    out = tmp_path / "dets.csv"
    p = subprocess.run([sys.executable, "-m", "vidpipe", "detect", str(walk_clip), "--device", "cpu", "--classes",
                        "person", "--line", LINE, "--zone", ZONE, "-o", str(out)],
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert p.returncode == 0, p.stderr
    meta = json.loads(Path(str(out) + ".meta.json").read_text())
    zones = meta["summary"]["zones"]
    assert zones["lines"]["door"]["in"] == 1 and zones["zones"]["right"]["entries"] == 1
    assert "line door: in 1, out 0" in p.stdout
