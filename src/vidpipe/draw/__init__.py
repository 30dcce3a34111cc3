"""Annotated frames drawn with tensor ops on the frame's device (CUDA or CPU).

- :class:`Annotator`: boxes, labels (class, score, track id), lines and zones, and the privacy
  blur of chosen classes, onto a :class:`~vidpipe.types.FrameResult`'s frame; returns a new
  ``(3, H, W)`` uint8 tensor.
- :func:`blur_boxes`: pixelate box regions of an image.

Names load on first use (torch is imported then, not by ``import vidpipe.draw``).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_LAZY = {
    "Annotator": "vidpipe.draw.annotator",
    "blur_boxes": "vidpipe.draw.blur",
    "PALETTE": "vidpipe.draw.palette",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'vidpipe.draw' has no attribute {name!r}")
    return getattr(import_module(module), name)


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:
    from vidpipe.draw.annotator import Annotator
    from vidpipe.draw.blur import blur_boxes
    from vidpipe.draw.palette import PALETTE
