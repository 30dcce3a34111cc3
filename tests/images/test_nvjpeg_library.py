"""Which loaded library is nvJPEG: not the libraries named after it (CPU; the loader itself runs on
the GPU tests)."""

from __future__ import annotations

import pytest

from vidpipe.images.nvjpeg_hw import is_libnvjpeg


@pytest.mark.parametrize(
    "name,want",
    [
        ("libnvjpeg.so.13", True),
        ("libnvjpeg.so", True),
        ("libnvjpeg-6f7f1a52.so.12", True),  # torchvision's bundled copy
        ("libnvjpeg2k_ext.so.0.9.0", False),  # nvImageCodec's extension, loaded where DALI is imported
        ("libnvjpeg2k.so.0", False),
        ("libnvjpeg_ext.so.0.9.0", False),
    ],
)
def test_only_nvjpeg_itself_is_taken(name, want):
    assert is_libnvjpeg(name) is want
