"""Probe (GPU host): does the caching allocator add a segment after warm-up? Runs ``vidpipe.detect``
on the soak's two inputs (the bundled street clip and the same clip as a 450-frame 1080p file,
built in /root/media) again and again for SECONDS, with one detector, and prints every 20 s the
frames per second, the allocator's segments, its reserve and the detector's letterbox work buffer
(``Detector.scratch``). No memory history (its overhead would change the timing that the growth
depends on); :mod:`segment_growth` names the stacks. Usage: python3 segment_check.py SECONDS."""
import sys
import time

import torch

import vidpipe
from vidpipe.api import build_detector
from vidpipe.bench.realclip import build_real_clip, bundled_street_clip

limit = float(sys.argv[1])
clip = build_real_clip("/root/media", frames=450)
srcs = [str(bundled_street_clip()), str(clip)]
det = build_detector("yolov3-tiny", device="cuda")
t0 = time.time()
runs = frames = 0
mark, nxt, first = (t0, 0), t0 + 20, None
while time.time() - t0 < limit:
    with vidpipe.detect(srcs, model=det, batch_size=32) as run:
        frames += sum(1 for _ in run)
    runs += 1
    segs, res = torch.cuda.memory_stats()["segment.all.current"], torch.cuda.memory_reserved() / 2**20
    if runs == 3:
        first = (segs, res)
    now = time.time()
    if now >= nxt or runs <= 3:
        print(f"t={now - t0:5.0f}s runs {runs} fps {(frames - mark[1]) / (now - mark[0]):6.0f} segments {segs} "
              f"reserved {res:.0f} MiB arena {det.scratch.nbytes / 2**20:.1f} MiB", flush=True)
        mark, nxt = (now, frames), now + 20
print("after run 3", first, "end", (segs, res), "runs", runs)
