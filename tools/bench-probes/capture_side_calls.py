"""Whether NVDEC driver work in another thread breaks the model's CUDA graph capture: captures
``yolov3-tiny`` (``accelerate(..., "cudagraph")``) while a side thread does nothing, asks
``GetDecoderCaps`` again and again, starts NVDEC sessions (``pool_sessions``) again and again, or
computes Triton's cache key; prints whether each capture held or fell back to eager. Diagnosis
only (``docs/bench/h200/capture-prepare``; since then the turns of ``vidpipe._capture_turns``
keep the first two out of a capture).

    python3 tools/bench-probes/capture_side_calls.py CLIP
"""
import sys, threading, time, logging
logging.basicConfig(level=logging.WARNING, format="%(threadName)s %(name)s: %(message)s")
import torch
from vidpipe.api import build_detector
from vidpipe.models.backends.accel import accelerate
from vidpipe.decode.nvdec_caps import nvdec_module
from vidpipe.decode.probe import probe
clip = sys.argv[1]
det = build_detector("yolov3-tiny", device="cuda")
nvc = nvdec_module()
info = probe(clip)

def caps_loop(stop):
    n = 0
    while not stop.is_set():
        nvc.GetDecoderCaps(gpuid=0, codec=nvc.cudaVideoCodec.H264, chromaformat=nvc.cudaVideoChromaFormat.__members__["420"], bitdepth=8)
        n += 1
    return n

def session_loop(stop):
    from vidpipe.decode.nvdec_early import pool_sessions
    while not stop.is_set():
        pool_sessions(info, 0, 1)

def triton_key(stop):
    from vidpipe.ops import triton_kernels
    triton_kernels.prepare_cache_key()

for name, fn in (("none", None), ("caps", caps_loop), ("sessions", session_loop), ("triton_key", triton_key)):
    stop = threading.Event()
    th = threading.Thread(target=fn, args=(stop,), daemon=True) if fn else None
    if th: th.start(); time.sleep(0.05)
    t = time.perf_counter()
    m = accelerate(det.model, "cudagraph", batch_size=32)
    dt = time.perf_counter() - t
    stop.set()
    if th: th.join(10)
    print(f"side work {name}: {'CAPTURED' if m is not det.model else 'FELL BACK (eager)'} in {dt:.2f} s", flush=True)
    torch.cuda.synchronize()
