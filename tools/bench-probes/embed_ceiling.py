"""Probe (GPU host): how fast crops and a ResNet-18-sized embedder can go on this GPU, alone.

The issue's target for embeddings (30 crops a frame cost <= 10% of the end-to-end rate) needs
the embedder to take 30 x the detection rate in crops/s beside detection. This measures, on
resident data (no decode, no pipeline):

- ``crop``: :func:`vidpipe.crops.crop_detections` of 32 1080p frames x 30 boxes (150 x 300)
  to 256 x 128 (as the stage does it);
- the embedder (torchvision's resnet18 architecture, random weights, 512-D, FP16) on 960 crops,
  several ways: as the probe of the stage builds it (channels_last module, NCHW input), the input
  in channels_last too, batch norm folded into the convolutions, and that behind a CUDA graph.

Prints crops/s and what it means in frames/s at 30 crops a frame. Run with PYTHONPATH pointing
at vidpipe's src:  python tools/bench-probes/embed_ceiling.py [--seconds 2]
"""

import argparse
import copy
import time

import torch


def rate(fn, n_items, seconds):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    t0, n = time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds:
        fn()
        n += n_items
    torch.cuda.synchronize()
    return n / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=2.0)
    a = ap.parse_args()
    import torchvision

    from vidpipe.crops.roi import CropOptions, crop_detections
    from vidpipe.types import Detections, FrameMeta, FrameResult

    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    h, w, frames, per = 1080, 1920, 32, 30
    xs, ys = torch.linspace(0, w * 0.9, 6), torch.linspace(0, h * 0.75, 5)
    boxes = torch.tensor([[x, y, x + w / 13, y + h / 3.6] for y in ys for x in xs], dtype=torch.float32)
    dets = Detections(boxes, torch.ones(per), torch.zeros(per, dtype=torch.int64),
                      torch.zeros(per, dtype=torch.int64)).to(dev)  # fmt: skip
    images = torch.randint(0, 255, (frames, 3, h, w), dtype=torch.uint8, device=dev)
    results = [FrameResult(meta=FrameMeta("probe", 0, i, None, h, w), detections=dets, names=("person",),
                           image=images[i]) for i in range(frames)]  # fmt: skip
    opts = CropOptions(size=(256, 128))
    print(torch.cuda.get_device_name(), f"torch {torch.__version__}")
    crop_rate = rate(lambda: crop_detections(results, opts), frames * per, a.seconds)
    print(f"crop (roi_align, 32 frames x 30 boxes -> 256x128): {crop_rate:10.0f} crops/s = {crop_rate / per:8.0f} frames/s")
    crops = crop_detections(results, opts).tensor
    print("crops", tuple(crops.shape), crops.dtype, "channels_last" if crops.is_contiguous(memory_format=torch.channels_last) else "NCHW")

    base = torchvision.models.resnet18(weights=None, num_classes=512).eval().half().to(dev)
    cl = copy.deepcopy(base).to(memory_format=torch.channels_last)
    x = crops.half().contiguous()
    x_cl = x.contiguous(memory_format=torch.channels_last)
    variants = {}
    with torch.inference_mode():
        variants["NCHW module, NCHW input"] = lambda: base(x)
        variants["channels_last module, NCHW input (the stage today)"] = lambda: cl(x)
        variants["channels_last module and input"] = lambda: cl(x_cl)
        try:
            from torch.fx.experimental.optimization import fuse

            folded = fuse(copy.deepcopy(base)).to(memory_format=torch.channels_last)
            variants["batch norm folded, channels_last"] = lambda: folded(x_cl)
        except Exception as exc:  # noqa: BLE001
            print("fold failed:", exc)
            folded = None
        for name, fn in variants.items():
            r = rate(fn, x.shape[0], a.seconds)
            print(f"{name:52s} {r:10.0f} crops/s = {r / per:8.0f} frames/s at 30 crops/frame", flush=True)
        if folded is not None:
            static = x_cl.clone()
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    folded(static)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                folded(static)
            r = rate(g.replay, x.shape[0], a.seconds)
            print(f"{'folded + CUDA graph':52s} {r:10.0f} crops/s = {r / per:8.0f} frames/s at 30 crops/frame", flush=True)
        try:
            t0 = time.perf_counter()
            comp = torch.compile(folded if folded is not None else cl)
            comp(x_cl)
            print(f"torch.compile: {time.perf_counter() - t0:.0f} s to compile", flush=True)
            r = rate(lambda: comp(x_cl), x.shape[0], a.seconds)
            print(f"{'torch.compile (folded, channels_last)':52s} {r:10.0f} crops/s = {r / per:8.0f} frames/s at 30 crops/frame")
        except Exception as exc:  # noqa: BLE001
            print("torch.compile failed:", type(exc).__name__, str(exc)[:200])
    flops = 2 * 1.19e9  # ResNet-18 at 256x128: ~1.19 GMACs a crop
    print(f"(at 1.19 GMACs a crop, 100,000 crops/s is {100_000 * flops / 1e12:.0f} TFLOP/s)")


if __name__ == "__main__":
    main()
