"""The virtual camera's window: :class:`Window` (a crop rectangle in source pixels) and the
wide shot of a frame (:func:`wide_window`)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Window", "wide_window", "parse_size"]


@dataclass(frozen=True, slots=True)
class Window:
    """A crop of the source frame: centre ``(cx, cy)`` and size ``w`` x ``h``, in source pixels
    (continuous coordinates: pixel ``i`` covers ``[i, i + 1)``; sub-pixel values are kept so slow
    pans do not step)."""

    cx: float
    cy: float
    w: float
    h: float

    @property
    def box(self) -> tuple[float, float, float, float]:
        """``(x1, y1, x2, y2)``."""
        return (self.cx - self.w / 2, self.cy - self.h / 2, self.cx + self.w / 2, self.cy + self.h / 2)

    def contains(self, box: "tuple[float, float, float, float]", *, area: float = 1.0) -> bool:
        """Whether ``box`` (x1, y1, x2, y2) lies inside the central ``area`` share of the window's
        width and height (``1.0``: the whole window; ``0.8``: the title-safe area)."""
        hw, hh = self.w * area / 2, self.h * area / 2
        return (box[0] >= self.cx - hw and box[2] <= self.cx + hw
                and box[1] >= self.cy - hh and box[3] <= self.cy + hh)  # fmt: skip

    def contains_point(self, x: float, y: float, *, area: float = 1.0) -> bool:
        return abs(x - self.cx) <= self.w * area / 2 and abs(y - self.cy) <= self.h * area / 2


def wide_window(width: int, height: int, aspect: float) -> Window:
    """The largest window of aspect ratio ``aspect`` (width / height) inside a ``width`` x
    ``height`` frame, centred: the whole frame at the output's aspect."""
    if width / height >= aspect:
        w, h = height * aspect, float(height)
    else:
        w, h = float(width), width / aspect
    return Window(width / 2, height / 2, w, h)


def parse_size(text: str) -> tuple[int, int]:
    """``"1280x720"`` -> ``(1280, 720)`` (width, height); raises ``ValueError`` with the reason."""
    parts = text.lower().replace("*", "x").split("x")
    if len(parts) != 2:
        raise ValueError(f"expected WIDTHxHEIGHT such as 1280x720, got {text!r}")
    try:
        w, h = int(parts[0]), int(parts[1])
    except ValueError:
        raise ValueError(f"expected WIDTHxHEIGHT such as 1280x720, got {text!r}") from None
    if not (2 <= w <= 8192 and 2 <= h <= 8192) or w % 2 or h % 2:
        raise ValueError(f"expected an even width and height from 2 to 8192, got {text!r}")
    return w, h
