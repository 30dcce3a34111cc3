"""The Triton batch resize (vidpipe.images.gpu_resize) against a float32 F.interpolate reference.

On CUDA (gpu marker), and on the CPU through Triton's interpreter (TRITON_INTERPRET=1, in a
subprocess: the variable must be set before the kernels are defined).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from vidpipe.images.decode_cpu import apply_orientation
from vidpipe.images.gpu_resize import oriented_layout
from vidpipe.images.resize import resize_images
from vidpipe.ops.letterbox import DEFAULT_RESAMPLE, interpolate_kwargs, letterbox_geometry

SRC = Path(__file__).resolve().parents[2] / "src"

#: (decoded height, width, HWC memory?) per image; orientation k % 8 + 1.
SHAPES = [(60, 80, False), (80, 60, True), (45, 100, False), (30, 30, True), (100, 40, False), (64, 48, True),
          (20, 50, False), (120, 90, True), (16, 16, False)]  # fmt: skip


def make_images(device="cpu"):
    g = torch.Generator().manual_seed(0)
    imgs, orients, sizes = [], [], []
    for k, (h, w, hwc) in enumerate(SHAPES):
        if hwc:  # what torchvision's CPU decoder returns: a (3, h, w) view of HWC memory
            img = torch.randint(0, 256, (h, w, 3), generator=g, dtype=torch.uint8).permute(2, 0, 1)
        else:
            img = torch.randint(0, 256, (3, h, w), generator=g, dtype=torch.uint8)
        o = k % 8 + 1
        imgs.append(img.to(device))
        orients.append(o)
        sizes.append(tuple(apply_orientation(img, o).shape[1:]))
    return imgs, orients, sizes


def reference(imgs, orients, sizes, size, mode):
    """float32 (B, 3, H, W) in [0, 1]: orient, F.interpolate in float32, place on grey."""
    out = torch.full((len(imgs), 3, *size), 0.5)
    for i, (img, o, (h, w)) in enumerate(zip(imgs, orients, sizes)):
        x = apply_orientation(img.cpu(), o).float()[None]
        if mode == "letterbox":
            g = letterbox_geometry(h, w, *size)
            nh, nw, x0, y0 = g.new_h, g.new_w, g.pad_x, g.pad_y
        else:
            (nh, nw), x0, y0 = size, 0, 0
        if (nh, nw) != (h, w):
            kw = interpolate_kwargs(DEFAULT_RESAMPLE, shrink=nh < h or nw < w)  # the loader's filter
            x = F.interpolate(x, size=(nh, nw), mode="bilinear", **kw)
        out[i, :, y0 : y0 + nh, x0 : x0 + nw] = (x[0] / 255).clamp(0, 1)
    return out


def check(size, mode, dtype, device) -> float:
    """Max abs difference (in [0, 1] units) of the Triton path from :func:`reference`."""
    imgs, orients, sizes = make_images(device)
    data, scale, pad = resize_images(
        imgs, sizes, size=size, mode=mode, dtype=dtype, device=torch.device(device), orientations=orients,
        backend="triton",
    )  # fmt: skip
    _, s_ref, p_ref = resize_images(
        [apply_orientation(i.cpu(), o) for i, o in zip(imgs, orients)], sizes, size=size, mode=mode,
        dtype=torch.float32, device=torch.device("cpu"),
    )  # fmt: skip
    assert torch.equal(scale, s_ref) and torch.equal(pad, p_ref)
    assert data.shape == (len(imgs), 3, *size) and data.dtype == dtype
    got = data.cpu().float() / (255 if dtype == torch.uint8 else 1)
    return float((got - reference(imgs, orients, sizes, size, mode)).abs().max())


CASES = [((48, 64), "letterbox"), ((50, 50), "resize"), ((200, 160), "letterbox")]  # shrink, both, upscale


@pytest.mark.parametrize("orientation", range(1, 9))
@pytest.mark.parametrize("hwc", [False, True])
def test_oriented_layout_matches_apply_orientation(orientation, hwc):
    img = torch.arange(3 * 5 * 7, dtype=torch.int64).reshape(3, 5, 7)
    if hwc:
        img = img.permute(1, 2, 0).contiguous().permute(2, 0, 1)
    offset, ys, xs, h, w = oriented_layout(img, orientation)
    want = apply_orientation(img, orientation)
    assert (h, w) == tuple(want.shape[1:])
    y = torch.arange(h)[:, None]
    x = torch.arange(w)[None, :]
    flat = img.as_strided((img.untyped_storage().nbytes() // 8,), (1,))
    got = torch.stack([flat[offset + c * img.stride(0) + y * ys + x * xs] for c in range(3)])
    assert torch.equal(got, want)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.uint8])
@pytest.mark.parametrize(("size", "mode"), CASES)
def test_triton_resize_on_cuda(size, mode, dtype):
    pytest.importorskip("triton")
    tol = {torch.float32: 1e-5, torch.float16: 1e-3, torch.uint8: 0.5 / 255 + 1e-5}[dtype]
    assert check(size, mode, dtype, "cuda") <= tol


@pytest.mark.gpu
def test_triton_resize_output_matches_torch_backend_on_1080p():
    """The loader's real case: 1080p decodes -> 416x416 fp16, against the F.interpolate path."""
    pytest.importorskip("triton")
    g = torch.Generator().manual_seed(1)
    imgs = [torch.randint(0, 256, (3, 1080, 1920), generator=g, dtype=torch.uint8).cuda() for _ in range(3)]
    kw = dict(size=(416, 416), mode="letterbox", dtype=torch.float32, device=torch.device("cuda"))
    a, _, _ = resize_images(imgs, [(1080, 1920)] * 3, backend="triton", **kw)
    b, _, _ = resize_images(imgs, [(1080, 1920)] * 3, backend="torch", **kw)
    # Darknet's two taps per axis, summed in another order than F.interpolate's: measured on an
    # H200 7e-5 (0.02 of a level), float32 rounding only
    assert (a - b).abs().max() < 2e-4


def test_triton_resize_in_the_interpreter():
    """The same kernels on CPU tensors (Triton's interpreter), for CI machines without a GPU."""
    pytest.importorskip("triton")
    code = (
        "import sys, torch; sys.path.insert(0, sys.argv[1]); import test_gpu_resize as t\n"
        "print(max(t.check(*t.CASES[0], torch.float32, 'cpu'), t.check(*t.CASES[1], torch.uint8, 'cpu')))"
    )
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join([str(SRC), str(Path(__file__).parent)])}
    r = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent)], env=env, capture_output=True,
                       text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert float(r.stdout.strip().splitlines()[-1]) <= 0.5 / 255 + 1e-5
