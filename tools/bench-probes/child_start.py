"""How soon N decoder-process-like children are ready (PyTorch imported, CUDA up) beside a parent
that imports PyTorch too, when each child is its own interpreter (``spawn``, as the pool starts
them) or forked from one that imported PyTorch once (``fork``: a zygote; CUDA starts after the
fork). ``alone``: one interpreter, nothing beside it.

    python3 tools/bench-probes/child_start.py [N] [ROUNDS]

Prints one JSON line per run: mode, the parent's and each child's ready time (s from the start).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

READY = "import time; t=time.time(); import torch.multiprocessing, torch; import PyNvVideoCodec; " \
        "torch.zeros(1, device='cuda'); print(time.time(), flush=True)"  # fmt: skip
PARENT = "import time; import torch; torch.zeros(1, device='cuda'); print(time.time(), flush=True)"
ZYGOTE = """
import os, sys, time
import torch.multiprocessing, torch
import PyNvVideoCodec
n = int(sys.argv[1])
for _ in range(n):
    if os.fork() == 0:
        torch.zeros(1, device="cuda")
        print(time.time(), flush=True)
        os._exit(0)
for _ in range(n):
    os.wait()
"""


def run(mode: str, n: int) -> dict:
    t0 = time.time()
    procs = []
    if mode != "alone":
        procs.append(subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True))
    if mode == "spawn":
        procs += [subprocess.Popen([sys.executable, "-c", READY], stdout=subprocess.PIPE, text=True) for _ in range(n)]
    elif mode == "fork":
        procs.append(subprocess.Popen([sys.executable, "-c", ZYGOTE, str(n)], stdout=subprocess.PIPE, text=True))
    else:
        procs.append(subprocess.Popen([sys.executable, "-c", READY], stdout=subprocess.PIPE, text=True))
    outs = [p.communicate()[0].split() for p in procs]
    times = [round(float(x) - t0, 3) for out in outs for x in out]
    parent = times[0] if mode != "alone" else None
    children = sorted(times[1:] if mode != "alone" else times)
    return {"mode": mode, "n": n, "parent": parent, "children": children, "last_child": children[-1]}


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    for _ in range(rounds):
        for mode in ("spawn", "fork", "alone"):
            print(json.dumps(run(mode, n)), flush=True)


if __name__ == "__main__":
    main()
