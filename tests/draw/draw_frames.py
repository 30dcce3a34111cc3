"""Helpers of the draw tests: a FrameResult around given boxes, and pixel masks."""

from __future__ import annotations

import numpy as np
import torch

from vidpipe.types import Detections, FrameMeta, FrameResult

NAMES = ("person", "bicycle", "car", "motorcycle", "traffic light")


def result(image: torch.Tensor, boxes, class_ids=None, scores=None, track_ids=None, names=NAMES) -> FrameResult:
    """A FrameResult of ``image`` ``(3, H, W)`` with these boxes (on the boxes' tensor device, CPU by default)."""
    b = torch.as_tensor(boxes, dtype=torch.float32).reshape(-1, 4)
    n = b.shape[0]
    cls = torch.as_tensor(class_ids if class_ids is not None else [0] * n, dtype=torch.int64)
    sc = torch.as_tensor(scores if scores is not None else [0.5] * n, dtype=torch.float32)
    tid = None if track_ids is None else torch.as_tensor(track_ids, dtype=torch.int64)
    det = Detections(b, sc, cls, torch.zeros(n, dtype=torch.int64), tid)
    _, h, w = image.shape
    return FrameResult(FrameMeta("test", 0, 0, None, h, w), det, names=tuple(names), image=image)


def hwc(image: torch.Tensor) -> np.ndarray:
    return image.permute(1, 2, 0).cpu().numpy()


def changed(a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
    """``(H, W)`` bool: pixels that differ in any channel."""
    return (a != b).any(0).cpu().numpy()


def noise(h: int, w: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (3, h, w), dtype=torch.uint8, generator=g)
