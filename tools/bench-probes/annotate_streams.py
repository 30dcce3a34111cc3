"""Probe (GPU host): 16 (N=...) realtime 1080p30 streams through vidpipe.detect, without and with an
AnnotateStage (encoder in a thread or a child process, x264 preset). Usage:
    N=16 python3 annotate_streams.py "TAG:realtime=True,annotate={'preset':'ultrafast'},enc='process'" ...
Each argument is TAG:keyword arguments of run() below. Behind docs/bench/h100/annotate."""
import sys, time, json, os, shutil
import vidpipe
from vidpipe.sources.options import LiveOptions
from vidpipe.stages.annotate import AnnotateStage
from vidpipe.draw import Annotator
from vidpipe.bench.realclip import build_real_clip
clip = str(build_real_clip('/root/media', frames=450))
N = int(os.environ.get("N", 16))
def run(tag, *, realtime=True, keep=False, annotate=None, processes=None, enc='auto'):
    out = f"/root/p16/{tag}"; shutil.rmtree(out, ignore_errors=True); os.makedirs(out)
    stages = []
    if annotate:
        stages = [AnnotateStage(lambda m: f"{out}/s{m.stream_id}.mp4", render=Annotator(), options=annotate, encoder=enc)]
    t = time.perf_counter()
    r = vidpipe.detect([clip] * N, device="cuda", stages=stages, keep_frames=keep,
                       live=LiveOptions(realtime=realtime, processes=processes))
    n = sum(1 for _ in r)
    s = r.summary(); st = s.stats
    drops = sum(x.extra.get("drops", 0) for x in s.sources)
    fin = sum(x.extra.get("frames_in", x.frames) for x in s.sources)
    per = [x.frames for x in s.sources]
    ann = (s.stages.get("annotate") or {}).get("streams", {})
    enc = [v.get("encode_ms_per_frame") for v in ann.values()]
    print(f"{tag:28s} wall {time.perf_counter()-t:5.1f}s frames {n} ({n/s.seconds:.0f} fps, min/stream {min(per)}) in {fin} drops {drops} "
          f"lat {st.get('latency_ms')} cpu {st.get('cpu_percent', 0):.0f}% ms/frame {({k: round(v,2) for k,v in st.get('stages_ms_per_frame',{}).items()})} "
          f"live_procs {getattr(r, 'live_processes', None)} enc {enc[:2]}", flush=True)
for spec in sys.argv[1:]:
    tag, kw = spec.split(":", 1)
    run(tag, **eval(f"dict({kw})"))
