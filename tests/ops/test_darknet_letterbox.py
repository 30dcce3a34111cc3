"""The default letterbox is Darknet's: geometry, resize filter, grey, on every path.

The reference is an independent NumPy port of pjreddie/darknet ``src/image.c``
(``letterbox_image``: ``new_w = w; new_h = (im.h * w) / im.w`` in integers when the width limits,
``embed_image`` at ``((w - new_w) / 2, (h - new_h) / 2)`` on ``fill_image(boxed, .5)``;
``resize_image``: a horizontal then a vertical pass, ``x_src = x * (im.w - 1) / (w - 1)``, the last
column copied). Darknet computes ``r * h_scale`` in float32, so for many sizes the last row lands
a hair below the last source row and, as the vertical pass adds no second tap there, comes out
almost black (e.g. 16 -> 416 rows, 97 -> 308); the port computes the source row exactly (in
integers), as ``F.interpolate(align_corners=True)`` does, and so leaves that artefact out.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from colorclips import frame_batch
from vidpipe.errors import ConfigError
from vidpipe.ops.fused import nv12_to_rgb, resample_taps, taps_for, yuv_letterbox
from vidpipe.ops.letterbox import DEFAULT_RESAMPLE, PAD_VALUE, letterbox, letterbox_geometry
from vidpipe.types import ColorSpec

SRC = Path(__file__).resolve().parents[2] / "src"


def darknet_geometry(ih: int, iw: int, h: int, w: int) -> tuple[int, int, int, int]:
    """(new_w, new_h, dx, dy) of darknet's letterbox_image / embed_image (a side that would be 0
    pixels, which Darknet cannot resize to, is kept at 1)."""
    if w / iw < h / ih:
        new_w, new_h = w, max(1, (ih * w) // iw)
    else:
        new_h, new_w = h, max(1, (iw * h) // ih)
    return new_w, new_h, (w - new_w) // 2, (h - new_h) // 2


def darknet_resize(im: np.ndarray, w: int, h: int) -> np.ndarray:
    """darknet resize_image, ``im`` float (c, H, W) in [0, 1] -> (c, h, w), two passes."""
    c, ih, iw = im.shape
    part = np.empty((c, ih, w))
    w_scale = (iw - 1) / (w - 1) if w > 1 else 0.0
    for col in range(w):
        if col == w - 1 or iw == 1:
            part[:, :, col] = im[:, :, iw - 1]
        else:
            sx = col * w_scale
            ix = int(sx)
            dx = sx - ix
            part[:, :, col] = (1 - dx) * im[:, :, ix] + dx * im[:, :, ix + 1]
    out = np.empty((c, h, w))
    for row in range(h):
        iy, rem = divmod(row * (ih - 1), h - 1) if h > 1 else (0, 0)  # exact row * h_scale
        dy = rem / (h - 1) if h > 1 else 0.0
        out[:, row] = (1 - dy) * part[:, iy]
        if not (row == h - 1 or ih == 1):
            out[:, row] += dy * part[:, iy + 1]
    return out


def darknet_letterbox(rgb: np.ndarray, h: int, w: int) -> np.ndarray:
    """uint8 (3, H, W) -> float (3, h, w): darknet's letterbox_image."""
    new_w, new_h, dx, dy = darknet_geometry(rgb.shape[1], rgb.shape[2], h, w)
    out = np.full((3, h, w), 0.5)
    out[:, dy : dy + new_h, dx : dx + new_w] = darknet_resize(rgb.astype(np.float64) / 255.0, new_w, new_h)
    return out


@pytest.mark.parametrize(
    "hw, size",
    [((272, 640), (416, 416)), ((576, 768), (416, 416)), ((1080, 1920), (416, 416)), ((480, 360), (416, 416)),
     ((375, 500), (416, 416)), ((17, 5), (416, 416)), ((720, 1280), (320, 608)), ((1, 1000), (416, 416)),
     ((416, 416), (416, 416))],
)  # fmt: skip
def test_geometry_is_darknets(hw, size):
    g = letterbox_geometry(*hw, *size)
    assert (g.new_w, g.new_h, g.pad_x, g.pad_y) == darknet_geometry(*hw, *size)
    assert g.scale == pytest.approx(min(size[1] / hw[1], size[0] / hw[0]))  # the limiting side
    assert (g.sx, g.sy) == (g.new_w / hw[1], g.new_h / hw[0])  # what the content is resized by


def test_bikes_geometry():
    """The bundled clip: 640x272 -> 416x176 at row 120 (a rounded size would be 177 at row 119)."""
    g = letterbox_geometry(272, 640, 416, 416)
    assert (g.new_h, g.new_w, g.pad_y, g.pad_x) == (176, 416, 120, 0)
    assert g.sx == 0.65 and g.sy == pytest.approx(0.6470588) and g.sy < g.scale


@pytest.mark.parametrize("hw", [(272, 640), (97, 131), (480, 360), (30, 500)])
def test_letterbox_equals_darknets(hw):
    g = torch.Generator().manual_seed(hw[0])
    rgb = torch.randint(0, 256, (1, 3, *hw), dtype=torch.uint8, generator=g)
    want = darknet_letterbox(rgb[0].numpy(), 416, 416)
    exact, _ = letterbox(rgb, (416, 416), exact=True)
    assert np.abs(exact[0].double().numpy() - want).max() < 1e-4  # float32 arithmetic
    fast, _ = letterbox(rgb, (416, 416), exact=False)  # uint8 resize on the CPU: whole levels
    assert np.abs(fast[0].double().numpy() - want).max() <= 1.0 / 255 + 1e-6  # fixed-point weights
    assert DEFAULT_RESAMPLE == "darknet" and PAD_VALUE == 0.5


def test_antialias_is_still_available_and_differs():
    g = torch.Generator().manual_seed(0)
    rgb = torch.randint(0, 256, (1, 3, 272, 640), dtype=torch.uint8, generator=g)
    dk, geo = letterbox(rgb, (416, 416), exact=True)
    aa, geo2 = letterbox(rgb, (416, 416), exact=True, resample="antialias")
    assert geo == geo2 and (dk - aa).abs().max() > 0.1
    with pytest.raises(ConfigError, match="resample"):
        letterbox(rgb, (416, 416), resample="bicubic")


@pytest.mark.parametrize("n_in, n_out", [(1920, 416), (272, 176), (100, 416), (7, 7), (5, 1), (1, 9)])
def test_darknet_taps_reproduce_interpolate(n_in, n_out):
    x = torch.rand(1, 1, 1, n_in, dtype=torch.float64)
    ref = F.interpolate(x, size=(1, n_out), mode="bilinear", align_corners=True)[0, 0, 0]
    idx, w = resample_taps(n_in, n_out, antialias=False, align_corners=True)
    assert idx.shape == (n_out, 2) and idx.min() >= 0 and idx.max() < n_in
    got = (x[0, 0, 0][torch.from_numpy(idx.astype("int64"))] * torch.from_numpy(w.copy()).double()).sum(1)
    assert (got - ref).abs().max() < 1e-6
    assert taps_for(n_in, n_out, shrink=n_out < n_in)[0].shape[1] == 2  # two taps, shrinking or not
    with pytest.raises(ValueError, match="antialias"):
        resample_taps(n_in, n_out, antialias=True, align_corners=True)


def _nv12(b, h, w, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(16, 236, (b, h * 3 // 2, w), generator=g, dtype=torch.uint8)


@pytest.mark.parametrize("resample", ["darknet", "antialias"])
def test_fused_torch_path_equals_letterbox_of_rgb(resample):
    batch = frame_batch(_nv12(2, 272, 640), ColorSpec("bt709", "limited"))
    got, geo = yuv_letterbox(batch, (416, 416), backend="torch", resample=resample)
    want, geo2 = letterbox(nv12_to_rgb(batch), (416, 416), exact=True, resample=resample)
    assert geo == geo2 and (got - want).abs().max() < 1e-4


_INTERP = """
import sys, torch
sys.path.insert(0, sys.argv[1])
from colorclips import frame_batch
from vidpipe.ops.fused import yuv_letterbox
from vidpipe.types import ColorSpec
worst = 0.0
for (h, w), size, method in [((68, 160), (104, 104), "two_pass"), ((36, 48), (32, 64), "direct"),
                             ((40, 96), (32, 40), "direct")]:
    g = torch.Generator().manual_seed(h)
    data = torch.randint(16, 236, (2, h * 3 // 2, w), generator=g, dtype=torch.uint8)
    batch = frame_batch(data, ColorSpec("bt709", "limited"))
    for resample in ("darknet", "antialias"):
        ref, _ = yuv_letterbox(batch, size, backend="torch", resample=resample)
        got, _ = yuv_letterbox(batch, size, backend="triton", method=method, resample=resample)
        worst = max(worst, float((got - ref).abs().max()))
print(worst)
"""


def test_fused_triton_kernels_in_the_interpreter():
    """The NVDEC letterbox kernels (Darknet and antialiased taps) on CPU tensors, Triton's interpreter."""
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join([str(SRC), str(Path(__file__).parent)])}
    r = subprocess.run([sys.executable, "-c", _INTERP, str(Path(__file__).parent)], env=env, capture_output=True,
                       text=True, timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert float(r.stdout.strip().splitlines()[-1]) < 1e-4


@pytest.mark.gpu
@pytest.mark.parametrize("method", ["two_pass", "direct"])
@pytest.mark.parametrize("hw", [(1080, 1920), (576, 768), (272, 640), (240, 320)])
def test_fused_cuda_kernels_equal_darknets_letterbox(hw, method):
    """On the GPU host: NVDEC-format frames through the Triton kernels vs Darknet's letterbox of
    the same frames' RGB (the NumPy port above), FP32 and FP16 outputs."""
    pytest.importorskip("triton")
    batch = frame_batch(_nv12(2, *hw, seed=hw[1]).cuda(), ColorSpec("bt709", "limited"))
    rgb = nv12_to_rgb(batch, backend="torch").cpu()
    want = torch.from_numpy(np.stack([darknet_letterbox(f.numpy(), 416, 416) for f in rgb]))
    got, _ = yuv_letterbox(batch, (416, 416), backend="triton", method=method)
    assert (got.cpu().double() - want).abs().max() < 1e-4
    half, _ = yuv_letterbox(batch, (416, 416), backend="triton", method=method, dtype=torch.float16)
    assert (half.cpu().double() - want).abs().max() < 1e-3
    plain, _ = letterbox(rgb.cuda(), (416, 416), dtype=torch.float16)  # the CUDA path for RGB frames
    assert (plain.cpu().double() - want).abs().max() < 1e-3
