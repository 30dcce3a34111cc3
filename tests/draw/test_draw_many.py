"""``Annotator.many`` draws a batch of frames in one pass: the same bytes as one call per frame."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from draw_scene import LINES, ZONES, scene
from vidpipe.draw import Annotator
from vidpipe.types import Detections


def _frames(device: str = "cpu"):
    a = scene(272, 480, boxes=12, device=device)
    b = scene(272, 480, boxes=5, device=device, tracked=False)  # untracked among tracked frames
    empty = dataclasses.replace(a, detections=Detections.empty(device=device))
    c = scene(240, 320, boxes=7, device=device)  # another size: its own batch
    d = dataclasses.replace(a, image=torch.flip(a.image, dims=(2,)).contiguous())
    return [a, b, empty, c, d]


@pytest.mark.parametrize("options", [{}, {"zones": ZONES, "lines": LINES}, {"blur": ("car",), "scores": False}])
def test_many_equals_one_call_per_frame(options):
    frames = _frames()
    annotate = Annotator(**options)
    one = [annotate(f) for f in frames]
    many = annotate.many(frames)
    assert len(many) == len(frames)
    for i, (x, y) in enumerate(zip(one, many)):
        assert x.shape == y.shape and torch.equal(x, y), f"frame {i} differs"
    assert all(torch.equal(f.image, g.image) for f, g in zip(frames, _frames()))  # inputs untouched


@pytest.mark.gpu
def test_many_on_cuda_equals_cpu():  # (the gpu mark skips it without CUDA)
    annotate = Annotator(zones=ZONES, lines=LINES, blur=("car",))
    cpu = annotate.many(_frames("cpu"))
    gpu = annotate.many(_frames("cuda"))
    for x, y in zip(cpu, gpu):
        assert torch.equal(x, y.cpu())
