"""Probe helper: four ``vidpipe.detect`` runs of one file in one process, with a time line of
runs 2 and 4 (the decode's probe, scan, buffers, first batch; the run's clock and warm-up), to see
where a warm run's time goes before its first result (``docs/bench/h200/host-results``). GPU host.

    python3 tools/bench-probes/warm_trace.py CLIP threads|procs

``procs``: four decoder processes (warm from run 2 on, as ``bench e2e``'s vidpipe-gpu row).
The wrappers are this script's; nothing in vidpipe is changed."""
import sys, time, threading, functools, statistics
T00 = time.perf_counter()
import torch  # noqa: F401 - imported first, as a user script does
import vidpipe
clip, mode = sys.argv[1], sys.argv[2]
procs = 0 if mode == "threads" else 4
EV = []
SEEN: list[set] = []  # per once-per-thread wrapper: threads seen this run
def rec(label, t0):
    EV.append((label, threading.current_thread().name, t0, time.perf_counter()))
def wrap(owner, name, label=None, once_per_thread=False):
    f = getattr(owner, name); lab = label or name; seen = set(); SEEN.append(seen)
    @functools.wraps(f)
    def w(*a, **k):
        t = time.perf_counter()
        try: return f(*a, **k)
        finally:
            key = threading.current_thread().name
            if not once_per_thread or key not in seen:
                seen.add(key); rec(lab, t)
    setattr(owner, name, w)
def wrapgen(owner, name, label):
    f = getattr(owner, name)
    @functools.wraps(f)
    def w(*a, **k):
        t = time.perf_counter(); g = f(*a, **k); first = True
        try:
            for x in g:
                if first: rec(label + ":first", t); first = False
                yield x
            rec(label + ":end", t)
        finally:
            g.close()
    setattr(owner, name, w)
import vidpipe.decode.probe as P, vidpipe.decode.parallel as PA, vidpipe.decode.gpu_buffers as GB
import vidpipe.decode.workers as W, vidpipe.pipeline_infer as PI, vidpipe.pipeline as PL
import vidpipe.decode.nvdec as NV, vidpipe.sources.file as SF
wrap(P, "probe"); wrap(PA, "scan_stream"); wrap(GB, "reserve_buffers")
wrapgen(W, "run_workers", "run_workers")
wrap(W, "decode_segment", "decode_segment(first per thread)", once_per_thread=True)
wrap(W.Emitter, "flush", "emit.flush(first per thread)", once_per_thread=True)
wrap(NV.NvdecSession, "start", "sess.start(first per thread)", once_per_thread=True)
wrap(PI.Inference, "launch", "launch(first)", once_per_thread=True)
wrap(PI.Inference, "warm_up", "warm_up")
wrap(PL.DetectionRun, "_start_clock", "clock")
wrap(PL.DetectionRun, "_may_decode_nv12", "_may_decode_nv12")
wrapgen(SF.FileSource, "produce", "FileSource.produce")
runs = []
for i in range(4):
    EV.clear()
    for s in SEEN: s.clear()
    t = time.perf_counter()
    run = vidpipe.detect(clip, device="cuda", decoder_processes=procs)
    t_made = time.perf_counter()
    n = 0
    for b in run.batches():
        if n == 0: t_first = time.perf_counter()
        n += len(b)
    run.close()
    s = run.summary(); st = run.get_stats()
    wall = time.perf_counter() - t
    runs.append((wall, s.seconds))
    print(f"run {i} ({mode}) @{t - T00:.2f}s: wall {wall:.3f} made {t_made - t:.3f} clock-at {run.started_at - t:.3f} "
          f"first {t_first - t:.3f} run {s.seconds:.3f} fps {n / s.seconds:.0f} frames {n} dets {s.detections} "
          f"extra {s.sources[0].extra}", flush=True)
    print("   stages ms/frame", {k: round(v, 4) for k, v in (st.get('stages_ms_per_frame') or {}).items()}, flush=True)
    if i in (1, 3):
        for lab, th, a, b in sorted(EV, key=lambda e: e[2]):
            print(f"   {a - t:7.3f} .. {b - t:7.3f}  {b - a:7.3f}  {th:18s} {lab}")
print(mode, "warm runs median wall %.3f run %.3f" % (statistics.median(r[0] for r in runs[1:]), statistics.median(r[1] for r in runs[1:])))
