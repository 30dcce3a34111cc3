"""Decoded pixels: EXIF orientation, grey and CMYK JPEGs, every format, against PIL."""

from __future__ import annotations

import numpy as np
import pytest
from imgfactory import encode, pattern, reference, write
from imgtools import make_loader, routes


def _native(route, paths):
    loader = make_loader(route, [str(p) for p in paths], mode="none", dtype="uint8", batch_size=8)
    batches = list(loader)
    assert not loader.skipped, loader.skipped
    return [t.permute(1, 2, 0).cpu().numpy() for b in batches for t in b.data], batches


# nvJPEG upsamples chroma without libjpeg's "fancy" filter: on saturated colour edges that alone
# is ~1-3 grey levels of mean difference, so the GPU tolerance is wider (a real mistake, such as
# a wrong orientation or channel order, costs tens of levels).
TOL = {"cpu": 2.0, "batched": 2.0, "cuda": 4.0}


def _close(got: np.ndarray, want: np.ndarray, tol: float = 2.0) -> None:
    assert got.shape == want.shape
    diff = np.abs(got.astype(np.int16) - want.astype(np.int16)).mean()
    assert diff < tol, f"mean abs diff {diff:.2f}"


@routes
def test_exif_orientation_all_eight(route, tmp_path):
    data = {o: encode(pattern(40, 64, seed=1), orientation=o) for o in range(1, 9)}
    paths = [write(tmp_path / f"o{o}.jpg", d) for o, d in data.items()]
    images, batches = _native(route, paths)
    for o, img in zip(data, images):
        want = reference(data[o])
        _close(img, want, TOL[route])
        # The bright block (top-left of the stored image) must land where a viewer shows it.
        assert img.shape[:2] == ((64, 40) if o >= 5 else (40, 64))
    sizes = [s for b in batches for s in b.sizes]
    assert sizes == [(40, 64)] * 4 + [(64, 40)] * 4


def test_orientation_mistake_would_be_caught(tmp_path):
    """Guard for the test above: orientations 6 and 8 differ by far more than the tolerance."""
    a, b = (reference(encode(pattern(40, 64, seed=1), orientation=o)) for o in (6, 8))
    assert np.abs(a.astype(int) - b.astype(int)).mean() > 20


@routes
def test_grey_and_cmyk_jpegs_become_rgb(route, tmp_path):
    grey = encode(pattern(40, 50), mode="L")
    cmyk = encode(pattern(40, 50, seed=2), mode="CMYK")
    images, _ = _native(route, [write(tmp_path / "grey.jpg", grey), write(tmp_path / "cmyk.jpg", cmyk)])
    g, c = images
    assert g.shape == (40, 50, 3) and (g[..., 0] == g[..., 1]).all() and (g[..., 1] == g[..., 2]).all()
    _close(g, reference(grey), TOL[route])
    _close(c, reference(cmyk), TOL[route])


@pytest.mark.parametrize(
    ("fmt", "mode", "suffix"),
    [
        ("PNG", None, "png"),
        ("PNG", "RGBA", "png"),
        ("PNG", "P", "png"),
        ("PNG", "L", "png"),
        ("WEBP", None, "webp"),
        ("BMP", None, "bmp"),
        ("TIFF", None, "tif"),
        ("TIFF", "CMYK", "tiff"),
    ],
)
def test_other_formats_match_pil(fmt, mode, suffix, tmp_path):
    data = encode(pattern(30, 44, seed=4), fmt, mode=mode, **({"lossless": True} if fmt == "WEBP" else {}))
    (img,), _ = _native("cpu", [write(tmp_path / f"x.{suffix}", data)])
    np.testing.assert_array_equal(img, reference(data))


def test_png_with_exif_orientation_and_16_bit(tmp_path):
    from PIL import Image

    data = encode(pattern(30, 44, seed=5), "PNG", orientation=6)
    arr16 = (np.arange(30 * 44, dtype=np.uint16).reshape(30, 44) * 40).astype(np.uint16)
    p16 = tmp_path / "deep.png"
    Image.fromarray(arr16).save(p16)
    (rot, deep), _ = _native("cpu", [write(tmp_path / "rot.png", data), p16])
    np.testing.assert_array_equal(rot, reference(data))
    assert rot.shape == (44, 30, 3)
    want = (arr16.astype(np.int64) // 257).astype(np.uint8)
    np.testing.assert_array_equal(deep[..., 0], want)


@routes
def test_mislabelled_png_named_jpg_is_decoded_as_png(route, tmp_path):
    data = encode(pattern(30, 40, seed=6), "PNG")
    loader = make_loader(route, [str(write(tmp_path / "really_a_png.jpg", data))], mode="none", dtype="uint8")
    (batch,) = list(loader)
    np.testing.assert_array_equal(batch.data[0].permute(1, 2, 0).cpu().numpy(), reference(data))
    assert loader.stats.mislabelled == 1


def test_huge_jpeg_within_limit_is_decoded_at_reduced_scale(tmp_path):
    """A 6000x3000 JPEG (18 Mpx, over DRAFT_MIN_PIXELS) letterboxed to 64x64 on the CPU: decoded
    by DCT scaling, mapped with the full-size geometry, close to a full decode + resize."""
    import torch
    import torch.nn.functional as F

    import vidpipe.images as vi

    data = encode(pattern(3000, 6000, seed=7), quality=80)
    path = write(tmp_path / "big.jpg", data)
    (batch,) = list(vi.load(path, device="cpu", size=(64, 64), dtype="fp32"))
    assert batch.sizes == ((3000, 6000),)
    assert batch.scale[0].tolist() == pytest.approx([64 / 6000] * 2)
    assert batch.pad[0].tolist() == [0.0, 16.0]
    full = torch.from_numpy(reference(data)).permute(2, 0, 1)[None].float()
    want = F.interpolate(full, size=(32, 64), mode="bilinear", antialias=True, align_corners=False) / 255
    got = batch.data[0, :, 16:48, :]
    assert (got - want[0]).abs().mean() < 0.02
