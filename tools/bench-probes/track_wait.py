"""Probe (GPU host): where tracking's time goes on the run's thread with decoder processes, and
whether leaving two batches with the tracker's helper process (pipeline.STAGED_BATCHES = 2)
instead of one hides it. vidpipe.detect on real 1080p street footage (vidpipe.bench.realclip,
TILES 1 and 2), results on the host, untracked / tracked (1 staged) / tracked (2 staged)
alternated for ROUNDS rounds in one process (the first warms up). On the run's thread: packing,
sending, waiting for the child's reply (and how often it was not there yet), attaching the ids.
Then the tracker alone (TrackBook inline, this host) on the run's detections: its own rate.
Usage: python3 track_wait.py [FRAMES] [MEDIA_DIR] [ROUNDS] [TILES,...]."""
import collections
import functools
import os
import statistics
import sys
import time

import numpy as np

import vidpipe
import vidpipe.pipeline as pipeline_mod
import vidpipe.track.stage as stage_mod
from vidpipe.bench.realclip import build_real_clip
from vidpipe.track.book import PackedFrames, TrackBook
from vidpipe.track.config import TrackConfig
from vidpipe.track.process import TrackerProcess

spent: collections.Counter = collections.Counter()


def timed(name, fn):
    @functools.wraps(fn)
    def wrapper(*a, **k):
        t = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            spent[name] += time.perf_counter() - t
            spent[name + "#"] += 1
    return wrapper


orig_from_box = TrackerProcess._from_box


def from_box(self, seq):
    if self._box.replied() < seq:
        spent["late"] += 1
    return orig_from_box(self, seq)


TrackerProcess._from_box = timed("wait", from_box)
TrackerProcess.request = timed("send", TrackerProcess.request)
stage_mod._pack = timed("pack", stage_mod._pack)
stage_mod._attach = timed("attach", stage_mod._attach)

frames = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
media = sys.argv[2] if len(sys.argv) > 2 else "/root/media"
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
tiles = [int(t) for t in (sys.argv[4] if len(sys.argv) > 4 else "1,2").split(",")]
device = os.environ.get("DEVICE", "cuda")
for tile in tiles:
    clip = build_real_clip(media, frames=frames, tiles=tile)
    rates: dict[str, list[float]] = {}
    rows = []
    for rep in range(rounds):
        for mode, staged in (("untracked", 1), ("tracked-1", 1), ("tracked-2", 2)):
            pipeline_mod.STAGED_BATCHES = staged
            spent.clear()
            run = vidpipe.detect(str(clip), device=device, results_on_host=True, track=mode != "untracked" or None)
            keep = not rows
            n = 0
            for r in run:
                n += 1
                if keep and n <= 3000:
                    d = r.detections
                    rows.append(np.concatenate([d.boxes.numpy(), d.scores.numpy()[:, None],
                                                d.class_ids.numpy()[:, None].astype(np.float32)], 1))
            s = run.summary()
            ms = {k: round(v, 3) for k, v in (run.get_stats().get("stages_ms_per_frame") or {}).items()}
            parts = {k: round(v / s.frames * 1e3, 4) for k, v in spent.items() if not k.endswith("#") and k != "late"}
            print(f"tiles {tile} round {rep} {mode:9s} fps {s.fps:.0f} ms/frame {ms} run-thread ms/frame {parts} "
                  f"late replies {spent['late']}/{spent['wait#']}", flush=True)
            if rep or rounds == 1:
                rates.setdefault(mode, []).append(s.fps)
    for mode, r in rates.items():
        print(f"tiles {tile} {mode:9s} median {statistics.median(r):.0f} fps: {[round(x) for x in r]}")
    for mode in ("tracked-1", "tracked-2"):
        t, u = rates[mode], rates["untracked"]
        print(f"tiles {tile} {mode}: {statistics.median(t) / statistics.median(u):.3f}x untracked (medians); "
              f"per round {[round(a / b, 3) for a, b in zip(t, u)]}", flush=True)
    book, t0 = TrackBook(TrackConfig()), time.perf_counter()
    for b in range(0, len(rows) - 31, 32):
        part = rows[b:b + 32]
        book.track(PackedFrames(0, np.arange(b, b + 32) / 30.0, np.array([len(x) for x in part]),
                                np.concatenate(part).astype(np.float32)), first_id=1)
    dt = time.perf_counter() - t0
    print(f"tiles {tile} the tracker alone (inline, this host): {len(rows) / dt:.0f} frames/s, "
          f"{sum(map(len, rows)) / len(rows):.2f} detections a frame", flush=True)
