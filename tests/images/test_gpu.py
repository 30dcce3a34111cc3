"""GPU decoding against CPU decoding of the same files.

nvJPEG and libjpeg differ slightly: nvJPEG upsamples chroma without libjpeg's "fancy" filter,
about 0.5-3 grey levels of mean difference on photos (most on saturated colour detail, e.g. the
giraffe), so tolerances are a few levels; a real mistake (orientation, channel order, offset)
costs tens.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import vidpipe.images as vi

PHOTOS = Path(__file__).resolve().parents[1] / "data" / "images"

pytestmark = pytest.mark.gpu


def _native_uint8(paths, **kw):
    loader = vi.load(paths, mode="none", dtype="uint8", batch_size=64, **kw)
    images = [t for b in loader for t in b.data]
    assert not loader.skipped, loader.skipped
    return images, loader


@pytest.mark.parametrize("decoder", ["nvjpeg-hw", "nvjpeg", "nvimgcodec"])
def test_gpu_decode_matches_cpu_on_real_photos(decoder):
    if decoder == "nvimgcodec":
        pytest.importorskip("nvidia.nvimgcodec")
    paths = sorted(str(p) for p in PHOTOS.glob("*.jpg"))
    cpu, _ = _native_uint8(paths, device="cpu")
    gpu, loader = _native_uint8(paths, device="cuda", decoder=decoder)
    assert loader.stats.decoded_gpu == len(paths) and loader.stats.gpu_fallbacks == 0
    for c, g in zip(cpu, gpu):
        assert g.is_cuda and g.shape == c.shape
        diff = (g.cpu().float() - c.float()).abs()
        assert diff.mean() < 4.0, f"mean abs diff {diff.mean():.3f}"


def test_fp16_letterbox_batch_on_gpu_matches_cpu():
    paths = sorted(str(p) for p in PHOTOS.glob("*.jpg"))
    (g,) = list(vi.load(paths, device="cuda", size=(416, 416), dtype="fp16", batch_size=64))
    (c,) = list(vi.load(paths, device="cpu", size=(416, 416), dtype="fp32", batch_size=64))
    assert g.data.dtype == torch.float16 and g.data.is_cuda and g.data.shape == (len(paths), 3, 416, 416)
    assert (g.data.float().cpu() - c.data).abs().mean() < 0.015
    torch.testing.assert_close(g.scale.cpu(), c.scale)
    torch.testing.assert_close(g.pad.cpu(), c.pad)
    mi = g.to_model_input()
    assert mi.scale.is_cuda and mi.pad.is_cuda


def test_cpu_decoder_on_cuda_device_uploads():
    paths = sorted(str(p) for p in PHOTOS.glob("*.jpg"))[:2]
    (b,) = list(vi.load(paths, device="cuda", decoder="cpu"))
    assert b.data.is_cuda


def test_large_mixed_batch_on_gpu(tmp_path):
    """64 JPEGs of several sizes, grey and colour, EXIF-rotated and CMYK, in one nvJPEG batch."""
    from imgfactory import encode, pattern, reference, write

    files = []
    for k in range(64):
        h, w = [(120, 160), (160, 120), (90, 200)][k % 3]
        kw = {"orientation": k % 8 + 1}
        if k % 5 == 0:
            kw["mode"] = "L"
        if k % 7 == 0:
            kw = {"mode": "CMYK"}
        data = encode(pattern(h, w, seed=k), **kw)
        files.append((write(tmp_path / f"{k:02d}.jpg", data), data))
    images, loader = _native_uint8([str(p) for p, _ in files], device="cuda")
    assert loader.stats.decoded_gpu == 64 - 10  # the 10 CMYK ones decode on CPU threads
    for (p, data), img in zip(files, images):
        want = torch.from_numpy(reference(data)).permute(2, 0, 1)
        assert tuple(img.shape) == tuple(want.shape), p
        assert (img.cpu().float() - want.float()).abs().mean() < 4.0, p


def test_gpu_decoders_are_built_once_per_device_and_reused():
    from vidpipe.images.config import GPU_ROUTE_THREADS

    paths = sorted(str(p) for p in PHOTOS.glob("*.jpg"))[:2]
    a = vi.load(paths, device="cuda", decoder="nvjpeg")
    b = vi.load(paths, device="cuda", decoder="nvjpeg")
    assert a._gpu is b._gpu and a.cfg.num_threads <= GPU_ROUTE_THREADS
    auto = vi.load(paths, device="cuda")
    assert auto.decoder_name in ("nvjpeg-hw", "nvjpeg")  # the engines first, where the GPU has them
    (batch,) = list(auto)
    assert len(batch) == 2 and auto.stats.decoded_gpu == 2
