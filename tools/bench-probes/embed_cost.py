"""Probe (GPU host): what keeping frames and crops + embeddings cost end to end.

A generated 1080p H.264 clip through ``vidpipe.detect`` on CUDA, in one process, four ways:
plain; ``keep_frames=True``; 30 boxes per frame (a stage that sets them, spread over the frame)
cropped and embedded by a ResNet-18-sized embedder (torchvision's resnet18 architecture, random
weights, FP16, 512-D: no download), as it is and compiled by ``torch.compile`` (passed to the
stage as the model); the same with the built-in colour-grid embedder. Prints frames/s, the ratio
to plain and the stages' ms per frame. Run with PYTHONPATH pointing at vidpipe's src:

    python tools/bench-probes/embed_cost.py [--frames 3000] [--dir /root/media] [--repeat 2] [--size 256x128]

Each config runs once on 64 + (frames mod 32) frames first (cuDNN picks its algorithms for the run's batch shapes
there, NVDEC sessions open), then ``--repeat`` times on the whole clip; the best counts.
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
    ap.add_argument("--frames", type=int, default=3000)
    ap.add_argument("--dir", default="/root/media")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--size", default="256x128", help="crop height x width (ReID: 256x128; DeepSORT's net: 128x64)")
    a = ap.parse_args()
    size = tuple(int(v) for v in a.size.split("x"))
    torch.backends.cudnn.benchmark = True
    clip = generate_video("1080p-h264", a.dir, frames=a.frames)
    net = resnet18_embedder().cuda()
    t0 = time.perf_counter()
    compiled = torch.compile(net)
    with torch.inference_mode():
        for n in (960, 480, 30):  # the batch shapes of a run: full batches, the last one, a probe
            compiled(torch.zeros((n, 3, *size), dtype=torch.float16, device="cuda"))
    print(f"torch.compile of the embedder: {time.perf_counter() - t0:.0f} s", flush=True)
    configs = {
        "plain": lambda: dict(),
        "keep_frames": lambda: dict(keep_frames=True),
        "30 boxes, resnet18 512-D fp16": lambda: dict(stages=[ThirtyBoxes(), EmbedStage(net, size=size, batch_size=1024)]),
        "30 boxes, resnet18 torch.compile": lambda: dict(stages=[ThirtyBoxes(), EmbedStage(compiled, size=size, batch_size=1024)]),
        "30 boxes, colour grid 24-D": lambda: dict(stages=[ThirtyBoxes(), EmbedStage(None, size=size)]),
    }
    base = None
    print(f"{'config':34s} {'frames':>7s} {'fps':>9s} {'ratio':>6s}  ms/frame by stage")
    for name, kw in configs.items():
        run(clip, max_frames=64 + a.frames % 32, **kw())  # warm: sessions, kernels, cuDNN for the full and last batch
        best, best_stats = 0.0, {}
        for _ in range(a.repeat):
            n, fps, stats = run(clip, **kw())
            if fps > best:
                best, best_stats = fps, stats
        base = base or best
        ms = {k: round(v, 3) for k, v in (best_stats.get("stages_ms_per_frame") or {}).items()}
        print(f"{name:34s} {n:7d} {best:9.1f} {best / base:6.3f}  {ms}", flush=True)
    print(torch.cuda.get_device_name(), "max memory allocated", torch.cuda.max_memory_allocated() >> 20, "MiB")


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"{time.perf_counter() - t0:.0f} s")
