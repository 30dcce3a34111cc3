"""A generated clip for the follow-cam tests: a real person (cut from the Darknet sample photo
person.jpg) walks across a wide street, which the bundled COCO model detects as "person"."""

from __future__ import annotations

from pathlib import Path

import numpy as np

PERSON = Path(__file__).resolve().parents[1] / "data" / "images" / "person.jpg"
PERSON_BOX = (178, 100, 284, 386)  # around the model's box of the person (184, 106, 277, 380)
W, H, FPS = 1280, 720, 10


def walker_x(i: int, frames: int, width: int = W) -> float:
    """The person's centre x in frame ``i``: from 9.4 % to 90.6 % of the width."""
    return width * (0.094 + 0.812 * i / (frames - 1))


def make_walk_clip(path: Path, *, frames: int = 30, size: tuple[int, int] = (W, H), fps: int = FPS,
                   gop: int | None = None) -> Path:
    """``frames`` frames of ``size`` (width, height) at ``fps``; the person is scaled with the
    height (286 px tall at 720 rows). ``gop``: frames between keyframes (default x264's)."""
    import av
    import cv2

    width, height = size
    img = cv2.cvtColor(cv2.imread(str(PERSON)), cv2.COLOR_BGR2RGB)
    x1, y1, x2, y2 = PERSON_BOX
    crop = img[y1:y2, x1:x2]
    if height != H:
        crop = cv2.resize(crop, None, fx=height / H, fy=height / H, interpolation=cv2.INTER_AREA)
    ch, cw = crop.shape[:2]
    bg = np.zeros((height, width, 3), np.uint8)
    bg[:] = (118, 122, 110)
    bg[height * 7 // 9:] = (90, 90, 92)  # a road
    bg[:, :: width // 8] = (60, 60, 60)  # posts: texture to see the camera move
    foot = height - height * 5 // 36
    with av.open(str(path), "w") as out:
        s = out.add_stream("libx264", rate=fps)
        s.width, s.height, s.pix_fmt = width, height, "yuv420p"
        s.options = {"crf": "20", "preset": "ultrafast", **({"g": str(gop), "bf": "0"} if gop else {})}
        for i in range(frames):
            left = int(round(walker_x(i, frames, width) - cw / 2))
            frame = bg.copy()
            lo, hi = max(0, left), min(width, left + cw)
            frame[foot - ch:foot, lo:hi] = crop[:, lo - left:hi - left]
            for p in s.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                out.mux(p)
        for p in s.encode():
            out.mux(p)
    return path
