"""Probe (GPU host): what tracking costs the run now that long files decode in decoder processes
(issue 10) instead of threads of this process, whose GIL the run's thread shares. vidpipe.detect on
real 1080p street footage (vidpipe.bench.realclip: one tile, ~1.1 detections a frame, and the
2 x 2 crowd, ~3.9), results on the host (as `vidpipe detect --track`), untracked and `track=True`
alternated for ROUNDS rounds in one process (the first warms up), with the decoder's default
(`auto`: processes for files this long) and with threads (`decoder_processes=0`); TRACKERS picks
the tracker stages to compare, ENGINE:WORKER each (TrackerStage(engine=..., worker=...); default
auto:auto, what track=True makes).
Usage: python3 track_processes.py [FRAMES] [MEDIA_DIR] [ROUNDS] [TILES,...] [auto,threads] [TRACKERS,...]."""
import os
import statistics
import sys

import vidpipe
from vidpipe.bench.realclip import build_real_clip
from vidpipe.track import TrackerStage

frames = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
media = sys.argv[2] if len(sys.argv) > 2 else "/root/media"
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
tiles = [int(t) for t in (sys.argv[4] if len(sys.argv) > 4 else "1,2").split(",")]
decoders = {"auto": None, "threads": 0}
decoders = {k: decoders[k] for k in (sys.argv[5] if len(sys.argv) > 5 else "auto,threads").split(",")}
trackers = [None] + [tuple(t.split(":")) for t in (sys.argv[6] if len(sys.argv) > 6 else "auto:auto").split(",")]
for tile in tiles:
    # CLIP_<TILES>=path: a clip built already (code from before `tiles` existed measures it too)
    clip = os.environ.get(f"CLIP_{tile}") or build_real_clip(media, frames=frames, tiles=tile)
    rates: dict[str, list[float]] = {}
    for rep in range(rounds):
        for name, procs in decoders.items():
            for track in trackers:
                mode = name if track is None else f"{name}+track" + ("" if track == ("auto", "auto") else f"[{':'.join(track)}]")
                stages = [] if track is None else [TrackerStage(engine=track[0], worker=track[1])]
                run = vidpipe.detect(str(clip), device=os.environ.get("DEVICE", "cuda"), results_on_host=True,
                                     stages=stages, decoder_processes=procs)
                dets = sum(len(r.detections) for r in run)
                s, st = run.summary(), run.get_stats()
                ms = {k: round(v, 3) for k, v in (st.get("stages_ms_per_frame") or {}).items()}
                used = s.sources[0].extra.get("decoder_processes", 0)
                print(f"tiles {tile} round {rep} {mode:13s} frames {s.frames} dets {dets} procs {used} "
                      f"fps {s.fps:.0f} ms/frame {ms}", flush=True)
                if rep or rounds == 1:
                    rates.setdefault(mode, []).append(s.fps)
    for mode, r in rates.items():
        print(f"tiles {tile} {mode:13s} median {statistics.median(r):.0f} fps: {[round(x) for x in r]}")
    for base in decoders:
        for mode in [m for m in rates if m.startswith(base + "+track")]:
            t, u = rates[mode], rates[base]
            print(f"tiles {tile} {mode}: tracked {statistics.median(t) / statistics.median(u):.3f}x untracked "
                  f"(medians); per round {[round(a / b, 3) for a, b in zip(t, u)]}", flush=True)
