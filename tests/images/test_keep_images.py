"""Kept images of image inputs (``keep_images`` / a run's ``keep_frames``): full size, EXIF-oriented,
equal to PIL's decode of the same files; the model input is what it is without keeping."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from imgfactory import encode, pattern, reference, write

import vidpipe
import vidpipe.images as vi


def _files(tmp_path):
    """PNGs of two sizes (lossless: exact), and a JPEG with EXIF orientation 6 (rotated)."""
    out = []
    for k, (h, w) in enumerate([(60, 80), (90, 50), (60, 80)]):
        data = encode(pattern(h, w, seed=k), "PNG")
        out.append((write(tmp_path / f"{k}.png", data), data, True))
    data = encode(pattern(40, 70, seed=7), orientation=6)
    out.append((write(tmp_path / "3.jpg", data), data, False))
    return out


def test_loader_keeps_full_size_oriented_images(tmp_path):
    files = _files(tmp_path)
    paths = [str(p) for p, _, _ in files]
    loader = vi.load(paths, device="cpu", size=(64, 64), dtype="fp32", batch_size=8, keep_images=True)
    (batch,) = list(loader)
    plain = next(iter(vi.load(paths, device="cpu", size=(64, 64), dtype="fp32", batch_size=8)))
    assert batch.images is not None and len(batch.images) == 4 and plain.images is None
    for (path, data, exact), img, size in zip(files, batch.images, batch.sizes):
        want = torch.from_numpy(reference(data)).permute(2, 0, 1)
        assert img.dtype == torch.uint8 and tuple(img.shape) == (3, *size) == tuple(want.shape), path
        diff = (img.float() - want.float()).abs()
        if exact:
            assert diff.max() == 0, path
        else:  # libjpeg-turbo (torchvision) vs PIL's libjpeg: the same picture, rounding apart
            assert diff.mean() < 2.0, (path, diff.mean())
    # keeping the originals does not change the model input
    torch.testing.assert_close(batch.data, plain.data, rtol=0, atol=1.01 / 255)
    mi = batch.to_model_input()
    assert mi.images is batch.images


def test_run_over_a_folder_keeps_frames(tmp_path):
    files = _files(tmp_path)
    results = list(vidpipe.detect(str(tmp_path), device="cpu", keep_frames=True, batch_size=8))
    assert len(results) == len(files)
    by_path = {str(p): (data, exact) for p, data, exact in files}
    for r in results:
        data, exact = by_path[r.source]
        want = torch.from_numpy(reference(data)).permute(2, 0, 1)
        assert tuple(r.image.shape) == (3, r.meta.height, r.meta.width) == tuple(want.shape)
        assert (r.image.float() - want.float()).abs().mean() < (0.001 if exact else 2.0)


def test_keep_images_refuses_a_cache():
    from vidpipe.errors import ConfigError
    from vidpipe.images.config import image_config
    from vidpipe.images.loader import ImageLoader

    with pytest.raises(ConfigError, match="cache"):
        ImageLoader([], image_config(device="cpu"), batch_size=1, gpu_decoder=None, decoder_desc="cpu",
                    cache=object(), keep_images=True)  # type: ignore[arg-type]  # fmt: skip


@pytest.mark.gpu
def test_gpu_decoded_images_are_kept(tmp_path):
    """nvJPEG route: kept images (a copy on the assembling stream) equal the GPU decode of the
    same files without keeping, and are within a few levels of PIL's decode."""
    data = [encode(pattern(120, 160, seed=k), orientation=(1, 6, 3)[k % 3]) for k in range(6)]
    paths = [str(write(tmp_path / f"{k}.jpg", d)) for k, d in enumerate(data)]
    kept = [img for b in vi.load(paths, device="cuda", batch_size=4, keep_images=True) for img in b.images]
    native = [img for b in vi.load(paths, device="cuda", batch_size=4, mode="none", dtype="uint8") for img in b.data]
    torch.cuda.synchronize()
    for d, k, n in zip(data, kept, native):
        assert k.is_cuda and torch.equal(k, n)
        want = torch.from_numpy(np.ascontiguousarray(reference(d))).permute(2, 0, 1)
        assert (k.cpu().float() - want.float()).abs().mean() < 4.0
