"""Privacy blur: the high-frequency detail inside the boxes is gone (Laplacian of a real photo),
pixels outside are byte-identical, the block means are right, and the two algorithms (fixed
shapes over the frame for CUDA, box by box on the CPU) give the same bytes."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from PIL import Image

from draw_frames import changed, hwc, noise, result
from vidpipe.draw import Annotator, blur_boxes
from vidpipe.draw.blur import _block_means, _blur_each, _blur_frame, _edges, _integral
from vidpipe.errors import ConfigError

PHOTO = Path(__file__).resolve().parents[1] / "data" / "images" / "person.jpg"


def _photo() -> torch.Tensor:
    return torch.from_numpy(np.asarray(Image.open(PHOTO).convert("RGB")).copy()).permute(2, 0, 1).contiguous()


def _lap_std(rgb: np.ndarray) -> float:
    return float(cv2.Laplacian(cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY), cv2.CV_64F).std())


def test_blur_removes_detail_inside_and_nothing_outside():
    img = _photo()
    _, h, w = img.shape
    boxes = [[190.3, 95.8, 275.1, 380.2], [420, 130, 600, 340]]  # the person; the horse's head and more
    out = blur_boxes(img, boxes)
    inside = np.zeros((h, w), bool)
    for x1, y1, x2, y2 in boxes:
        inside[int(y1) : int(np.ceil(y2)), int(x1) : int(np.ceil(x2))] = True
    a, b = hwc(img), hwc(out)
    np.testing.assert_array_equal(a[~inside], b[~inside])
    for x1, y1, x2, y2 in boxes:
        ys, xs = slice(int(y1) + 2, int(y2) - 2), slice(int(x1) + 2, int(x2) - 2)
        assert _lap_std(a[ys, xs]) >= 10 * _lap_std(b[ys, xs]), (x1, y1)
    assert torch.equal(img, _photo())  # input untouched


def test_block_means_exact_and_flat_regions_stay_flat():
    img = noise(64, 80)
    x1, y1, x2, y2, gx, gy, xb, yb = _edges(torch.tensor([[8.0, 16.0, 40.0, 48.0]], dtype=torch.float64), None, 64, 80, 4)
    means = _block_means(_integral(img), xb, yb)  # (3, 1, 4, 4): 8 x 8 blocks
    for by in range(4):
        for bx in range(4):
            y, x = 16 + 8 * by, 8 + 8 * bx
            want = torch.floor(img[:, y : y + 8, x : x + 8].double().mean((1, 2)) + 0.5).to(torch.int32)
            assert torch.equal(means[:, 0, by, bx], want)
    flat = torch.zeros((3, 40, 60), dtype=torch.uint8)
    flat[:, :, 30:] = 200  # a step edge in the middle of the box
    out = blur_boxes(flat, [[10, 5, 50, 35]], cells=4)
    row = out[0, 20, 10:50].tolist()
    assert row == sorted(row) and row[0] < 40 and row[-1] > 160  # a smooth ramp, no step of 200
    assert max(b - a for a, b in zip(row, row[1:])) < 30
    assert torch.equal(blur_boxes(torch.full((3, 20, 20), 77, dtype=torch.uint8), [[2, 2, 18, 18]]),
                       torch.full((3, 20, 20), 77, dtype=torch.uint8))  # fmt: skip


@pytest.mark.parametrize("cells", [2, 3, 8, 16])
def test_frame_wide_and_per_box_algorithms_equal(cells):
    img = noise(120, 160, seed=cells)
    b = torch.tensor([[10.5, 20.2, 70.7, 90.1], [50, 60, 140, 119.5], [-5, -5, 20, 15], [150, 100, 200, 200],
                      [30, 30, 31, 33], [5, 5, 5, 5], [80, 10, 100, 40], [90, 0, 159, 119]], dtype=torch.float64)  # fmt: skip
    active = torch.tensor([1, 1, 1, 1, 1, 1, 0, 1], dtype=torch.bool)
    a = _blur_frame(img, b, active, cells)
    assert torch.equal(a, _blur_each(img, b, active, cells))
    assert not changed(a, img)[10:40, 80:90].any()  # the inactive box's own part


def test_annotator_blurs_only_the_chosen_classes_before_drawing():
    img = noise(100, 160)
    r = result(img, [[10, 10, 70, 90], [90, 10, 150, 90]], [0, 2])
    out = Annotator(blur=("car",), labels=False, scores=False, track_ids=False, thickness=1)(r)
    m = changed(out, img)
    assert m[12:88, 92:148].mean() > 0.95  # the car's box, blurred
    assert not m[12:88, 12:68].any()  # the person's inside, untouched
    same = Annotator(blur=(2,), labels=False, scores=False, track_ids=False, thickness=1)(r)
    assert torch.equal(out, same)  # a class id works as its name


def test_bad_arguments():
    img = noise(10, 10)
    with pytest.raises(ConfigError, match="cells"):
        blur_boxes(img, [[0, 0, 5, 5]], cells=1)
    with pytest.raises(ConfigError, match=r"\(N, 4\)"):
        blur_boxes(img, [[0, 0, 5]])
    with pytest.raises(ConfigError, match="uint8"):
        blur_boxes(img.float(), [[0, 0, 5, 5]])
    assert torch.equal(blur_boxes(img, []), img)
