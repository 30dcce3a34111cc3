"""Probe (GPU host): tracking's cost, vidpipe.detect on a real 1080p street clip (the bundled street clip scaled and looped by vidpipe.bench.realclip): no tracking, the tracker inline (on the run's thread) and in its helper process, with results on the device (the API's default) and on the host (what `vidpipe detect` asks for), twice; the second round (warm) counts. Usage: python3 track_rate.py [FRAMES] [MEDIA_DIR]."""
import sys
import time

import vidpipe
from vidpipe.bench.realclip import build_real_clip

try:
    from vidpipe.track import TrackerStage
    WORKERS = (None, "inline", "process")
    TrackerStage(worker="inline")
except TypeError:  # a vidpipe from before the helper process: track=True is inline
    WORKERS = (None, "inline")

t = time.time()
clip = build_real_clip(sys.argv[2] if len(sys.argv) > 2 else '/root/media', frames=int(sys.argv[1]) if len(sys.argv) > 1 else 3000)
print(f"clip {clip.name} built in {time.time()-t:.0f} s", flush=True)
for rep in range(2):
    for on_host in (False, True):
        for worker in WORKERS:
            kw = {} if worker is None else ({"track": True} if len(WORKERS) == 2 else {"stages": [TrackerStage(worker=worker)]})
            run = vidpipe.detect(str(clip), device="cuda", results_on_host=on_host, **kw)
            t0 = time.perf_counter(); n = dets = 0; tracked = 0
            for r in run:
                n += 1; dets += len(r.detections)
                if worker and r.detections.track_ids is not None:
                    tracked += int((r.detections.track_ids >= 0).sum())
            wall = time.perf_counter() - t0
            s = run.summary(); st = run.get_stats()
            print(f"round {rep} results_on_host={on_host!s:5s} track={worker!s:7s} frames {n} detections {dets} tracked {tracked} "
                  f"summary fps {s.fps:.0f} iter wall {wall:.2f} s ({n/wall:.0f} fps) "
                  f"ms/frame {({k: round(v, 3) for k, v in (st.get('stages_ms_per_frame') or {}).items()})}", flush=True)
