"""Probe: what drawing costs per frame (``vidpipe.draw.Annotator``), on CUDA by default.

A textured 1080p frame with 30 tracked boxes (6 x 5 grid, about 213 x 318 px each, labels
"person 0.87 #12"), annotated in a loop; four configurations: boxes + labels; + a zone and a
line; + privacy blur of a third of the boxes; ``blur_boxes`` alone on 10 boxes. Then the same
boxes + labels from several threads at once (one annotator and stream each), as a pipeline with
one drawing thread per stream would: that shows the Python launch cost under the GIL, which is
what bounds frames/s on a fast GPU. Prints ms/frame and frames/s. Run with PYTHONPATH pointing
at vidpipe's src:

    python tools/bench-probes/draw_rate.py [--device cuda] [--frames 500] [--size 1080x1920] [--threads 1,4,16]
"""

from __future__ import annotations

import argparse
import threading
import time

import torch

from vidpipe.draw import Annotator, blur_boxes
from vidpipe.types import Detections, FrameMeta, FrameResult

NAMES = ("person", "bicycle", "car", "motorcycle", "traffic light")


def scene(height: int, width: int, device: str, boxes: int = 30) -> FrameResult:
    g = torch.Generator().manual_seed(0)
    yy, xx = torch.meshgrid(torch.arange(height), torch.arange(width), indexing="ij")
    img = torch.stack(((xx * 7 + yy * 3) % 256, (xx ^ yy) % 256, (xx * yy // 97) % 256)).to(torch.uint8)
    img = (img // 2 + torch.randint(0, 128, img.shape, generator=g, dtype=torch.uint8)).contiguous()
    xs = torch.linspace(-0.02 * width, width * 0.93, 6)
    ys = torch.linspace(0.01 * height, height * 0.8, 5)
    b = torch.tensor([[x, y, x + width / 9, y + height / 3.4] for y in ys for x in xs], dtype=torch.float32)[:boxes]
    n = b.shape[0]
    det = Detections(b, torch.rand(n, generator=g), torch.arange(n) % len(NAMES), torch.zeros(n, dtype=torch.int64),
                     torch.arange(n) * 37 + 3).to(device)  # fmt: skip
    return FrameResult(FrameMeta("probe", 0, 0, None, height, width), det, names=NAMES, image=img.to(device))


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(fn, frames: int, device: str) -> float:
    for _ in range(10):
        fn()
    sync(device)
    t = time.perf_counter()
    for _ in range(frames):
        fn()
    sync(device)
    return (time.perf_counter() - t) / frames * 1e3


def threaded(make, threads: int, frames: int, device: str) -> float:
    """Frames/s of ``threads`` threads each calling its own ``make()`` ``frames`` times."""
    fns = [make() for _ in range(threads)]
    for fn in fns:
        for _ in range(5):
            fn()
    sync(device)
    barrier = threading.Barrier(threads + 1)

    def work(fn):
        stream = torch.cuda.Stream() if device.startswith("cuda") else None
        barrier.wait()
        if stream is None:
            for _ in range(frames):
                fn()
        else:
            with torch.cuda.stream(stream):
                for _ in range(frames):
                    fn()
            stream.synchronize()

    ts = [threading.Thread(target=work, args=(fn,)) for fn in fns]
    for t in ts:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    sync(device)
    return threads * frames / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--frames", type=int, default=500)
    ap.add_argument("--size", default="1080x1920", help="HxW")
    ap.add_argument("--threads", default="1,4,16")
    args = ap.parse_args()
    h, w = (int(v) for v in args.size.split("x"))
    r = scene(h, w, args.device)
    zones, lines = ("bay=100,100,700,150,600,600,150,500",), ("door=900,800,1800,700",)
    configs = {
        "boxes + labels": Annotator(),
        "+ zone and line": Annotator(zones=zones, lines=lines),
        "+ blur (car, motorcycle)": Annotator(zones=zones, lines=lines, blur=("car", "motorcycle")),
    }
    dev = torch.device(args.device)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "CPU"
    print(f"device: {name}, frame {h}x{w}, {len(r.detections)} boxes, torch {torch.__version__}")
    print(f"{'configuration':<28} {'ms/frame':>9} {'frames/s':>9}")
    for label, ann in configs.items():
        ms = timed(lambda ann=ann: ann(r), args.frames, args.device)
        print(f"{label:<28} {ms:9.3f} {1e3 / ms:9.0f}")
    boxes = r.detections.boxes[:10]
    ms = timed(lambda: blur_boxes(r.image, boxes), args.frames, args.device)
    print(f"{'blur_boxes, 10 boxes':<28} {ms:9.3f} {1e3 / ms:9.0f}")
    for n in (int(v) for v in args.threads.split(",") if v):
        fps = threaded(lambda: (lambda a=Annotator(): a(r)), n, max(20, args.frames // n), args.device)
        print(f"{f'boxes + labels, {n} threads':<28} {1e3 / fps:9.3f} {fps:9.0f}  (aggregate)")


if __name__ == "__main__":
    main()
