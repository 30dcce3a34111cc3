"""Output heads: a registry from a head's name (``ModelInfo.head``) to its :class:`Head` class.

Adding a head: write ``heads/<name>.py`` with a ``Head`` subclass whose ``name`` is its key and
add it to ``HEADS`` below, as the class or as ``"module:Class"`` (imported on first use, which
keeps ``import vidpipe.models.heads`` light and free of import cycles); or call
:func:`register_head` from outside the package.
"""

from __future__ import annotations

import importlib

from vidpipe.errors import ModelError
from vidpipe.models.base import Head
from vidpipe.models.heads.yolo import YoloV5Head

__all__ = ["HEADS", "available_heads", "get_head", "register_head"]

HEADS: dict[str, type[Head] | str] = {
    YoloV5Head.name: YoloV5Head,
    "yolov8": "vidpipe.models.heads.yolov8:YoloV8Head",
    "detr": "vidpipe.models.heads.detr:DetrHead",
    "rfdetr": "vidpipe.models.heads.detr:RfDetrHead",
    "torchvision": "vidpipe.models.heads.torchvision:TorchvisionHead",
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


def _resolve(name: str, entry: type[Head] | str) -> type[Head]:
    if not isinstance(entry, str):
        return entry
    module, _, attr = entry.partition(":")
    cls = getattr(importlib.import_module(module), attr)
    HEADS[name] = cls
    return cls


def get_head(name: str) -> Head:
    """A new instance of the head called ``name`` (ModelError listing the known ones if none)."""
    entry = HEADS.get(name)
    if entry is None:
        raise ModelError(f"unknown output head {name!r}; known heads: {', '.join(available_heads())}")
    return _resolve(name, entry)()
