"""Fixtures of the serve tests (imported by the test modules; not a conftest, whose module name
would shadow tests/conftest.py for ``from conftest import ...``). Clips: the first frames of the bundled street video (real people and
bicycles, so the detector finds something), re-encoded small so a 2-core CPU keeps up."""

from __future__ import annotations

from pathlib import Path

import pytest

from vidpipe.data import sample_video

#: model input size for the CPU tests (YOLOv3-tiny at 160 px: ~30 frames/s on 2 cores)
IMGSZ = 160


def cut(dst: Path, frames: int, *, start: int = 0, width: int = 320, fps: int = 25) -> Path:
    """Frames ``start`` to ``start + frames - 1`` of ``bikes.mp4`` at ``width`` pixels wide,
    H.264, ``fps``."""
    import av

    with av.open(str(sample_video())) as src, av.open(str(dst), "w") as out:
        vin = src.streams.video[0]
        height = round(vin.height * width / vin.width / 2) * 2
        vout = out.add_stream("libx264", rate=fps)
        vout.width, vout.height, vout.pix_fmt = width, height, "yuv420p"
        vout.options = {"g": "10", "bf": "0", "crf": "20", "preset": "veryfast"}
        n = 0
        for i, frame in enumerate(src.decode(vin)):
            if i < start:
                continue
            img = frame.reformat(width=width, height=height, format="yuv420p")
            img.pts = None
            out.mux(vout.encode(img))
            n += 1
            if n == frames:
                break
        out.mux(vout.encode(None))
    return dst


@pytest.fixture(scope="session")
def clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``short`` (24 frames) and ``long`` (225 frames: to the end) of bikes.mp4 from frame 25 on
    (where people and bicycles pass from the start), 320 px wide."""
    d = tmp_path_factory.mktemp("serve-clips")
    return {"short": cut(d / "short.mp4", 24, start=25), "long": cut(d / "long.mp4", 225, start=25)}
