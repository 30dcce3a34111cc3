"""CUDA: the same bytes as the CPU (same integer ops), the detections on either device, and no
host sync in a warm call (torch's sync debug mode raises on one)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from draw_scene import LINES, ZONES, scene
from vidpipe.draw import Annotator, blur_boxes

pytestmark = pytest.mark.gpu


def _ann() -> Annotator:
    return Annotator(zones=ZONES, lines=LINES, blur=("car", 3))


@pytest.mark.parametrize("size", [(1080, 1920), (272, 640)])
def test_cuda_equals_cpu(size):
    r = scene(*size, boxes=30)
    want = _ann()(r)
    ann = _ann()
    on_cuda = dataclasses.replace(r, image=r.image.cuda(), detections=r.detections.to("cuda"))
    got = ann(on_cuda)
    assert got.is_cuda and got.dtype == torch.uint8 and got.shape == want.shape
    assert torch.equal(got.cpu(), want)
    # detections left on the CPU while the image is on CUDA: moved once, same picture
    assert torch.equal(ann(dataclasses.replace(on_cuda, detections=r.detections)).cpu(), want)
    # and the other way round: CUDA detections, CPU image
    assert torch.equal(ann(dataclasses.replace(r, detections=on_cuda.detections)), want)
    assert torch.equal(on_cuda.image.cpu(), r.image)  # input untouched
    untracked = dataclasses.replace(r, detections=dataclasses.replace(r.detections, track_ids=None))
    assert torch.equal(ann(dataclasses.replace(untracked, image=on_cuda.image)).cpu(), _ann()(untracked))


def test_blur_boxes_cuda_equals_cpu():
    r = scene(720, 1280, boxes=12)
    boxes = r.detections.boxes
    want = blur_boxes(r.image, boxes)
    assert torch.equal(blur_boxes(r.image.cuda(), boxes.cuda()).cpu(), want)
    assert torch.equal(blur_boxes(r.image.cuda(), boxes).cpu(), want)
    assert torch.equal(blur_boxes(r.image.cuda(), boxes[:0]).cpu(), r.image)


def test_warm_call_does_not_sync():
    r = scene(1080, 1920, boxes=30, device="cuda")
    ann = _ann()
    ann(r)  # first call: atlas, static layer (built once, may sync)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        out = ann(r)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert out.is_cuda and out.shape == r.image.shape
