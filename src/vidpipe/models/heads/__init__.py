"""Output heads: a registry from a head's name (``ModelInfo.head``) to its :class:`Head` class.

Adding a head: write ``heads/<name>.py`` with a ``Head`` subclass whose ``name`` is its key, and
add it to ``HEADS`` below (or call :func:`register_head` from outside the package). Head modules
import torch only inside their functions, so importing this package stays light.
"""

from __future__ import annotations

from vidpipe.errors import ModelError
from vidpipe.models.base import Head
from vidpipe.models.heads.yolo import YoloV5Head

__all__ = ["HEADS", "available_heads", "get_head", "register_head"]

HEADS: dict[str, type[Head]] = {
    YoloV5Head.name: YoloV5Head,
}


def register_head(cls: type[Head]) -> type[Head]:
    """Register ``cls`` under ``cls.name`` (usable as a class decorator); returns ``cls``."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise ModelError(f"{cls.__name__} has no `name` to register it under")
    HEADS[name] = cls
    return cls


def available_heads() -> tuple[str, ...]:
    return tuple(sorted(HEADS))


def get_head(name: str) -> Head:
    """A new instance of the head called ``name`` (ModelError listing the known ones if none)."""
    cls = HEADS.get(name)
    if cls is None:
        raise ModelError(f"unknown output head {name!r}; known heads: {', '.join(available_heads())}")
    return cls()
