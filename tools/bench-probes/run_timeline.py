"""The time line of one fresh ``vidpipe detect`` run (or of warm ``vidpipe.detect`` calls in one
process): when the decoder processes are ready, the CUDA graph's capture, the run's clock, the
file's probe/scan/plan, and curves of frames received from the decoder processes (``put``),
batches delivered in order (``yield``) and model launches (``launch``). Diagnosis only: it wraps
functions of vidpipe (none of them imports PyTorch), runs the command in this process and writes
one JSON file; ``--summarize`` prints one line per such file, times from the run's clock.

    python3 tools/bench-probes/run_timeline.py OUT.json cmd CLIP --device cuda --progress off -o T.csv
    python3 tools/bench-probes/run_timeline.py OUT.json warm CLIP
    python3 tools/bench-probes/run_timeline.py --summarize OUT1.json OUT2.json ...

Used for ``docs/bench/h200/capture-prepare``.
"""
import sys, time, threading, functools, os, json, atexit

def summarize(paths):
    """One line per trace: seconds from the run's clock to each mark."""
    for p in paths:
        d = json.load(open(p))
        ev = {}
        for e in d["events"]:
            ev.setdefault(e[0], e)
        clock = ev["run clock starts"][2]
        put, launch = d["curves"]["put"], d["curves"]["launch"]
        pool = ev.get("pool.__init__ (children ready)")
        done = [e for e in d["events"] if e[0].startswith("run_processes end")]
        print(f"{p}: processes ready {pool[3] - clock:+.3f}" if pool else f"{p}: no processes", end="")
        print(f"  capture {ev['Inference._accelerated (CUDA graph)'][3] - ev['Inference._accelerated (CUDA graph)'][2]:.3f}"
              f"  decode starts {done[0][2] - clock:.3f}" if done else "", end="")
        print(f"  first frame {put[0][0] - clock:.3f}  last frame {put[-1][0] - clock:.3f}"
              f"  launches {launch[0][0] - clock:.3f}..{launch[-1][0] - clock:.3f}"
              f"  warm-up ends {ev['Inference.warm_up'][3] - clock:.3f}  run ends {ev['DetectionRun.close'][2] - clock:.3f}")


if __name__ == "__main__" and sys.argv[1:2] == ["--summarize"]:
    summarize(sys.argv[2:])
    sys.exit(0)
T0 = time.perf_counter()
with open("/proc/self/stat") as f:
    start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
with open("/proc/uptime") as f:
    up = float(f.read().split()[0])
AGE = up - start_ticks / os.sysconf("SC_CLK_TCK")  # seconds since this process started, at T0
EV, CURVES = [], {"put": [], "launch": [], "yield": []}
def now(): return time.perf_counter() - T0 + AGE
def rec(label, a, b=None):
    EV.append((label, threading.current_thread().name, round(a, 4), round(b if b is not None else now(), 4)))
def wrap(owner, name, label=None, every=True):
    f = getattr(owner, name); lab = label or f"{owner.__name__}.{name}"; seen = set()
    @functools.wraps(f)
    def w(*a, **k):
        t = now()
        try: return f(*a, **k)
        finally:
            key = threading.current_thread().name
            if every or key not in seen:
                seen.add(key); rec(lab, t)
    setattr(owner, name, w)
import vidpipe.decode.procpool as PP, vidpipe.pipeline_infer as PI, vidpipe.pipeline as PL
import vidpipe.decode.reorder as RO, vidpipe.decode.procrun as PR, vidpipe.decode.prestart as PS
import vidpipe.cli.detect as CD
wrap(PP.DecoderProcessPool, "__init__", "pool.__init__ (children ready)")
wrap(PP.DecoderProcessPool, "_hello", "pool._hello")
wrap(PI.Inference, "warm_up", "Inference.warm_up")
wrap(PI.Inference, "_accelerated", "Inference._accelerated (CUDA graph)")
wrap(PI, "_warm_preprocessing", "_warm_preprocessing (NV12 kernels)")
wrap(PL.DetectionRun, "_start_clock", "run clock starts")
wrap(PL.DetectionRun, "close", "DetectionRun.close")
wrap(PS, "start_processes_now", "prestart.start_processes_now")
import vidpipe.decode.probe as PB, vidpipe.decode.segments as SG, vidpipe.decode.registry as RG, vidpipe.decode.parallel as PAR
import vidpipe.sources.file as SF, vidpipe.pipeline_workers as PW
wrap(PB, "probe", "probe")
wrap(SG, "scan_stream", "scan_stream"); PAR.scan_stream = SG.scan_stream
wrap(RG, "open_decoder", "open_decoder"); wrap(RG, "select_backend", "select_backend")
wrap(PAR.SegmentParallelDecoder, "_make_plan", "_make_plan")
if hasattr(SF.FileSource, "prepare"): wrap(SF.FileSource, "prepare", "FileSource.prepare")
if hasattr(PW.SourceWorker, "_ready_for_gpu"): wrap(PW.SourceWorker, "_ready_for_gpu", "worker._ready_for_gpu")
MODS = {}
_clock = PL.DetectionRun._start_clock
def start_clock(self):
    MODS["at_clock"] = set(sys.modules); return _clock(self)
PL.DetectionRun._start_clock = start_clock
wrap(RO.ReorderBuffer, "__init__", "reorder buffer made")
_put = RO.ReorderBuffer.put_many
def put_many(self, items):
    CURVES["put"].append((round(now(), 4), len(items))); return _put(self, items)
RO.ReorderBuffer.put_many = put_many
_launch = PI.Inference.launch
def launch(self, chunks, torch):
    CURVES["launch"].append((round(now(), 4), sum((len(c.inp.frames) if hasattr(c.inp, "frames") else 1) for c in chunks)))
    return _launch(self, chunks, torch)
PI.Inference.launch = launch
_rp = PR.run_processes
def run_processes(*a, **k):
    t = now(); first = True; n = 0
    MODS["new_by_run_processes"] = sorted(set(sys.modules) - MODS.get("at_clock", set(sys.modules)))
    for b in _rp(*a, **k):
        n += len(b)
        CURVES["yield"].append((round(now(), 4), len(b)))
        if first:
            rec("run_processes first batch", t); first = False
            MODS["new_by_first_batch"] = sorted(set(sys.modules) - MODS.get("at_clock", set(sys.modules)))
        yield b
    rec(f"run_processes end ({n} frames)", t)
PR.run_processes = run_processes
out, mode, clip, *rest = sys.argv[1:]
def dump():
    rec("exit handlers (ours last)", now())
    json.dump({"mode": mode, "age_at_T0": AGE, "events": sorted(EV, key=lambda e: e[2]), "curves": CURVES, "mods": {k: v for k, v in MODS.items() if k != "at_clock"}},
              open(out, "w"))
atexit.register(dump)
if mode == "cmd":
    from vidpipe.cli import main
    rc = main(["detect", clip, *rest])
    rec("cli main returned", now())
    sys.exit(rc)
import torch, vidpipe
from vidpipe.api import build_detector
det = build_detector("yolov3-tiny", device="cuda")
for i in range(4):
    EV.clear(); [c.clear() for c in CURVES.values()]
    t = now()
    run = vidpipe.detect(clip, model=det, decoder="nvdec", results_on_host=True)
    n = sum(1 for _ in run); run.close(); s = run.summary()
    rec(f"warm call {i}: {n} frames, run {s.seconds:.3f} s, {n / s.seconds:.0f} fps", t)
    print(f"warm call {i}: {n} frames, run {s.seconds:.3f} s, {n / s.seconds:.0f} fps", flush=True)
