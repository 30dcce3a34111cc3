"""Triton kernels vs the PyTorch reference on CUDA (gpu marker; also run under TRITON_INTERPRET=1)."""

from __future__ import annotations

import pytest
import torch

from colorclips import frame_batch
from vidpipe.ops import triton_kernels
from vidpipe.ops.fused import nv12_to_rgb, yuv_letterbox
from vidpipe.types import ColorSpec

pytestmark = pytest.mark.gpu

CASES = [
    ("nv12", (1080, 1920), (416, 416)),  # 4.6x shrink
    ("nv12", (242, 322), (416, 416)),  # upscale, odd chroma sizes
    ("nv12", (480, 640), (384, 640)),  # mixed: shrink one axis
    ("p010", (1080, 1920), (416, 416)),
    ("p010", (64, 96), (64, 96)),  # no resize
]


@pytest.fixture(autouse=True)
def _need_triton():
    if not triton_kernels.available():
        pytest.skip(f"Triton unavailable: {triton_kernels.unavailable_reason()}")


def _data(fmt, h, w, b=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    if fmt == "nv12":
        return torch.randint(0, 256, (b, h * 3 // 2, w), generator=g, dtype=torch.uint8).cuda()
    return (torch.randint(0, 1024, (b, h * 3 // 2, w), generator=g, dtype=torch.int32) << 6).to(torch.uint16).cuda()


@pytest.mark.parametrize(
    "color", [ColorSpec("bt709", "limited"), ColorSpec("bt601", "full"), ColorSpec("bt2020", "limited")], ids=str
)
def test_rgb_kernel_is_bit_exact(color):
    batch = frame_batch(_data("nv12", 242, 322), color)
    assert torch.equal(nv12_to_rgb(batch, backend="triton"), nv12_to_rgb(batch, backend="torch"))


def test_rgb_kernel_p010():
    batch = frame_batch(_data("p010", 242, 322), ColorSpec("bt709", "full"), fmt="p010")
    diff = (nv12_to_rgb(batch, backend="triton").int() - nv12_to_rgb(batch, backend="torch").int()).abs()
    # round-to-nearest of a fused multiply-add may differ from PyTorch's at exact .5 ties: rare, 1 code
    assert diff.max() <= 1 and diff.float().mean() < 1e-3


@pytest.mark.parametrize("resample", ["darknet", "antialias"])
@pytest.mark.parametrize("method", ["two_pass", "direct"])
@pytest.mark.parametrize("fmt, hw, size", CASES)
def test_letterbox_kernels_match_torch(fmt, hw, size, method, resample):
    batch = frame_batch(_data(fmt, *hw), ColorSpec("bt709", "limited"), fmt=fmt)
    ref, geo = yuv_letterbox(batch, size, backend="torch", resample=resample)
    big = torch.full((5, 3, *size), -1.0, device="cuda")
    got, geo2 = yuv_letterbox(batch, size, backend="triton", method=method, out=big[1:4], resample=resample)
    assert geo == geo2
    # P010 rounds to nearest per sample: a rare .5 tie may flip one tap by one code (weight <= 1)
    assert (got - ref).abs().max() < (1e-4 if fmt == "nv12" else 1.01 / 255)
    assert (got - ref).abs().mean() < 1e-5
    assert (big[0] == -1).all() and (big[4] == -1).all()
    half, _ = yuv_letterbox(batch, size, backend="triton", method=method, dtype=torch.float16, resample=resample)
    assert half.dtype == torch.float16 and (half.float() - ref).abs().max() < (1e-3 if fmt == "nv12" else 1.01 / 255)
