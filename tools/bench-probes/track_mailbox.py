"""Probe (GPU host): what tracking costs the run with the tracker child's requests through the
shared-memory mailbox against the socket (the code before), beside no tracking; vidpipe.detect on a
real 1080p street clip (vidpipe.bench.realclip), results on the host (as `vidpipe detect --track`),
the three alternated for ROUNDS rounds in one process (the first round warms up).
Usage: python3 track_mailbox.py [FRAMES] [MEDIA_DIR] [ROUNDS]."""
import functools
import statistics
import sys
import time

import vidpipe
import vidpipe.track.stage as stage_mod
from vidpipe.bench.realclip import build_real_clip
from vidpipe.track import TrackerStage
from vidpipe.track.process import TrackerProcess

frames = int(sys.argv[1]) if len(sys.argv) > 1 else 6000
clip = build_real_clip(sys.argv[2] if len(sys.argv) > 2 else "/root/media", frames=frames)
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 4
rates: dict[str, list[float]] = {}
for rep in range(rounds):
    for mode in ("untracked", "socket", "mailbox"):
        stages = []
        if mode != "untracked":
            stage_mod.TrackerProcess = functools.partial(TrackerProcess, mailbox=mode == "mailbox")
            stages = [TrackerStage(worker="process")]
            assert (stages[0]._child._box is not None) == (mode == "mailbox")
        run = vidpipe.detect(str(clip), device="cuda", results_on_host=True, stages=stages)
        t0 = time.perf_counter()
        n = sum(1 for _ in run)
        wall = time.perf_counter() - t0
        s, st = run.summary(), run.get_stats()
        ms = {k: round(v, 3) for k, v in (st.get("stages_ms_per_frame") or {}).items()}
        print(f"round {rep} {mode:9s} frames {n} summary fps {s.fps:.0f} iter {n / wall:.0f} fps ms/frame {ms}", flush=True)
        if rep:
            rates.setdefault(mode, []).append(s.fps)
for mode, r in rates.items():
    print(f"{mode:9s} median {statistics.median(r):.0f} fps over {len(r)} warm rounds: {[round(x) for x in r]}")
base = statistics.median(rates["untracked"])
for mode in ("socket", "mailbox"):
    print(f"{mode}: {statistics.median(rates[mode]) / base:.3f}x untracked (medians); per round:",
          [round(t / u, 3) for t, u in zip(rates[mode], rates["untracked"])])
