"""The follow-cam's crop-and-resize against OpenCV on a real photo: ``cv2.warpAffine``
(INTER_LINEAR) for sub-pixel windows and upscaling, ``cv2.resize`` (INTER_AREA) for downscaling."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vidpipe.follow.render import render_window
from vidpipe.follow.window import Window

PHOTO = Path(__file__).resolve().parents[1] / "data" / "images" / "dog.jpg"  # 768x576


@pytest.fixture(scope="module")
def photo():
    import cv2
    import torch

    rgb = cv2.cvtColor(cv2.imread(str(PHOTO)), cv2.COLOR_BGR2RGB)
    return rgb, torch.from_numpy(rgb).permute(2, 0, 1).contiguous()


def _ours(t, window, size):
    return render_window(t, window, size).permute(1, 2, 0).numpy().astype(int)


def _warp_reference(rgb, window, size):
    """OpenCV's bilinear sampling of the window: output pixel centre (u + 0.5) maps to
    x1 + (u + 0.5) * w / out_w in continuous coordinates (pixel centres at i + 0.5)."""
    import cv2

    x1, y1, _, _ = window.box
    sx, sy = window.w / size[0], window.h / size[1]
    m = np.array([[sx, 0, x1 + 0.5 * sx - 0.5], [0, sy, y1 + 0.5 * sy - 0.5]], np.float64)
    return cv2.warpAffine(rgb, m, size, flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                          borderMode=cv2.BORDER_REPLICATE).astype(int)  # fmt: skip


@pytest.mark.parametrize("window,size", [
    (Window(260.0, 140.0, 320.0, 180.0), (640, 360)),      # 2x up, whole pixels
    (Window(300.37, 211.8, 301.3, 169.48), (640, 360)),    # sub-pixel, ~2.1x up
    (Window(384.0, 288.0, 500.0, 281.25), (512, 288)),     # ~1.02x up
])  # fmt: skip
def test_upscale_matches_opencv_bilinear(photo, window, size):
    rgb, t = photo
    diff = np.abs(_ours(t, window, size) - _warp_reference(rgb, window, size))
    assert diff.mean() < 0.3 and np.percentile(diff, 99.9) <= 2 and diff.max() <= 3, (diff.mean(), diff.max())


def test_whole_number_downscale_matches_opencv_area(photo):
    import cv2

    rgb, t = photo
    ref = cv2.resize(rgb[16:16 + 360, 40:40 + 640], (320, 180), interpolation=cv2.INTER_AREA).astype(int)
    diff = np.abs(_ours(t, Window(40 + 320, 16 + 180, 640, 360), (320, 180)) - ref)
    assert diff.max() <= 1, diff.max()
    ref = cv2.resize(rgb[:576, :768], (256, 192), interpolation=cv2.INTER_AREA).astype(int)  # 3x
    out = render_window(t, Window(384, 288, 768, 576), (256, 192)).permute(1, 2, 0).numpy().astype(int)
    assert np.abs(out - ref).max() <= 1


def test_fractional_downscale_is_close_to_opencv_area(photo):
    import cv2

    rgb, t = photo
    ref = cv2.resize(rgb[50:250, 50:400], (224, 128), interpolation=cv2.INTER_AREA).astype(int)  # ~1.56x
    diff = np.abs(_ours(t, Window(225, 150, 350, 200), (224, 128)) - ref)
    assert diff.mean() < 1.5 and np.percentile(diff, 99) <= 12, (diff.mean(), np.percentile(diff, 99))


def test_sub_pixel_pans_move_the_picture_smoothly(photo):
    """A quarter-pixel pan changes the picture by about a quarter of a one-pixel pan's change (no stepping)."""
    _, t = photo
    base = Window(300.0, 250.0, 320.0, 180.0)
    a = _ours(t, base, (320, 180))
    quarter = _ours(t, Window(300.25, 250.0, 320.0, 180.0), (320, 180))
    one = _ours(t, Window(301.0, 250.0, 320.0, 180.0), (320, 180))
    d_quarter, d_one = np.abs(quarter - a).mean(), np.abs(one - a).mean()
    assert 0.15 * d_one < d_quarter < 0.4 * d_one, (d_quarter, d_one)
    assert np.array_equal(one[:, :-1], a[:, 1:])  # a whole pixel at 1:1 is a shift


def test_output_is_a_new_uint8_tensor_and_bad_input_is_refused(photo):
    import torch

    _, t = photo
    before = t.clone()
    out = render_window(t, Window(100, 100, 64, 36), (32, 18))
    assert out.shape == (3, 18, 32) and out.dtype == torch.uint8 and torch.equal(t, before)
    with pytest.raises(ValueError, match="uint8"):
        render_window(t.float(), Window(100, 100, 64, 36), (32, 18))
    with pytest.raises(ValueError, match="outside"):
        render_window(t, Window(-500, 100, 64, 36), (32, 18))
    with pytest.raises(ValueError, match="positive"):
        render_window(t, Window(100, 100, 0, 36), (32, 18))
