"""Colours of boxes, labels, lines and zones: one fixed palette, picked by class id or track id.

The palette is 20 well separated RGB colours (a Kelly / Tableau-like mix chosen for contrast on
video); an id picks ``PALETTE[id % 20]`` (negative ids by their absolute value). Label text is
black on light colours and white on dark ones (luma above 150 of 255).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["PALETTE", "text_colour", "palette_tensor"]

PALETTE: tuple[tuple[int, int, int], ...] = (
    (230, 25, 75), (60, 180, 75), (255, 225, 25), (0, 130, 200), (245, 130, 48),
    (145, 30, 180), (70, 240, 240), (240, 50, 230), (210, 245, 60), (250, 190, 212),
    (0, 128, 128), (220, 190, 255), (170, 110, 40), (255, 250, 200), (128, 0, 0),
    (170, 255, 195), (128, 128, 0), (255, 215, 180), (0, 0, 128), (128, 128, 128),
)  # fmt: skip


def text_colour(rgb: tuple[int, int, int]) -> tuple[int, int, int]:
    """Black or white, whichever reads better on ``rgb`` (BT.601 luma threshold 150)."""
    r, g, b = rgb
    return (0, 0, 0) if 0.299 * r + 0.587 * g + 0.114 * b > 150 else (255, 255, 255)


def palette_tensor(device: "torch.device") -> "torch.Tensor":
    """``(20, 2, 3)`` int64 on ``device``: ``[:, 0]`` the colour, ``[:, 1]`` its label text colour."""
    import torch

    rows = [[c, text_colour(c)] for c in PALETTE]
    return torch.tensor(rows, dtype=torch.int64, device=device)
