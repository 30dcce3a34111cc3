"""A generated clip for the follow-cam tests: a real person (cut from the Darknet sample photo
person.jpg) walks across a wide street, which the bundled COCO model detects as "person"."""

from __future__ import annotations

from pathlib import Path

import numpy as np

PERSON = Path(__file__).resolve().parents[1] / "data" / "images" / "person.jpg"
PERSON_BOX = (178, 100, 284, 386)  # around the model's box of the person (184, 106, 277, 380)
W, H, FPS = 1280, 720, 10


def walker_x(i: int, frames: int) -> float:
    """The person's centre x in frame ``i``: from x=120 to x=1160."""
    return 120 + (1160 - 120) * i / (frames - 1)


def make_walk_clip(path: Path, *, frames: int = 30) -> Path:
    import av
    import cv2

    img = cv2.cvtColor(cv2.imread(str(PERSON)), cv2.COLOR_BGR2RGB)
    x1, y1, x2, y2 = PERSON_BOX
    crop = img[y1:y2, x1:x2]
    ch, cw = crop.shape[:2]
    bg = np.zeros((H, W, 3), np.uint8)
    bg[:] = (118, 122, 110)
    bg[560:] = (90, 90, 92)  # a road
    bg[:, ::160] = (60, 60, 60)  # posts: texture to see the camera move
    with av.open(str(path), "w") as out:
        s = out.add_stream("libx264", rate=FPS)
        s.width, s.height, s.pix_fmt = W, H, "yuv420p"
        s.options = {"crf": "20", "preset": "ultrafast"}
        for i in range(frames):
            left = int(round(walker_x(i, frames) - cw / 2))
            frame = bg.copy()
            lo, hi = max(0, left), min(W, left + cw)
            frame[H - 100 - ch:H - 100, lo:hi] = crop[:, lo - left:hi - left]
            for p in s.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                out.mux(p)
        for p in s.encode():
            out.mux(p)
    return path
