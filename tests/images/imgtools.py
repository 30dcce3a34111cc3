"""Shared pieces of the image tests: the decode routes under test and a small JPEG folder.

(Not a conftest.py: tests elsewhere import ``conftest`` by name, and a second one would shadow it;
so no fixtures here either, just functions.)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from imgfactory import encode, pattern, write

#: The decode routes: "cpu" (decoder="cpu": every file decoded on the reader threads),
#: "batched" (torchvision's batched decode_jpeg on the CPU device: the GPU route's code path),
#: "cuda" (nvJPEG on the GPU).
ROUTES = ["cpu", "batched", pytest.param("cuda", marks=pytest.mark.gpu, id="cuda")]

routes = pytest.mark.parametrize("route", ROUTES)


def make_loader(route: str, inputs, **kw):
    """A loader for ``route`` (see :data:`ROUTES`)."""
    import torch

    import vidpipe.images as vi
    from vidpipe.images.config import image_config
    from vidpipe.images.decode_gpu import NvjpegDecoder
    from vidpipe.images.listing import list_images
    from vidpipe.images.loader import ImageLoader

    if route == "cuda":
        return vi.load(inputs, device="cuda", **kw)
    if route == "cpu":
        return vi.load(inputs, device="cpu", decoder="cpu", **kw)
    batch_size = kw.pop("batch_size", 64)
    prefetch = kw.pop("prefetch", 2)
    cfg = image_config(device="cpu", **kw)
    return ImageLoader(
        list_images(inputs),
        cfg,
        batch_size=batch_size,
        gpu_decoder=NvjpegDecoder(torch.device("cpu")),
        decoder_desc="torchvision batch (cpu)",
        prefetch=prefetch,
    )


def jpeg_folder(tmp_path: Path) -> Path:
    """Write five JPEGs of different sizes (two in a sub-folder), named so sorting is meaningful."""
    sizes = [(48, 64), (64, 48), (30, 90), (50, 50), (40, 60)]
    names = ["a.jpg", "b.JPG", "c.jpeg", "sub/d.jpg", "sub/e.jpg"]
    for k, (name, (h, w)) in enumerate(zip(names, sizes)):
        write(tmp_path / "imgs" / name, encode(pattern(h, w, seed=k)))
    return tmp_path / "imgs"
