"""Poor man's py-spy for `bench streams`: every thread's Python stack sampled every 4 ms during
one step's measured window, counted per kind of thread (the model's, the receivers of the decoder
processes, the streams' waiting threads). GPU host. Usage: python3 thread_samples.py [STREAMS]."""
import sys, time, threading, collections, os
counts = collections.defaultdict(collections.Counter)  # thread kind -> stack key -> n
tops = collections.defaultdict(collections.Counter)
nsamp = collections.Counter()
active = [False]
def kind(name, frame):
    f = frame; files = []
    while f is not None:
        files.append(f.f_code.co_name); f = f.f_back
    if "_consume" in files or "_measure" in files: return "model"
    if "_receive" in files: return "receiver"
    if "deliver" in files or "_produce" in files: return "stream"
    return name.split("-")[0]
def sampler():
    me = threading.get_ident()
    names = {}
    while True:
        time.sleep(0.004)
        if not active[0]: continue
        names = {t.ident: t.name for t in threading.enumerate()}
        for ident, frame in sys._current_frames().items():
            if ident == me: continue
            k = kind(names.get(ident, "?"), frame)
            nsamp[k] += 1
            stack = []
            f = frame
            while f is not None and len(stack) < 7:
                stack.append(f"{os.path.basename(f.f_code.co_filename)}:{f.f_lineno}:{f.f_code.co_name}")
                f = f.f_back
            tops[k][stack[0]] += 1
            counts[k][" < ".join(stack[:4])] += 1
threading.Thread(target=sampler, daemon=True).start()
import vidpipe.bench.streams as bs
_measure = bs._measure
def measure(*a, **k):
    threading.Timer(12.0, lambda: active.__setitem__(0, True)).start()
    try:
        return _measure(*a, **k)
    finally:
        active[0] = False
bs._measure = measure
n = int(sys.argv[1]) if len(sys.argv) > 1 else 64
res = bs.run_streams_bench(streams=[n], seconds=10, warmup=6, device="cuda", decoder="nvdec", nginx_root="/root/ngx", work_dir="/root/media")
r = res.rows[0]
print({k: r.get(k) for k in ("streams", "fps_total", "p50_ms", "p99_ms", "drops", "drop_causes", "cpu_cores", "gpu_util")})
for k in ("model", "receiver", "stream"):
    print(f"\n=== {k}: {nsamp[k]} samples")
    for s, c in tops[k].most_common(25):
        print(f"{c:6d} {100*c/max(1,nsamp[k]):5.1f}% {s}")
    print("--- stacks")
    for s, c in counts[k].most_common(20):
        print(f"{c:6d} {100*c/max(1,nsamp[k]):5.1f}% {s}")
print("other kinds:", {k: v for k, v in nsamp.items() if k not in ("model", "receiver", "stream")})
