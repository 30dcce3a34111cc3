"""Probe (GPU host): is the tracker's helper process busy all the run (the limit), and does it
run slower beside the decoder processes than alone? vidpipe.detect on the crowded real clip
(vidpipe.bench.realclip, TILES), results on the host, `track=True`, decoder processes (the
default for this length); the helper's CPU seconds (/proc) against the run's wall time, then
the same detections tracked alone (TrackBook, this process). Then the same with the decoder
processes at a lower priority (nice +10), untracked and tracked.
Usage: python3 track_child_cpu.py [FRAMES] [MEDIA_DIR] [TILES]."""
import os
import sys
import time

import numpy as np

import vidpipe
import vidpipe.decode.procpool as procpool
import vidpipe.track.stage as stage_mod
from vidpipe.bench.realclip import build_real_clip
from vidpipe.track.book import PackedFrames, TrackBook
from vidpipe.track.config import TrackConfig

frames = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
media = sys.argv[2] if len(sys.argv) > 2 else "/root/media"
tiles = int(sys.argv[3]) if len(sys.argv) > 3 else 2
clip = os.environ.get(f"CLIP_{tiles}") or build_real_clip(media, frames=frames, tiles=tiles)
tick = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / tick


made = []
orig = stage_mod.TrackerStage.__init__


def init(self, *a, **k):
    orig(self, *a, **k)
    made.append(self)


stage_mod.TrackerStage.__init__ = init


def decoder_pids():
    return [p.pid for pool in list(procpool._pools.values()) for p in pool.procs if p.poll() is None]


rows = []
for rep, (nice, track) in enumerate([(0, False), (0, True), (0, False), (0, True), (10, False), (10, True),
                                     (0, False), (0, True), (10, False), (10, True)]):  # fmt: skip
    for pid in decoder_pids():
        try:
            os.setpriority(os.PRIO_PROCESS, pid, nice)
        except PermissionError:
            print("cannot set the decoder processes' priority back (not root)")
    made.clear()
    run = vidpipe.detect(str(clip), device="cuda", results_on_host=True, track=track or None)
    child = made[0]._child if made else None
    c0 = cpu_s(child.pid) if child else 0.0
    dec0 = sum(cpu_s(p) for p in decoder_pids())
    t0 = time.perf_counter()
    keep = not rows and track
    n, last, t_last = 0, c0, t0
    for r in run:
        n += 1
        if child and n % 1000 == 0:  # the helper is gone once the run ends: sample it meanwhile
            last, t_last = cpu_s(child.pid), time.perf_counter()
        if keep and len(rows) < 4000:
            d = r.detections
            rows.append(np.concatenate([d.boxes.numpy(), d.scores.numpy()[:, None],
                                        d.class_ids.numpy()[:, None].astype(np.float32)], 1))
    wall = time.perf_counter() - t0
    s = run.summary()
    busy = (last - c0) / (t_last - t0) if child and t_last > t0 else 0.0
    dec = (sum(cpu_s(p) for p in decoder_pids()) - dec0) / wall
    print(f"round {rep} nice {nice:2d} {'tracked  ' if track else 'untracked'} fps {s.fps:5.0f} wall {wall:5.2f} s "
          f"helper busy {busy:4.0%} decoder processes {dec:4.0%} of a core, load {os.getloadavg()[0]:.1f}",
          flush=True)
book, t0 = TrackBook(TrackConfig()), time.perf_counter()
for b in range(0, len(rows) - 31, 32):
    part = rows[b:b + 32]
    book.track(PackedFrames(0, np.arange(b, b + 32) / 30.0, np.array([len(x) for x in part]),
                            np.concatenate(part).astype(np.float32)), first_id=1)
print(f"the tracker alone (inline, this host): {len(rows) / (time.perf_counter() - t0):.0f} frames/s, "
      f"{sum(map(len, rows)) / max(1, len(rows)):.2f} detections a frame; cores {os.cpu_count()}")
