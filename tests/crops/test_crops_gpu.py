"""Crops and embeddings on CUDA (skipped without a GPU): the same crops as on the CPU (float16
crops from float32 frames and boxes), the embed stage in a CUDA run."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import vidpipe
from vidpipe.crops import EmbedStage, crop_detections
from vidpipe.data import sample_video
from vidpipe.types import Detections, FrameMeta, FrameResult

pytestmark = pytest.mark.gpu


def _results(device: str) -> list[FrameResult]:
    g = torch.Generator().manual_seed(1)
    out = []
    for k, (h, w) in enumerate([(1080, 1920), (1080, 1920), (192, 320)]):
        img = torch.randint(0, 256, (3, h, w), dtype=torch.uint8, generator=g)
        img = torch.nn.functional.avg_pool2d(img[None].float(), 5, 1, 2)[0].round().to(torch.uint8)  # smoother
        xy = torch.rand((6, 2), generator=g) * torch.tensor([w * 0.8, h * 0.8])
        wh = 8 + torch.rand((6, 2), generator=g) * torch.tensor([w * 0.2, h * 0.2])
        boxes = torch.cat([xy, xy + wh], 1)
        det = Detections(boxes, torch.ones(6), torch.arange(6) % 2, torch.zeros(6, dtype=torch.int64))
        r = FrameResult(FrameMeta("x", 0, k, None, h, w), det, names=("person", "car"), image=img)
        out.append(dataclasses.replace(r, detections=det.to(device), image=img.to(device)))
    return out


def test_cuda_crops_equal_cpu_crops():
    cpu = crop_detections(_results("cpu"), size=(64, 32), expand=0.1, classes=(0,))
    gpu = crop_detections(_results("cuda"), size=(64, 32), expand=0.1, classes=(0,))
    assert gpu.tensor.is_cuda and gpu.tensor.dtype == torch.float16 and gpu.tensor.shape == cpu.tensor.shape
    assert gpu.index.tolist() == cpu.index.tolist() and gpu.row.tolist() == cpu.row.tolist()
    torch.testing.assert_close(gpu.boxes.cpu(), cpu.boxes)
    diff = (gpu.tensor.float().cpu() - cpu.tensor).abs()
    assert diff.max() < 1.0 / 255 and diff.mean() < 0.1 / 255, (diff.max(), diff.mean())


def test_embed_stage_on_cuda_matches_cpu():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, stride=2), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                              torch.nn.Flatten(), torch.nn.Linear(8, 16))  # fmt: skip
    cpu = EmbedStage(net, size=(32, 32)).process(_results("cpu"))  # before the GPU stage moves net to CUDA
    gpu = EmbedStage(net, size=(32, 32)).process(_results("cuda"))
    for c, g in zip(cpu, gpu):
        assert g.embeddings.is_cuda and g.embeddings.shape == c.embeddings.shape
        # unit vectors; float16 crops and TF32 convolutions on the GPU: ~1e-3 apart
        torch.testing.assert_close(g.embeddings.cpu(), c.embeddings, rtol=0, atol=1e-2)


@pytest.mark.parametrize("on_host", [False, True], ids=["gpu-results", "host-results"])
def test_cuda_run_with_embed_stage(on_host):
    stage = EmbedStage(classes="person", size=(64, 32))
    run = vidpipe.detect(str(sample_video()), device="cuda", frame_skip=10, batch_size=8, stages=[stage],
                         results_on_host=on_host)  # fmt: skip
    results = list(run)
    assert run.config.keep_frames
    people = 0
    for r in results:
        assert r.image.is_cuda
        e = r.embeddings
        assert e.device == r.detections.device and e.shape == (len(r.detections), 24)
        is_person = r.detections.class_ids == 0
        assert torch.equal(torch.isnan(e[:, 0]), ~is_person)
        people += int(is_person.sum())
    assert people > 0 and stage.report()["crops"] == people and stage.report()["dim"] == 24
