"""Where does the run's process spend its time at N streams? Wall time accumulated in each hot
function (per thread kind: receivers of the decoder processes, the model's thread), during one
`bench streams` step's window, as seconds per second (1.0 = one thread busy all the time), plus
the GIL's pressure (a sentinel thread's late wake-ups). Low overhead (two clock reads per call),
unlike thread_samples.py, which perturbs runs of 96+ streams. GPU host. Usage:
python3 stage_busy.py STREAMS (LOCAL=1: on the CPU at 320x180, one decoder process)."""
import sys, time, threading, collections, functools
from multiprocessing.connection import Connection

T = time.perf_counter
acc = collections.defaultdict(float)
calls = collections.Counter()
on = [False]


def timed(owner, name, label):
    f = getattr(owner, name)

    @functools.wraps(f)
    def w(*a, **k):
        if not on[0]:
            return f(*a, **k)
        t = T()
        try:
            return f(*a, **k)
        finally:
            acc[label] += T() - t
            calls[label] += 1
    setattr(owner, name, w)


def timed_gen(owner, name, label):
    f = getattr(owner, name)

    @functools.wraps(f)
    def w(*a, **k):
        g = f(*a, **k)
        while True:
            t = T()
            try:
                x = next(g)
            except StopIteration:
                if on[0]:
                    acc[label] += T() - t
                return
            if on[0]:
                acc[label] += T() - t
                calls[label] += 1
            yield x
    setattr(owner, name, w)


stalls = []


def sentinel():
    while True:
        a = T(); time.sleep(0.002); late = (T() - a - 0.002) * 1e3
        if on[0]:
            stalls.append(late)


threading.Thread(target=sentinel, daemon=True).start()
from vidpipe.sources import live_hub
from vidpipe.batching.queues import SourceQueue
from vidpipe.batching.batcher import Batcher
from vidpipe.pipeline_infer import Inference
from vidpipe.pipeline import DetectionRun
import vidpipe.bench.streams as bs

timed(Connection, "recv", "receiver: conn.recv (waiting + unpickling)")
timed(live_hub._Link, "handle", "receiver: link.handle")
timed(live_hub._Link, "_frame", "receiver: link._frame")
timed(live_hub.LiveHub, "hand_back", "receiver: hub.hand_back (query, send)")
timed(SourceQueue, "put", "receiver: queue.put")
timed(Batcher, "next", "model: batcher.next (waiting + forming)")
timed(Batcher, "_form", "model: batcher._form")
timed(Inference, "launch", "model: launch")
timed(Inference, "_postprocess", "model: postprocess (head, NMS, copy)")
timed_gen(Inference, "finish", "model: finish")
timed(DetectionRun, "_deliver", "model: deliver (per result)")
_measure = bs._measure
window = {}


def measure(*a, **k):
    def start():
        acc.clear(); calls.clear(); stalls.clear(); on[0] = True; window["t"] = T()
    threading.Timer(14.0, start).start()
    try:
        return _measure(*a, **k)
    finally:
        on[0] = False
        window["s"] = T() - window.get("t", T())


bs._measure = measure
n = int(sys.argv[1]) if len(sys.argv) > 1 else 64
import os
where = (dict(device="cpu", decoder="pyav", size=(320, 180), live_processes=1) if os.environ.get("LOCAL")
         else dict(device="cuda", decoder="nvdec", nginx_root="/root/nginx-root", work_dir="/root/media"))
res = bs.run_streams_bench(streams=[n], seconds=10, warmup=6, **where)
r = res.rows[0]
print({k: (round(v, 1) if isinstance(v, float) else v) for k, v in r.items()
       if k in ("streams", "fps_total", "p50_ms", "p99_ms", "drops", "drop_causes", "cpu_cores", "gpu_util")})
w = window["s"]
print(f"window {w:.1f} s (sampling from 14 s after the run's start to its end)")
for label in sorted(acc):
    print(f"{acc[label] / w:7.3f} s/s  {calls[label] / w:9.0f} calls/s  {1e6 * acc[label] / max(1, calls[label]):8.1f} us/call  {label}")
s = sorted(stalls)
if s:
    print(f"sentinel: {len(s)} wake-ups, late p50 {s[len(s) // 2]:.2f} ms, p99 {s[int(len(s) * .99)]:.1f} ms, max {s[-1]:.0f} ms")
