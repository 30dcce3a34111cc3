"""Letterbox / resize geometry, scale and pad, mixed sizes in one batch."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from vidpipe.images.resize import PAD_VALUE_U8, resize_images
from vidpipe.ops.letterbox import DEFAULT_RESAMPLE, interpolate_kwargs


def _square_image(h, w, box):
    """uint8 (3, h, w): black with a white box (x0, y0, x1, y1)."""
    img = torch.zeros((3, h, w), dtype=torch.uint8)
    x0, y0, x1, y1 = box
    img[:, y0:y1, x0:x1] = 255
    return img


def _centroid(plane: torch.Tensor) -> tuple[float, float]:
    w = plane.float().clamp(min=0)
    ys, xs = torch.meshgrid(torch.arange(plane.shape[0]), torch.arange(plane.shape[1]), indexing="ij")
    return float((w * xs).sum() / w.sum()), float((w * ys).sum() / w.sum())


@pytest.mark.parametrize("dtype", [torch.float32, torch.uint8])
def test_letterbox_geometry_scale_pad_and_mapping(device, dtype):
    img = _square_image(100, 200, (100, 40, 120, 60)).to(device)
    data, scale, pad = resize_images(
        [img], [(100, 200)], size=(64, 64), mode="letterbox", dtype=dtype, device=torch.device(device)
    )
    assert data.shape == (1, 3, 64, 64) and data.dtype == dtype and data.device.type == device
    assert scale.tolist()[0] == pytest.approx([0.32, 0.32]) and pad.tolist() == [[0.0, 16.0]]
    pad_value = 0.5 if dtype.is_floating_point else PAD_VALUE_U8
    out = data[0].cpu()
    assert (out[:, :16] == pad_value).all() and (out[:, 48:] == pad_value).all()
    # The box centre (110, 50) lands at (110 * s + left, 50 * s + top).
    cx, cy = _centroid(out[0, 16:48].float() - out[0, 16:48].float().min())
    # Darknet's resize aligns the corner pixels: pixel centre i lands at i * (new - 1) / (src - 1).
    assert cx == pytest.approx(109.5 * 63 / 199, abs=0.6)
    assert cy + 16 == pytest.approx(49.5 * 31 / 99 + 16, abs=0.6)


def test_resize_mode_stretches_with_per_axis_scale(device):
    img = _square_image(50, 100, (0, 0, 50, 25)).to(device)
    data, scale, pad = resize_images(
        [img], [(50, 100)], size=(40, 40), mode="resize", dtype=torch.float32, device=torch.device(device)
    )
    assert scale.tolist()[0] == pytest.approx([0.4, 0.8]) and pad.tolist() == [[0.0, 0.0]]
    out = data[0, 0].cpu()
    assert out[:19, :19].min() > 0.95 and out[21:, 21:].max() < 0.05


def test_mixed_sizes_match_single_image_results(device):
    dev = torch.device(device)
    a1 = _square_image(60, 80, (10, 10, 30, 30))
    b = _square_image(80, 60, (20, 5, 40, 70))
    a2 = _square_image(60, 80, (50, 30, 70, 50))
    imgs = [t.to(dev) for t in (a1, b, a2)]
    data, scale, pad = resize_images(
        imgs, [(60, 80), (80, 60), (60, 80)], size=(32, 48), mode="letterbox", dtype=torch.float32, device=dev
    )
    for k, img in enumerate(imgs):
        one, s1, p1 = resize_images(
            [img], [tuple(img.shape[1:])], size=(32, 48), mode="letterbox", dtype=torch.float32, device=dev
        )
        torch.testing.assert_close(data[k], one[0])
        assert scale[k].tolist() == s1[0].tolist() and pad[k].tolist() == p1[0].tolist()


def test_uint8_cpu_path_close_to_float_reference():
    g = torch.Generator().manual_seed(0)
    img = torch.randint(0, 256, (3, 90, 160), dtype=torch.uint8, generator=g)
    data, _, _ = resize_images(
        [img], [(90, 160)], size=(36, 64), mode="resize", dtype=torch.float32, device=torch.device("cpu")
    )
    kw = interpolate_kwargs(DEFAULT_RESAMPLE, shrink=True)  # the loader's filter
    ref = F.interpolate(img[None].float(), size=(36, 64), mode="bilinear", **kw) / 255
    assert (data - ref).abs().max() <= 1.01 / 255


def test_native_mode_returns_one_tensor_per_image(device):
    dev = torch.device(device)
    imgs = [
        torch.full((3, 10, 20), 255, dtype=torch.uint8, device=dev),
        torch.zeros((3, 7, 5), dtype=torch.uint8, device=dev),
    ]
    data, scale, pad = resize_images(imgs, [(10, 20), (7, 5)], size=None, mode="none", dtype=torch.float16, device=dev)
    assert isinstance(data, tuple) and [tuple(t.shape) for t in data] == [(3, 10, 20), (3, 7, 5)]
    assert data[0].dtype == torch.float16 and float(data[0].min()) == 1.0
    assert scale.tolist() == [[1.0, 1.0]] * 2 and pad.tolist() == [[0.0, 0.0]] * 2


def test_reduced_scale_decode_uses_source_geometry(device):
    """An image decoded at 1/4 scale lands where the full-size one would."""
    dev = torch.device(device)
    small = _square_image(25, 50, (25, 10, 30, 15)).to(dev)
    data, scale, pad = resize_images(
        [small], [(100, 200)], size=(64, 64), mode="letterbox", dtype=torch.float32, device=dev
    )
    assert scale.tolist()[0] == pytest.approx([0.32, 0.32]) and pad.tolist() == [[0.0, 16.0]]
    assert (data[0, :, 16:48] != 0.5).any() and (data[0, :, :16] == 0.5).all()
