"""Probe (GPU host): where do N live 1080p30 RTMP streams lose their rate?

Usage: ``python3 live_gpu_submit.py N [PHASES] [SWITCH_INTERVAL]`` with PYTHONPATH at vidpipe's src
and nginx unpacked in /root/ngx (see docs/bench/h100/live-streams/README.md). Phases:
A demux only; B demux + live NVDEC decode, one thread per stream (no pipeline); D B + copy +
preprocess in each thread; L D with one lock around each frame's GPU work; C ``vidpipe.detect``
on the N URLs with a stack sampler (where each thread spends its time) and CPU per thread."""
import collections, os, re, sys, threading, time
import torch, av
from vidpipe.bench.realclip import build_real_clip
from vidpipe.bench.rtmp_server import RtmpServer
from vidpipe.bench.streams import _start_publishers, _stop_publishers

N = int(sys.argv[1]); PHASES = sys.argv[2] if len(sys.argv) > 2 else "ABC"
if len(sys.argv) > 3:
    sys.setswitchinterval(float(sys.argv[3])); print("switch interval", sys.getswitchinterval())
clip = build_real_clip('/root/media', width=1920, height=1080, fps=30, frames=300)
dev = torch.device("cuda")

def rates(counts, secs):
    r = sorted(c / secs for c in counts)
    return f"min {r[0]:.1f} median {r[len(r)//2]:.1f} total {sum(r):.0f}"

def thread_cpu():
    out = {}
    names = {t.native_id: t.name for t in threading.enumerate()}
    for tid in os.listdir("/proc/self/task"):
        try:
            f = open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        name = re.sub(r"\[.*\]|\d+", "", names.get(int(tid), "other"))
        out[(int(tid), name)] = (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    return out

def cpu_by_group(a, b, secs):
    g = collections.Counter()
    for k, v in b.items():
        g[k[1]] += v - a.get(k, 0)
    return ", ".join(f"{k}: {v/secs:.2f}" for k, v in g.most_common(8))

class Sampler:
    def __init__(self, period=0.005):
        self.period = period; self.stop = threading.Event(); self.hits = collections.defaultdict(collections.Counter); self.n = 0
        self.t = threading.Thread(target=self.run, name="sampler", daemon=True)
    def run(self):
        me = threading.get_ident()
        while not self.stop.is_set():
            names = {t.ident: re.sub(r"\[.*\]|\d+", "", t.name) for t in threading.enumerate()}
            for ident, fr in sys._current_frames().items():
                if ident == me: continue
                stack = []
                f = fr
                while f is not None and len(stack) < 3:
                    co = f.f_code
                    if "vidpipe" in co.co_filename or len(stack) == 0:
                        stack.append(f"{os.path.basename(co.co_filename)}:{co.co_name}:{f.f_lineno}")
                    f = f.f_back
                self.hits[names.get(ident, "?")][" < ".join(stack)] += 1
            self.n += 1
            time.sleep(self.period)
    def report(self):
        for g, c in self.hits.items():
            tot = sum(c.values())
            print(f"  [{g}] {tot} samples")
            for k, v in c.most_common(6):
                print(f"     {100*v/tot:5.1f}%  {k}")

with RtmpServer(root="/root/ngx") as srv:
    urls = [srv.url(f"s{i}") for i in range(N)]
    pubs = _start_publishers(clip, urls, 8)
    time.sleep(4)
    try:
        if "A" in PHASES:
            counts = [0] * N; stop = threading.Event()
            def rd(i):
                c = av.open(urls[i], timeout=10)
                s = c.streams.video[0]
                for p in c.demux(s):
                    if p.size: counts[i] += 1
                    if stop.is_set(): break
                c.close()
            ts = [threading.Thread(target=rd, args=(i,), daemon=True) for i in range(N)]
            [t.start() for t in ts]; time.sleep(3); c0 = list(counts); t0 = time.monotonic(); time.sleep(5)
            el = time.monotonic() - t0
            print(f"A demux only x{N}: packets/s per stream {rates([a-b for a,b in zip(counts,c0)], el)}", flush=True)
            stop.set(); [t.join(5) for t in ts]
        if "B" in PHASES:
            from vidpipe.sources.connect import live_target, open_target
            from vidpipe.sources.spec import classify_inputs
            from vidpipe.sources.options import LiveOptions
            from vidpipe.sources.live_decode import open_live_decoder
            from vidpipe.pipeline_config import PipelineConfig
            from vidpipe.decode.probe import read_packets
            counts = [0] * N; feed_t = [0.0] * N; stop = threading.Event()
            def dec(i):
                spec = classify_inputs([urls[i]])[0]
                conn = open_target(live_target(spec), LiveOptions())
                d = open_live_decoder(conn, dev, PipelineConfig(decoder="nvdec"))
                for p in read_packets(conn.container, conn.stream):
                    t = time.perf_counter(); n = len(d.decode(p)); feed_t[i] += time.perf_counter() - t
                    counts[i] += n
                    if stop.is_set(): break
                d.close(); conn.container.close()
            ts = [threading.Thread(target=dec, args=(i,), name=f"dec{i}", daemon=True) for i in range(N)]
            [t.start() for t in ts]; time.sleep(4); c0 = list(counts); f0 = list(feed_t); cpu0 = thread_cpu(); t0 = time.monotonic(); time.sleep(5)
            el = time.monotonic() - t0
            d = [a - b for a, b in zip(counts, c0)]
            ft = sum(a - b for a, b in zip(feed_t, f0)) / max(1, sum(d))
            print(f"B demux+nvdec decode x{N}: frames/s per stream {rates(d, el)}; decode() {1e3*ft:.2f} ms/frame; cpu cores by thread: {cpu_by_group(cpu0, thread_cpu(), el)}", flush=True)
            stop.set(); [t.join(5) for t in ts]
        for ph in ("D", "L"):
            if ph not in PHASES:
                continue
            from vidpipe.sources.connect import live_target, open_target
            from vidpipe.sources.spec import classify_inputs
            from vidpipe.sources.options import LiveOptions
            from vidpipe.sources.live_decode import open_live_decoder
            from vidpipe.ops.preprocess import Preprocessor
            from vidpipe.sources.base import SourceContext
            from vidpipe.sources.drive import stream_scope, ready_event
            from vidpipe.pipeline_config import PipelineConfig
            from vidpipe.decode.probe import read_packets
            from vidpipe.api import build_detector
            from vidpipe.stats import PipelineStats
            from vidpipe.types import FrameMeta
            det = build_detector("yolov3-tiny", device="cuda")
            cfg = PipelineConfig(decoder="nvdec")
            sctx = SourceContext(det, cfg, threading.Event(), PipelineStats(dev))
            glock = threading.Lock() if ph == "L" else None
            counts = [0] * N; stop = threading.Event()
            def dec(i):
                spec = classify_inputs([urls[i]])[0]
                conn = open_target(live_target(spec), LiveOptions())
                d = open_live_decoder(conn, dev, cfg)
                cs, scope = stream_scope(dev)
                to_input = Preprocessor(sctx.detector, sctx.config)
                for p in read_packets(conn.container, conn.stream):
                    with scope:
                        for pts, ref in d.decode(p):
                            meta = FrameMeta("x", i, counts[i], None, 1080, 1920)
                            if glock is not None:
                                with glock:
                                    inp = to_input(d.batch(ref, meta)); ev = ready_event(cs)
                            else:
                                inp = to_input(d.batch(ref, meta)); ev = ready_event(cs)
                            counts[i] += 1
                    if stop.is_set(): break
                d.close(); conn.container.close()
            ts = [threading.Thread(target=dec, args=(i,), name=f"dec{i}", daemon=True) for i in range(N)]
            [t.start() for t in ts]; time.sleep(5); c0 = list(counts); t0 = time.monotonic(); time.sleep(5)
            el = time.monotonic() - t0
            print(f"{ph} demux+nvdec+copy+preprocess per thread{' (one lock)' if glock else ''} x{N}: frames/s per stream {rates([a-b for a,b in zip(counts,c0)], el)}", flush=True)
            stop.set(); [t.join(5) for t in ts]
        if "C" in PHASES:
            import vidpipe
            from vidpipe.sources.options import LiveOptions
            run = vidpipe.detect(urls, batch_size=N, live=LiveOptions(), decoder="nvdec", device="cuda")
            counts = [0] * N; lat = []; smp = Sampler()
            t_start = time.monotonic(); t0 = None
            for r in run:
                now = time.monotonic()
                if t0 is None and now - t_start > 8:
                    t0 = now; st0 = run.status(); cpu0 = thread_cpu(); smp.t.start()
                if t0 is not None:
                    counts[r.meta.stream_id] += 1
                    if r.meta.captured_mono: lat.append(now - r.meta.captured_mono)
                    if now - t0 > 8: break
            el = time.monotonic() - t0; cpu1 = thread_cpu(); st1 = run.status(); smp.stop.set()
            stats = run.get_stats(); run.close()
            lat.sort()
            drops = sum(a["drops"] - b["drops"] for a, b in zip(st1["streams"], st0["streams"]))
            fin = sum(a["frames_in"] - b["frames_in"] for a, b in zip(st1["streams"], st0["streams"]))
            print(f"C detect x{N}: results/s per stream {rates(counts, el)}; frames_in/s {fin/el:.0f}; drops {drops}; "
                  f"p50 {1e3*lat[len(lat)//2]:.0f} p99 {1e3*lat[int(len(lat)*.99)]:.0f} ms", flush=True)
            print("   cpu cores by thread:", cpu_by_group(cpu0, cpu1, el))
            print("   stages ms/frame:", {k: v for k, v in stats.items() if "ms" in k and not isinstance(v, dict)})
            print("   stages:", stats.get("stages") or stats.get("stage_ms"))
            smp.report()
    finally:
        _stop_publishers(pubs)
