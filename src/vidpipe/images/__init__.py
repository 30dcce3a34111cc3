"""Image folders to GPU tensors: batched nvJPEG decoding, resize/letterbox, a GPU-cached Dataset.

::

    import vidpipe.images as vi

    for batch in vi.load("photos/", device="cuda", size=(640, 640)):   # letterboxed fp16 batches
        batch.data, batch.paths, batch.to_model_input()

    ds = vi.ImageDataset("train/", size=(224, 224), mode="resize", device="cuda").preload()
    for epoch in range(10):
        for batch in ds.batches(256, shuffle=True, seed=0, epoch=epoch):   # from GPU memory
            ...

Bad files (missing, empty, not an image, corrupt, truncated, too large) are skipped and
reported (``loader.skipped``, ``batch.skipped``, ``ds.skipped``), never raised mid-run.

Importing this package does not import torch; the names below load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    "DEFAULT_MAX_PIXELS",
    "EXTENSIONS",
    "ImageBatch",
    "ImageDataset",
    "ImageLoader",
    "SkippedImage",
    "list_images",
    "load",
]

_WHERE = {
    "load": "vidpipe.images.api",
    "ImageLoader": "vidpipe.images.loader",
    "ImageBatch": "vidpipe.images.batch",
    "SkippedImage": "vidpipe.images.batch",
    "ImageDataset": "vidpipe.images.dataset",
    "list_images": "vidpipe.images.listing",
    "EXTENSIONS": "vidpipe.images.formats",
    "DEFAULT_MAX_PIXELS": "vidpipe.images.config",
}

if TYPE_CHECKING:
    from vidpipe.images.api import load
    from vidpipe.images.batch import ImageBatch, SkippedImage
    from vidpipe.images.config import DEFAULT_MAX_PIXELS
    from vidpipe.images.dataset import ImageDataset
    from vidpipe.images.formats import EXTENSIONS
    from vidpipe.images.listing import list_images
    from vidpipe.images.loader import ImageLoader


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'vidpipe.images' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
