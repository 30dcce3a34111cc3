"""Probe (GPU host): how much of a fresh process's first long-file run goes to starting the decoder
processes' NVDEC sessions. Starts the decoder processes, builds the detector, optionally warms the
sessions first (``warm``: :func:`vidpipe.decode.nvdec.warm_sessions`), then runs ``vidpipe.detect``
on CLIP three times with results on the host and prints each run's wall, its summary seconds and the
stage times. Usage: python3 cold_warm.py CLIP cold|warm."""
import json
import sys
import time

t0 = time.perf_counter()
clip, warm_first = sys.argv[1], sys.argv[2] == "warm"
from vidpipe.decode.procpool import DEFAULT_PROCESSES, get_pool  # noqa: E402

import vidpipe  # noqa: E402
from vidpipe.api import build_detector  # noqa: E402

pool = get_pool("cuda:0", DEFAULT_PROCESSES, start=True)
print(f"pool up at {time.perf_counter() - t0:.2f} s", flush=True)
det = build_detector("yolov3-tiny", device="cuda")
print(f"detector at {time.perf_counter() - t0:.2f} s", flush=True)
if warm_first:
    from vidpipe.decode.nvdec import warm_sessions

    t = time.perf_counter()
    warm_sessions(clip, "cuda:0", processes=DEFAULT_PROCESSES)
    print(f"warm_sessions {time.perf_counter() - t:.2f} s", flush=True)
for i in range(3):
    t = time.perf_counter()
    run = vidpipe.detect(clip, model=det, results_on_host=True)
    n = sum(1 for _ in run)
    run.close()
    s = run.summary()
    print(f"run {i}: {n} frames wall {time.perf_counter() - t:.2f} s summary {s.seconds:.2f} s "
          f"processes {(s.sources[0].extra or {}).get('decoder_processes')}", flush=True)
    print("   stages ms/frame", json.dumps(run.get_stats().get("stages_ms_per_frame")), flush=True)
