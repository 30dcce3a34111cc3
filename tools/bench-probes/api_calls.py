"""Probe helper: a script's four ``vidpipe.detect`` calls on one file in one process, each call's
wall, run and rate, and the four together (``docs/bench/h200/command-processes``). GPU host.

    python3 tools/bench-probes/api_calls.py CLIP threads|service|block|blockw

``threads``: the defaults (a short file decodes with NVDEC sessions in threads); ``service``:
``warm_sessions(CLIP, processes=4)`` first; ``block`` / ``blockw``: the calls inside
``vidpipe.decoder_service()`` / ``vidpipe.decoder_service(warm_for=CLIP)``."""
import sys, time
t0 = time.perf_counter()
import torch  # noqa: F401
import vidpipe
clip, mode = sys.argv[1], sys.argv[2]
print(f"{mode}: import {time.perf_counter() - t0:.2f} s", flush=True)
if mode == "service":
    from vidpipe.decode.nvdec import warm_sessions
    t = time.perf_counter()
    warm_sessions(clip, "cuda", processes=4)
    print(f"  warm_sessions(processes=4) {time.perf_counter() - t:.2f} s", flush=True)
import contextlib
block = contextlib.nullcontext()
if mode in ("block", "blockw"):
    block = vidpipe.decoder_service(warm_for=clip if mode == "blockw" else None)
t_all = time.perf_counter()
with block:
  for i in range(4):
    t = time.perf_counter()
    run = vidpipe.detect(clip, device="cuda", results_on_host=True)
    n = sum(len(b) for b in run.batches())
    run.close()
    s = run.summary()
    src = s.sources[0] if hasattr(s, "sources") else None
    extra = getattr(src, "extra", {}) if src is not None else {}
    print(f"  call {i}: wall {time.perf_counter() - t:.2f} s, run {s.seconds:.2f} s, {n / s.seconds:.0f} fps, "
          f"frames {n}, dets {s.detections}, processes {extra.get('decoder_processes', 0)}", flush=True)
print(f"  four calls {time.perf_counter() - t_all:.2f} s (block closed)", flush=True)
