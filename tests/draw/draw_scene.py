"""A busy 1080p scene for the draw tests and the draw_rate probe: 30 tracked boxes on a 6 x 5 grid
(some overlapping, some past the frame's edge), a zone and a line, a textured frame."""

from __future__ import annotations

import torch

from vidpipe.types import Detections, FrameMeta, FrameResult

NAMES = ("person", "bicycle", "car", "motorcycle", "traffic light")


def scene(height: int = 1080, width: int = 1920, boxes: int = 30, device: str = "cpu", tracked: bool = True) -> FrameResult:
    g = torch.Generator().manual_seed(height + boxes)
    yy, xx = torch.meshgrid(torch.arange(height), torch.arange(width), indexing="ij")
    img = torch.stack(((xx * 7 + yy * 3) % 256, (xx ^ yy) % 256, (xx * yy // 97) % 256)).to(torch.uint8)
    img = (img // 2 + torch.randint(0, 128, img.shape, generator=g, dtype=torch.uint8)).contiguous()
    xs = torch.linspace(-0.02 * width, width * 0.93, 6)
    ys = torch.linspace(0.01 * height, height * 0.8, 5)
    b = torch.tensor([[x, y, x + width / 9, y + height / 3.4] for y in ys for x in xs], dtype=torch.float32)[:boxes]
    n = b.shape[0]
    det = Detections(
        b,
        torch.rand(n, generator=g),
        torch.arange(n) % len(NAMES),
        torch.zeros(n, dtype=torch.int64),
        (torch.arange(n) * 37 + 3) if tracked else None,
    ).to(device)
    return FrameResult(FrameMeta("scene", 0, 0, None, height, width), det, names=NAMES, image=img.to(device))


ZONES = ("bay=100,100,700,150,600,600,150,500",)
LINES = ("door=900,800,1800,700",)
