"""Probe (GPU host): tracking's cost, vidpipe.detect on a real 1080p street clip (the bundled street clip scaled and looped by vidpipe.bench.realclip), with and without track=True, twice. Usage: python3 track_rate.py [FRAMES]."""
import time, sys
import vidpipe
from vidpipe.bench.realclip import build_real_clip
t = time.time()
clip = build_real_clip('/root/media', frames=int(sys.argv[1]) if len(sys.argv) > 1 else 3000)
print(f"clip {clip.name} built in {time.time()-t:.0f} s", flush=True)
for rep in range(2):
    for track in (False, True):
        run = vidpipe.detect(str(clip), device="cuda", track=track)
        t0 = time.perf_counter(); n = dets = 0; tracked = 0
        for r in run:
            n += 1; dets += len(r.detections)
            if track and r.detections.track_ids is not None:
                tracked += int((r.detections.track_ids >= 0).sum())
        wall = time.perf_counter() - t0
        s = run.summary(); st = s.stats
        print(f"track={track!s:5s} frames {n} detections {dets} tracked {tracked} summary fps {s.fps:.0f} "
              f"iter wall {wall:.2f} s ({n/wall:.0f} fps) ms/frame {({k: round(v, 3) for k, v in st.get('stages_ms_per_frame', {}).items()})}", flush=True)
