"""Probe (GPU host): how fast the live decoders decode one 1080p stream, in 1 and 8 threads, and
how much a pure-Python loop beside them slows down (is the GIL saturated?). Decode only: no copy,
no model. Writes the clip to /root/media; run with PYTHONPATH pointing at vidpipe's src.
Result on an H100: docs/bench/h100/live-streams/README.md."""
import threading, time, torch
from vidpipe.bench.realclip import build_real_clip
from vidpipe.sources.connect import live_target, open_target
from vidpipe.sources.spec import SourceSpec
from vidpipe.sources.options import LiveOptions
from vidpipe.sources.live_decode import open_live_decoder
from vidpipe.pipeline_config import PipelineConfig
from vidpipe.decode.probe import read_packets
clip = build_real_clip('/root/media', frames=300)
dev = torch.device('cuda')
def spin(stop, out):
    n = 0
    while not stop.is_set():
        n += 1
    out.append(n)
def count_spin(seconds):
    stop = threading.Event(); out = []
    t = threading.Thread(target=spin, args=(stop, out)); t.start(); time.sleep(seconds); stop.set(); t.join(); return out[0] / seconds
print(f"python loop alone: {count_spin(2)/1e6:.1f} M/s")
for decoder in ("nvdec", "pyav"):
    for threads in (1, 8):
        def work(stop, frames):
            conn = open_target(live_target(SourceSpec("file", str(clip))), LiveOptions())
            dec = open_live_decoder(conn, dev, PipelineConfig(decoder=decoder))
            while not stop.is_set():
                for p in read_packets(conn.container, conn.stream):
                    frames.append(len(dec.decode(p)))
                    if stop.is_set(): break
                conn.container.seek(0)
        stop = threading.Event(); frames = []
        ws = [threading.Thread(target=work, args=(stop, frames)) for _ in range(threads)]
        [w.start() for w in ws]; time.sleep(1.5)
        n0 = sum(frames); t0 = time.monotonic()
        rate = count_spin(3)
        fps = (sum(frames) - n0) / (time.monotonic() - t0)
        stop.set(); [w.join() for w in ws]
        print(f"{decoder} x{threads} threads: decode {fps:.0f} frames/s; python loop beside it {rate/1e6:.1f} M/s; name {getattr(open_live_decoder, '__name__', '')}")
