"""Frames per second of the zones stage (wall clock, and per second of this process's CPU time,
which a busy shared machine disturbs less) on this machine's CPU: ~50 tracked detections per frame,
4 lines and 4 zones, batches of 32 frames (as the runner hands them), CPU tensors.

    PYTHONPATH=src python tools/bench_zones.py [--frames 3000] [--dets 50]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "zones"))

import numpy as np  # noqa: E402

from vidpipe.zones import Zones  # noqa: E402
from zone_scene import frame  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=3000)
    ap.add_argument("--dets", type=int, default=50)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    life = 100  # frames per track: a new track every life/dets frames keeps ~dets alive
    n_tracks = a.frames * a.dets // life + a.dets
    start = rng.integers(-life, a.frames, n_tracks)
    p0 = rng.uniform(0, [1920, 1080], (n_tracks, 2))
    v = rng.normal(0, 6, (n_tracks, 2))
    frames = []
    for f in range(a.frames):
        alive = np.flatnonzero((start <= f) & (f < start + life))
        pos = p0[alive] + v[alive] * (f - start[alive])[:, None] + rng.normal(0, 1.5, (len(alive), 2))
        rows = [(int(t), int(t % 3), float(x), float(y)) for t, (x, y) in zip(alive, pos)]
        frames.append(frame(f, rows, device=a.device))
    dets = sum(len(fr.detections) for fr in frames) / len(frames)
    lines = ["a=100,300,1800,300", "b=100,700,1800,700", "c=500,50,500,1050", "d=1400,50,1400,1050"]
    zones = ["z1=100,100,900,100,900,500,100,500", "z2=1000,100,1800,100,1800,500,1000,500:dwell=2",
             "z3=100,600,900,600,700,1000,300,1000", "z4=1000,600,1800,600,1800,1000,1400,800,1000,1000"]
    stage = Zones(lines, zones, hysteresis=3)
    stage.process(frames[:a.batch])  # warm
    stage.reset(0)
    t0, c0 = time.perf_counter(), time.process_time()
    n_events = 0
    for i in range(0, len(frames), a.batch):
        for r in stage.process(frames[i:i + a.batch]):
            n_events += len(r.events)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"zones stage: {len(frames)} frames, {dets:.1f} detections/frame, 4 lines, 4 zones, "
          f"batches of {a.batch} on {a.device}: {len(frames) / dt:,.0f} frames/s "
          f"({dt / len(frames) * 1e6:.0f} us/frame; {len(frames) / cpu:,.0f} frames per CPU second), {n_events} events")


if __name__ == "__main__":
    main()
