"""The follow-cam's render on CUDA equals the CPU's within one grey level (GPU host only)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vidpipe.follow.render import render_window
from vidpipe.follow.window import Window

PHOTO = Path(__file__).resolve().parents[1] / "data" / "images" / "dog.jpg"

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("window,size", [
    (Window(300.37, 211.8, 301.3, 169.48), (640, 360)),  # sub-pixel upscale
    (Window(384.0, 288.0, 768.0, 432.0), (320, 180)),    # 2.4x downscale (antialiased)
    (Window(200.5, 150.25, 128.0, 72.0), (1280, 720)),   # 10x upscale
])  # fmt: skip
def test_cuda_render_equals_cpu(window, size):
    import cv2
    import torch

    rgb = cv2.cvtColor(cv2.imread(str(PHOTO)), cv2.COLOR_BGR2RGB)
    cpu = torch.from_numpy(rgb).permute(2, 0, 1).contiguous()
    on_cpu = render_window(cpu, window, size)
    on_gpu = render_window(cpu.cuda(), window, size)
    assert on_gpu.device.type == "cuda" and on_gpu.dtype == torch.uint8 and on_gpu.shape == on_cpu.shape
    diff = (on_gpu.cpu().int() - on_cpu.int()).abs()
    assert int(diff.max()) <= 1, int(diff.max())


def test_follow_stage_on_cuda_renders_on_the_device(tmp_path):
    """A real detect run on CUDA: the views stay on the GPU and match the CPU render of the same window."""
    import sys

    import torch

    import vidpipe
    from vidpipe.follow import FollowStage

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from walk_clip import make_walk_clip

    clip = make_walk_clip(tmp_path / "walk.mp4", frames=20)
    views = []
    stage = FollowStage("person", size=(320, 180), margin=1.8,
                        sink=lambda meta, image: views.append((meta.index, image)))  # fmt: skip
    run = vidpipe.detect(str(clip), device="cuda", classes="person", track=True, stages=[stage], batch_size=8)
    frames = {r.index: r for r in run}
    assert len(views) == 20 and all(v.device.type == "cuda" and v.shape == (3, 180, 320) for _, v in views)
    rep = stage.report()
    assert rep["frames"] == 20 and rep["target_in_frame"] >= 0.9 and rep["render_ms_per_frame"] is not None
    assert torch.is_tensor(views[0][1]) and len(frames) == 20
