"""Device memory after each of 8 decodes of a short clip in 2 decoder processes (the parent's
PyTorch cache emptied each time), and each process's GPU memory from ``nvidia-smi``: does a run
leave memory behind, and what does a decoder process hold? Used for
``docs/bench/h200/torch-free-children``.

    python3 tools/bench-probes/ring_memory.py keep|clone

``keep``: each batch is kept until the run ends (every ring slot renewed); ``clone``: copied out.
"""
import sys, subprocess, gc, os
sys.path.insert(0, "tests")
import torch
from media import make_video
from vidpipe.decode.base import DecodeOptions
from vidpipe.decode.nvdec import NvdecDecoder
from vidpipe.decode.procpool import get_pool, close_pools

path = make_video("/tmp/ring_memory.mp4", frames=60, gop=10, width=320, height=192).path
keep = sys.argv[1] == "keep"

def smi():
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True).stdout
    return {int(a): int(b) for a, b in (l.split(",") for l in out.strip().splitlines() if l.strip())}

for i in range(8):
    dec = NvdecDecoder(path, device="cuda", workers=4, segment_frames=10, options=DecodeOptions(), processes=2)
    out = []
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for b in dec.batches(8):
            out.append((b, b.data.clone()) if keep else b.data.clone())
    s.synchronize()
    del dec, out
    gc.collect(); torch.cuda.synchronize(); torch.cuda.empty_cache()
    pool = get_pool("cuda:0", None, start=False)
    m = smi()
    kids = [m.get(p.pid) for p in pool.procs]
    print(i, "free MiB", torch.cuda.mem_get_info()[0] >> 20, "parent", m.get(os.getpid()), "children", kids,
          "rings", len(pool._rings), flush=True)
close_pools()
gc.collect(); torch.cuda.empty_cache()
print("closed: free MiB", torch.cuda.mem_get_info()[0] >> 20, "parent", smi().get(os.getpid()))
