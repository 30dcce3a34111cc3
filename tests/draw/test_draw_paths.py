"""The fixed-shape path (what CUDA runs: no host reads, shapes from the frame size) gives the same
bytes as the CPU path (shapes sized from the data), on a busy 1080p scene."""

from __future__ import annotations

import dataclasses

import torch

import vidpipe.draw.annotator as annotator_mod
import vidpipe.draw.blur as blur_mod
from draw_scene import LINES, ZONES, scene
from vidpipe.draw import Annotator


def test_fixed_shape_path_equals_cpu_path(monkeypatch):
    r = scene(540, 960, boxes=30)
    ann = Annotator(zones=ZONES, lines=LINES, blur=("car", 3))
    cpu = ann(r)
    untracked = ann(dataclasses.replace(r, detections=dataclasses.replace(r.detections, track_ids=None)))
    monkeypatch.setattr(annotator_mod, "host_reads_free", lambda device: False)
    monkeypatch.setattr(blur_mod, "host_reads_free", lambda device: False)
    fixed = Annotator(zones=ZONES, lines=LINES, blur=("car", 3))
    assert torch.equal(fixed(r), cpu)
    assert torch.equal(fixed(dataclasses.replace(r, detections=dataclasses.replace(r.detections, track_ids=None))), untracked)
