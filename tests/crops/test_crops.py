"""Crop-and-resize of detections (``vidpipe.crops.crop_detections``) against OpenCV's resize of the
same region of PyAV's RGB frame (an independent implementation), and its bookkeeping."""

from __future__ import annotations

import av
import cv2
import numpy as np
import pytest
import torch

from vidpipe.crops import CropOptions, crop_detections
from vidpipe.crops.roi import expand_boxes
from vidpipe.errors import ConfigError
from vidpipe.types import Detections, FrameMeta, FrameResult


def frames_of(clip, n: int) -> list[np.ndarray]:
    """PyAV's rgb24 (HWC) of the first ``n`` frames."""
    with av.open(str(clip.path)) as c:
        out = []
        for f in c.decode(video=0):
            out.append(f.to_ndarray(format="rgb24"))
            if len(out) == n:
                return out
    return out


def result(rgb: np.ndarray, boxes, classes=None, index: int = 0, device: str = "cpu") -> FrameResult:
    h, w = rgb.shape[:2]
    b = torch.tensor(boxes, dtype=torch.float32).reshape(-1, 4)
    n = b.shape[0]
    cls = torch.tensor(classes if classes is not None else [0] * n, dtype=torch.int64)
    det = Detections(b, torch.ones(n), cls, torch.zeros(n, dtype=torch.int64)).to(device)
    img = torch.from_numpy(np.ascontiguousarray(rgb.transpose(2, 0, 1))).to(device)
    return FrameResult(FrameMeta("clip", 0, index, None, h, w), det, names=("person", "car"), image=img)


@pytest.fixture(scope="module")
def gradient(media_dir):
    from media import make_video

    clip = make_video(media_dir / "crops-gradient.mp4", frames=3, gop=3, width=320, height=192, pattern="gradient")
    return frames_of(clip, 3)


def _ref(rgb, box, size, interpolation):
    x1, y1, x2, y2 = box
    return cv2.resize(rgb[y1:y2, x1:x2], (size[1], size[0]), interpolation=interpolation).astype(np.float64)


@pytest.mark.parametrize(
    "box,size,interp,tol",  # tolerances: a box off by one pixel fails them (measured: mean 0.44-0.63)
    [
        ((40, 32, 104, 96), (16, 16), cv2.INTER_AREA, (1.0, 0.3)),  # shrink 4x: an area average
        ((10, 20, 74, 52), (16, 32), cv2.INTER_AREA, (1.0, 0.3)),  # shrink 2x / 4x
        ((100, 50, 150, 110), (16, 8), cv2.INTER_AREA, (1.0, 0.3)),  # non-integer ratios
        ((200, 100, 220, 110), (40, 80), cv2.INTER_LINEAR, (2.5, 0.3)),  # enlarge 4x: bilinear
    ],
)
def test_crop_matches_opencv_resize_of_the_same_region(gradient, box, size, interp, tol):
    rgb = gradient[1]
    crops = crop_detections([result(rgb, [box])], size=size)
    assert crops.tensor.shape == (1, 3, *size) and crops.tensor.dtype == torch.float32
    ours = crops.tensor[0].permute(1, 2, 0).numpy().astype(np.float64) * 255
    diff = np.abs(ours - _ref(rgb, box, size, interp))
    assert diff.max() <= tol[0] and diff.mean() <= tol[1], (diff.max(), diff.mean())


def test_one_batch_for_many_frames_rows_and_classes(gradient):
    rs = [
        result(gradient[0], [(0, 0, 32, 32), (50, 50, 90, 90)], classes=[0, 1], index=0),
        result(gradient[1], np.zeros((0, 4)), index=1),
        result(gradient[2], [(10, 10, 42, 74), (100, 20, 164, 84), (5, 5, 37, 37)], classes=[1, 0, 0], index=2),
    ]
    all_ = crop_detections(rs, size=(32, 32))
    assert len(all_) == 5 and all_.total == 5
    assert all_.frame.tolist() == [0, 0, 2, 2, 2] and all_.row.tolist() == [0, 1, 0, 1, 2]
    assert all_.index.tolist() == [0, 1, 2, 3, 4]
    people = crop_detections(rs, size=(32, 32), classes=(0,))
    assert people.frame.tolist() == [0, 2, 2] and people.row.tolist() == [0, 1, 2]
    assert people.index.tolist() == [0, 3, 4]
    torch.testing.assert_close(people.tensor, all_.tensor[[0, 3, 4]])
    # each crop is its own frame's region: the 32x32 box at (0, 0) of frame 0 is the frame's corner
    want = gradient[0][:32, :32].astype(np.float64)
    assert np.abs(all_.tensor[0].permute(1, 2, 0).numpy() * 255 - want).max() <= 1.0
    none = crop_detections(rs, size=(32, 32), classes=(5,))
    assert len(none) == 0 and none.total == 5 and none.tensor.shape == (0, 3, 32, 32)


def test_frames_of_several_sizes_and_few_frames_per_call(gradient):
    small = cv2.resize(gradient[0], (160, 96), interpolation=cv2.INTER_AREA)
    rs = [
        result(gradient[0], [(0, 0, 64, 64)], index=0),
        result(small, [(0, 0, 64, 64), (80, 20, 144, 84)], index=1),
        result(gradient[2], [(32, 32, 96, 96)], index=2),
    ]
    together = crop_detections(rs, size=(16, 16))
    one_by_one = crop_detections(rs, CropOptions(size=(16, 16), frames_per_call=1))
    torch.testing.assert_close(together.tensor, one_by_one.tensor)
    for k, (r, row) in enumerate([(0, 0), (1, 0), (1, 1), (2, 0)]):
        solo = crop_detections([rs[r]], size=(16, 16))
        torch.testing.assert_close(together.tensor[k], solo.tensor[row])


def test_expand_pad_clip():
    b = torch.tensor([[10.0, 20.0, 30.0, 60.0]])
    torch.testing.assert_close(expand_boxes(b, expand=0.5), torch.tensor([[5.0, 10.0, 35.0, 70.0]]))
    torch.testing.assert_close(expand_boxes(b, pad=4), torch.tensor([[6.0, 16.0, 34.0, 64.0]]))
    torch.testing.assert_close(expand_boxes(b, expand=1.0, hw=(64, 32)), torch.tensor([[0.0, 0.0, 32.0, 64.0]]))
    rgb = np.full((48, 64, 3), 200, np.uint8)
    c = crop_detections([result(rgb, [(50, 30, 70, 50)])], size=(8, 8), expand=0.5)
    torch.testing.assert_close(c.boxes, torch.tensor([[45.0, 25.0, 64.0, 48.0]]))  # clipped to the frame
    assert (c.tensor * 255 - 200).abs().max() < 0.01  # only the frame's pixels
    out = crop_detections([result(rgb, [(50, 30, 70, 50)])], size=(8, 8), expand=0.5, clip=False)
    torch.testing.assert_close(out.boxes, torch.tensor([[45.0, 25.0, 75.0, 55.0]]))
    assert out.tensor[0, :, -1, -1].max() < 0.01  # outside the frame: black


def test_errors():
    rgb = np.zeros((16, 16, 3), np.uint8)
    r = result(rgb, [(0, 0, 8, 8)])
    from dataclasses import replace

    with pytest.raises(ConfigError, match="keep_frames"):
        crop_detections([replace(r, image=None)], size=(8, 8))
    assert len(crop_detections([replace(r, image=None, detections=Detections.empty())], size=(8, 8))) == 0
    with pytest.raises(ConfigError):
        CropOptions(size=(0, 8))
    with pytest.raises(ConfigError):
        CropOptions(classes="person")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="not both"):
        crop_detections([r], CropOptions(), size=(8, 8))
