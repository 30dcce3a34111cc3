"""Probe: alternating fresh runs of ``vidpipe detect CLIP --device cuda --debug`` from two source
trees (new and old code in the same call), each run's time line from its log, seconds since the
command started: ``early`` (the command's NVDEC sessions pooled), ``call`` (vidpipe.detect's probe: the
second probe line, so one early for a run that probes its file before PyTorch), ``model`` (loaded), ``graph`` (CUDA graph
captured), ``pool`` (decoder processes ready), ``plan`` (the file's decode plan), ``end`` (the
summary), ``exit``; ``first`` and ``run`` from the summary; ``child_torch_max`` the slowest
decoder process's PyTorch import (its ``ready in`` line). Medians at the end
(``docs/bench/h200/child-start``).

    NEWPP=/root/site:$PWD/src OLDPP=/root/site:/path/to/old/src python3 tools/bench-probes/start_series.py CLIP 5
"""
import os, re, subprocess, sys, time, statistics
clip, reps = sys.argv[1], int(sys.argv[2])
variants = {"new": os.environ["NEWPP"], "old": os.environ["OLDPP"]}
extra = sys.argv[3:]
rows = {k: [] for k in variants}
for i in range(reps):
    for name, pp in variants.items():
        env = dict(os.environ, PYTHONPATH=pp)
        t0 = time.time()
        p = subprocess.Popen([sys.executable, "-m", "vidpipe", "detect", clip, "--device", "cuda", "--debug",
                              "-o", f"/tmp/s-{name}.csv", "--progress", "off", *extra],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        marks = {}
        probes = 0
        for line in p.stdout:
            t = time.time() - t0
            if "DEBUG vidpipe.decode.probe" in line and "process" not in line:
                probes += 1
                if probes == 2: marks.setdefault("call", t)
            if "NVDEC sessions started for" in line: marks.setdefault("early", t)
            if "loaded Darknet model" in line: marks.setdefault("model", t)
            if "accelerate:" in line: marks.setdefault("graph", t)
            if "decoder processes for" in line: marks.setdefault("pool", t)
            if "DecodePlan(" in line: marks.setdefault("plan", t)
            m = re.search(r"ready in ([\d.]+) s: PyTorch imported ([\d.]+)", line)
            if m: marks.setdefault("child_torch", []).append(float(m.group(2)))
            if re.search(r"\d+ sources?: \d+ frames", line): marks["end"] = t
            m = re.search(r"first result ([\d.]+) s", line)
            if m: marks["first"] = float(m.group(1))
            m = re.search(r"in ([\d.]+) s \(([\d.]+) fps\)", line)
            if m: marks["run"] = float(m.group(1))
        p.wait()
        marks["exit"] = time.time() - t0
        ct = marks.pop("child_torch", [])
        marks["child_torch_max"] = max(ct) if ct else float("nan")
        rows[name].append(marks)
        print(name, i, " ".join(f"{k}={v:.2f}" for k, v in marks.items()), flush=True)
keys = ["early", "call", "model", "graph", "pool", "plan", "first", "run", "end", "exit", "child_torch_max"]
print("median:")
for name, rs in rows.items():
    print(name, " ".join(f"{k}={statistics.median(r.get(k, float('nan')) for r in rs):.2f}" for k in keys))
