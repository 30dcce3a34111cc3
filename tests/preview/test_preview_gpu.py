"""The preview on a CUDA device (marked ``gpu``; skipped without CUDA): nvJPEG's JPEG of a frame
matches libjpeg's of the same frame, frames pushed from another CUDA stream are encoded only once
ready, and a real run on the GPU serves the decoded frames."""

from __future__ import annotations

import numpy as np
import pytest

from preview.mjpeg import decode

pytestmark = pytest.mark.gpu


def _pattern(height: int = 1080, width: int = 1920):
    """A frame with edges, gradients and flat colour: ``(3, H, W)`` uint8 on the CPU."""
    import torch

    y = torch.linspace(0, 255, height).view(height, 1).expand(height, width)
    x = torch.linspace(0, 255, width).view(1, width).expand(height, width)
    img = torch.stack([x, y, 255 - x]).round().to(torch.uint8)
    img[:, height // 4 : height // 2, width // 4 : width // 2] = torch.tensor([250, 20, 30], dtype=torch.uint8).view(3, 1, 1)
    return img.contiguous()


def test_nvjpeg_matches_the_cpu_encoder() -> None:
    import cv2

    from vidpipe.preview.jpeg import backend_for, encode_jpeg

    img = _pattern()
    assert backend_for(img.cuda().device) == "nvjpeg"
    cpu = decode(encode_jpeg(img, quality=90))
    gpu_bytes = encode_jpeg(img.cuda(), quality=90)
    assert gpu_bytes[:2] == b"\xff\xd8" and gpu_bytes[-2:] == b"\xff\xd9"
    gpu = decode(gpu_bytes)
    assert cpu.shape == gpu.shape == (360, 640, 3)
    ref = cv2.resize(img.permute(1, 2, 0).numpy(), (640, 360), interpolation=cv2.INTER_AREA)
    assert np.abs(gpu.astype(int) - cpu.astype(int)).mean() < 3
    assert np.abs(gpu.astype(int) - ref.astype(int)).mean() < 4
    assert cv2.PSNR(gpu, ref) > 30
    full = decode(encode_jpeg(img.cuda(), quality=90, max_width=None))  # no shrinking
    assert full.shape == (1080, 1920, 3)
    assert np.abs(full.astype(int) - img.permute(1, 2, 0).numpy().astype(int)).mean() < 3


def test_hub_waits_for_frames_made_on_another_stream() -> None:
    import torch

    from vidpipe.preview import PreviewHub

    with PreviewHub() as hub:
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            busy = torch.randn(4096, 4096, device="cuda")
            for _ in range(20):  # keep the stream busy so an unsynchronised read would see zeros
                busy = busy @ busy / 4096
            img = torch.zeros(3, 720, 1280, dtype=torch.uint8, device="cuda")
            img[0] = 40
            zero = (busy.abs().sum() < 0).to(torch.uint8)  # 0 (also for NaN), known only after the matmuls
            img[1] = zero + 180
            img[2] = 220
            hub.push(0, img)
        jpeg, _ = hub.snapshot(0, timeout=30)
        rgb = decode(jpeg)
        assert np.abs(rgb.reshape(-1, 3).mean(0) - (40, 180, 220)).max() < 4
        assert hub.report()["jpeg"] == ["nvjpeg"]


def test_a_gpu_run_serves_its_frames(make_clip) -> None:
    import av

    import vidpipe
    from vidpipe.preview import PreviewHub, PreviewStage

    clip = make_clip(width=640, height=360, frames=30, fps=25, gop=10, pattern="boxes")
    with PreviewHub(max_width=None) as hub:
        stage = PreviewStage(hub)
        results = list(vidpipe.detect(clip.path, device="cuda", batch_size=8, stages=[stage]))
        assert len(results) == 30 and results[-1].image.device.type == "cuda"
        jpeg, meta = hub.snapshot(0, timeout=30)
        assert stage.report()["jpeg"] == ["nvjpeg"]
    with av.open(clip.path) as c:
        frames = [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]
    rgb = decode(jpeg)
    assert rgb.shape == (360, 640, 3)
    assert np.abs(rgb.astype(int) - frames[meta.index].astype(int)).mean() < 6
