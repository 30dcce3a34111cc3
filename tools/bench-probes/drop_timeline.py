"""Where do the drops of `bench streams` come from? Timelines of GC pauses, GIL stalls (a
sentinel thread's late wake-ups, with every thread's stack dumped by faulthandler when one passes
50 ms), batches taken and their sizes, launch and finish times, frames queued per stream and
drops, printed around each drop. GPU host (nginx under /root/ngx, media cache /root/media);
LOCAL=1 runs it on the CPU at 320x180. Usage: python3 drop_timeline.py VARIANT STREAMS...
VARIANT: default | old (partial batches run eagerly, as before the graph took them) | freeze
(gc.freeze() at the run's start) | nogc (gc disabled); QF=N sets LiveOptions.queue_frames.
Results of the ninth session: docs/bench/h100/live-streams-2/README.md."""
import gc, sys, time, threading, collections
variant = sys.argv[1]
counts = [int(x) for x in sys.argv[2:]] or [64]
T = time.monotonic
T0 = T()
gcs, stalls, drops, takes, puts = [], [], [], [], []
_s = {}
def cb(phase, info):
    if phase == "start":
        _s["t"] = T()
    else:
        gcs.append((_s.get("t", T()), (T() - _s.get("t", T())) * 1e3, info["generation"], info.get("collected", 0)))
gc.callbacks.append(cb)
import faulthandler, os
_dumpf = open(os.path.join(os.environ.get("OUT", "/tmp"), f"stacks-{sys.argv[1]}-{'-'.join(sys.argv[2:])}.txt"), "w")
dumps = [0]
def sentinel():
    armed = 0
    while True:
        if dumps[0] < 40 and T() - T0 > 25:
            faulthandler.dump_traceback_later(0.05, file=_dumpf); armed = 1
        a = T(); time.sleep(0.002); late = (T() - a - 0.002) * 1e3
        if armed:
            faulthandler.cancel_dump_traceback_later(); armed = 0
        if late > 8:
            stalls.append((a, late))
            if late > 50:
                dumps[0] += 1
                _dumpf.write(f"^^^ stall {late:.0f} ms at {a:.3f}\n"); _dumpf.flush()
threading.Thread(target=sentinel, daemon=True).start()
import vidpipe
from vidpipe.pipeline_config import SourceState
from vidpipe.batching.queues import SourceQueue
from vidpipe.batching.batcher import Batcher
_drop = SourceState.drop
def drop(self, cause, n=1):
    drops.append((T(), self.stream_id, cause, n)); return _drop(self, cause, n)
SourceState.drop = drop
_put = SourceQueue.put
def put(self, inp, ready, *, stop):
    if self.live: puts.append((T(), self.stream_id))
    return _put(self, inp, ready, stop=stop)
SourceQueue.put = put
_take = Batcher._take
def take(self, batch):
    takes.append((T(), sum(m for _, _, m in batch), sum(q.frames for q in self._queues)))
    return _take(self, batch)
Batcher._take = take
launches = []
from vidpipe.pipeline_infer import Inference
_launch = Inference.launch
def launch(self, chunks, torch):
    a = T(); r = _launch(self, chunks, torch); launches.append((a, sum(len(c) for c in chunks), (T() - a) * 1e3)); return r
Inference.launch = launch
finishes = []
_finish = Inference.finish
def finish(self, job, torch):
    a = T(); first = True
    for x in _finish(self, job, torch):
        if first:
            finishes.append((a, len(job.inp), (T() - a) * 1e3)); first = False
        yield x
Inference.finish = finish
if variant == "old":
    from vidpipe.models.backends import accel
    accel._CapturedForward.takes = lambda self, x: x.shape[1:] == self.static_in.shape[1:] and x.shape[0] == self.batch
if variant in ("freeze", "nogc"):
    _detect = vidpipe.detect
    def detect(*a, **k):
        gc.collect(); gc.freeze()
        if variant == "nogc": gc.disable()
        run = _detect(*a, **k)
        def later():
            gc.collect(); gc.freeze()
        threading.Timer(5.0, later).start()
        return run
    vidpipe.detect = detect
from vidpipe.bench.streams import run_streams_bench
res = run_streams_bench(streams=counts, seconds=10, warmup=6, queue_frames=int(os.environ["QF"]) if os.environ.get("QF") else None, **(dict(device="cpu", decoder="pyav", size=(320, 180)) if __import__("os").environ.get("LOCAL") else dict(device="cuda", decoder="nvdec", nginx_root="/root/ngx", work_dir="/root/media")))
rows_out = []
for row in res.rows:
    rows_out.append((variant, {k: (round(v, 1) if isinstance(v, float) else v) for k, v in row.items() if k in ("streams", "fps_total", "fps_min", "p50_ms", "p99_ms", "max_ms", "drops", "drop_causes", "machine_cores", "gpu_util", "nvdec_util", "cpu_cores")}))
# analysis: last run's drops in context
for t, sid, cause, n in drops[-30:]:
    near_gc = [(round(d, 1), g) for (s, d, g, _) in gcs if s - 0.4 < t < s + d / 1e3 + 0.4 and d > 2]
    near_st = [round(l) for (a, l) in stalls if a - 0.4 < t < a + 0.4]
    prev = [x for x in takes if x[0] <= t]
    gap = (t - prev[-1][0]) * 1e3 if prev else None
    gaps_before = [round((b[0] - a[0]) * 1e3) for a, b in zip(prev[-6:], prev[-5:])]
    sp = [round((t - x[0]) * 1e3) for x in puts if x[1] == sid and t - 0.3 < x[0] <= t]
    print(f"drop t={t:.3f} s{sid} {cause} x{n}: since last take {gap and round(gap)} ms, take gaps {gaps_before}, waiting at takes {[x[2] for x in prev[-5:]]}, this stream's puts in 300ms (ms ago) {sp}, gc>2ms {near_gc}, stalls {near_st}")
big = sorted(gcs, key=lambda x: -x[1])[:8]
print("longest gc:", [(round(d, 1), g) for (_, d, g, _) in big], "count by gen", collections.Counter(g for *_, g, _ in [(0, 0, x[2], 0) for x in gcs]))
ls = sorted(launches, key=lambda x: -x[2])[:12]
print("slowest launches (size, ms):", [(n, round(d)) for _, n, d in ls])
seen = set(); firsts = []
for a, n, d in launches:
    if n not in seen: seen.add(n); firsts.append((n, round(d)))
print("first launch per size (size, ms):", firsts)
fs = sorted(finishes, key=lambda x: -x[2])[:12]
print("slowest finishes (size, ms, at):", [(n, round(d), round(a, 3)) for a, n, d in fs])
print("batch sizes:", sorted(collections.Counter(n for _, n, _ in launches).items()))
print("longest stalls:", sorted((round(l) for _, l in stalls), reverse=True)[:12], "n", len(stalls))
tg = sorted(((b[0] - a[0]) * 1e3 for a, b in zip(takes, takes[1:]) if b[0] - a[0] < 5), reverse=True)
tg = sorted(((b[0] - a[0]) * 1e3, b[0]) for a, b in zip(takes, takes[1:]) if b[0] - a[0] < 5)[::-1]
print("longest gaps between batches (ms, at):", [(round(x), round(t, 3)) for x, t in tg[:12]], "batches", len(takes))
print("stalls > 50ms (ms, at):", [(round(l), round(a, 3)) for a, l in stalls if l > 50])
for r in rows_out:
    print(*r)
