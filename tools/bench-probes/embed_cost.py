"""Probe (GPU host): what keeping frames and crops + embeddings cost end to end.

A generated 1080p H.264 clip through ``vidpipe.detect`` on CUDA, in one process, four ways:
plain; ``keep_frames=True``; 30 boxes per frame (a stage that sets them, spread over the frame)
cropped and embedded by a ResNet-18-sized embedder (torchvision's resnet18 architecture, random
weights, FP16, 512-D: no download); the same with the built-in colour-grid embedder. Prints
frames/s and the ratio to plain. Run with PYTHONPATH pointing at vidpipe's src:

    python tools/bench-probes/embed_cost.py [--frames 1200] [--dir /root/media] [--repeat 2]
"""

import argparse
import dataclasses
import time

import torch

import vidpipe
from vidpipe.bench.generate import generate_video
from vidpipe.crops import EmbedStage
from vidpipe.types import Detections


class ThirtyBoxes:
    """Replaces each frame's detections with 30 person boxes on a 6 x 5 grid (about 150 x 300 at 1080p)."""

    name = "thirty_boxes"
    needs_frames = False

    def __init__(self) -> None:
        self._cache = {}

    def process(self, results):
        out = []
        for r in results:
            key = (r.meta.height, r.meta.width, r.detections.device)
            if key not in self._cache:
                h, w = r.meta.height, r.meta.width
                xs, ys = torch.linspace(0, w * 0.9, 6), torch.linspace(0, h * 0.75, 5)
                b = torch.tensor([[x, y, x + w / 13, y + h / 3.6] for y in ys for x in xs], dtype=torch.float32)
                n = b.shape[0]
                self._cache[key] = Detections(b, torch.ones(n), torch.zeros(n, dtype=torch.int64),
                                              torch.zeros(n, dtype=torch.int64)).to(key[2])  # fmt: skip
            out.append(dataclasses.replace(r, detections=self._cache[key]))
        return out

    def reset(self, stream_id):
        pass

    def report(self):
        return {}

    def close(self):
        pass


def resnet18_embedder():
    import torchvision

    net = torchvision.models.resnet18(weights=None, num_classes=512)
    return net.eval().half().to(memory_format=torch.channels_last)


def run(path, **kw):
    r = vidpipe.detect(str(path), device="cuda", batch_size=32, **kw)
    n = 0
    for _ in r:
        n += 1
    s = r.summary()
    return n, s.fps, r.get_stats()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=1200)
    ap.add_argument("--dir", default="/root/media")
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    clip = generate_video("1080p-h264", a.dir, frames=a.frames)
    configs = {
        "plain": dict(),
        "keep_frames": dict(keep_frames=True),
        "30 boxes, resnet18 512-D fp16": dict(stages=[ThirtyBoxes(), EmbedStage(resnet18_embedder(), batch_size=1024)]),
        "30 boxes, colour grid 24-D": dict(stages=[ThirtyBoxes(), EmbedStage(None)]),
    }
    run(clip, max_frames=64)  # warm: CUDA context, kernels, decoder sessions
    base = None
    print(f"{'config':34s} {'frames':>7s} {'fps':>9s} {'ratio':>6s}")
    for name, kw in configs.items():
        best = 0.0
        for _ in range(a.repeat):
            n, fps, stats = run(clip, **kw)
            best = max(best, fps)
        base = base or best
        print(f"{name:34s} {n:7d} {best:9.1f} {best / base:6.3f}", flush=True)
    print(torch.cuda.get_device_name(), "max memory allocated", torch.cuda.max_memory_allocated() >> 20, "MiB")


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"{time.perf_counter() - t0:.0f} s")
