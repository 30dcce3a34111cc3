"""Probe (GPU host): who makes the caching allocator's segments during repeated runs (issue 15's
soak saw one new 166 MiB segment on a run's CUDA stream after ~2,000 runs). Records PyTorch's memory
history, runs vidpipe.detect on INPUTS again and again for SECONDS, and prints every segment
allocation (size, stream, the vidpipe frames of its stack) of the first two runs and of any later
run that added one. Usage: python3 segment_growth.py SECONDS INPUT [INPUT ...]."""
import sys
import time

import torch

import vidpipe
from vidpipe.api import build_detector


def segment_allocs(snap):
    for trace in snap.get("device_traces", []):
        for ev in trace:
            if ev.get("action") == "segment_alloc":
                frames = [f"{f['filename'].split('/vidpipe/')[-1]}:{f['line']}:{f['name']}" for f in ev.get("frames", [])
                          if "/vidpipe/" in f.get("filename", "")]
                yield ev["size"] / 2**20, ev.get("stream"), frames[:6]


seconds, inputs = float(sys.argv[1]), sys.argv[2:]
torch.cuda.memory._record_memory_history(max_entries=400000, context="alloc", stacks="python")
det = build_detector("yolov3-tiny", device="cuda")
end, runs, segs = time.time() + seconds, 0, 0
while time.time() < end:
    with vidpipe.detect(inputs, model=det, batch_size=32) as r:
        n = sum(1 for _ in r)
    runs += 1
    now = torch.cuda.memory_stats()["segment.all.current"]
    if runs <= 2 or now > segs:
        print(f"run {runs}: {n} frames, segments {segs} -> {now}, reserved {torch.cuda.memory_reserved() / 2**20:.0f} MiB", flush=True)
        seen = set()
        for size, stream, frames in segment_allocs(torch.cuda.memory._snapshot()):
            key = (round(size), stream, tuple(frames))
            if key not in seen:
                seen.add(key)
                print(f"   {size:8.1f} MiB stream {stream}: {' <- '.join(frames) or '(no vidpipe frame)'}", flush=True)
        torch.cuda.memory._record_memory_history(enabled=None)  # clear the trace: the next dump shows new ones only
        torch.cuda.memory._record_memory_history(max_entries=400000, context="alloc", stacks="python")
    segs = now
print(f"{runs} runs, {segs} segments, reserved {torch.cuda.memory_reserved() / 2**20:.0f} MiB")
