"""The anchors of a box: the point that stands for the object (no heavy imports: the CLI lists them)."""

from __future__ import annotations

from typing import Literal

__all__ = ["ANCHORS", "Anchor"]

Anchor = Literal[
    "bottom_center", "center", "top_center", "bottom_left", "bottom_right", "top_left", "top_right",
    "center_left", "center_right",
]
#: anchor name -> (fraction of the width from x1, fraction of the height from y1)
ANCHORS: dict[str, tuple[float, float]] = {
    "bottom_center": (0.5, 1.0),
    "center": (0.5, 0.5),
    "top_center": (0.5, 0.0),
    "bottom_left": (0.0, 1.0),
    "bottom_right": (1.0, 1.0),
    "top_left": (0.0, 0.0),
    "top_right": (1.0, 0.0),
    "center_left": (0.0, 0.5),
    "center_right": (1.0, 0.5),
}
