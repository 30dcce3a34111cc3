"""Probe (GPU host, not run yet): are the last drops and latency tails of `bench streams` at 64 streams Python GC pauses? Times every collection (gc.callbacks) during one 64-stream step and prints the longest per generation beside the step's drops and max latency. Usage: python3 gc_pauses.py [NGINX_ROOT]."""
import gc, sys, time
pauses = []
t = {}
def cb(phase, info):
    if phase == "start":
        t["s"] = time.perf_counter()
    else:
        pauses.append((info["generation"], (time.perf_counter() - t.get("s", time.perf_counter())) * 1e3, time.monotonic()))
gc.callbacks.append(cb)
from vidpipe.bench.streams import run_streams_bench
t0 = time.monotonic()
res = run_streams_bench(streams=[64], seconds=10, warmup=6, device="cuda", decoder="nvdec", nginx_root=sys.argv[1] if len(sys.argv) > 1 else None, work_dir="/root/media")
row = res.rows[0]
print({k: row.get(k) for k in ("streams", "fps_total", "fps_min", "p50_ms", "p99_ms", "max_ms", "drops", "drop_causes")})
late = [p for p in pauses if p[2] > t0 + 20]
for g in (0, 1, 2):
    d = sorted((p[1] for p in late if p[0] == g), reverse=True)
    print(f"gen{g}: {len(d)} collections after start+20s, max {d[0] if d else 0:.1f} ms, top5 {[round(x,1) for x in d[:5]]}, total {sum(d):.0f} ms")
