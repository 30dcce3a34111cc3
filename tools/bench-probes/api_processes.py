"""Probe (GPU host): ``vidpipe.detect`` from Python in a fresh process per run, decoder processes
started when the decode begins (``decoder_processes=N``, the API's way: no early start) against
threads (``decoder_processes=0``), alternating; wall time from the interpreter's start, and the
summary's first result, run seconds and frames/s. Next to ``vidpipe bench startup --decoder-processes
0,N``, whose N series starts the processes with the command (vidpipe.decode.prestart).
Usage: python3 api_processes.py CLIP [ROUNDS] [N]."""
import json
import statistics
import subprocess
import sys
import time

clip = sys.argv[1]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
procs = int(sys.argv[3]) if len(sys.argv) > 3 else 4
CODE = """
import json, sys, vidpipe
run = vidpipe.detect(sys.argv[1], device="cuda", decoder_processes=int(sys.argv[2]), results_on_host=True)
n = sum(1 for _ in run)
s = run.summary()
print(json.dumps({"frames": n, "fps": s.fps, "seconds": s.seconds, "first_result_s": s.stats.get("first_result_s"),
                  "warmup_s": s.stats.get("warmup_s"), "procs": s.sources[0].extra.get("decoder_processes", 0)}))
"""
got: dict[int, list[dict]] = {0: [], procs: []}
for _ in range(rounds):
    for n in (0, procs):
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-c", CODE, clip, str(n)], capture_output=True, text=True, timeout=300)
        wall = time.perf_counter() - t0
        if p.returncode != 0:
            print(p.stderr[-2000:])
            raise SystemExit(1)
        row = {"wall": wall, **json.loads(p.stdout.strip().splitlines()[-1])}
        got[n].append(row)
        print(f"decoder_processes={n}: wall {wall:.2f} s, first result {row['first_result_s']:.2f} s, run {row['seconds']:.2f} s, "
              f"{row['fps']:.0f} frames/s, {row['frames']} frames, processes used {row['procs']}", flush=True)
for n, rows in got.items():
    print(f"median decoder_processes={n}: wall {statistics.median(r['wall'] for r in rows):.2f} s, "
          f"run {statistics.median(r['seconds'] for r in rows):.2f} s, {statistics.median(r['fps'] for r in rows):.0f} frames/s")
