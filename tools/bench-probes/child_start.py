"""How soon N decoder-process-like children are ready beside a parent that imports PyTorch and
starts CUDA (as ``vidpipe detect`` does while its decoder processes start), and how much they
slow that parent.

    python3 tools/bench-probes/child_start.py [N] [ROUNDS] [MODES] [CLIP]

Modes (comma-separated, default ``spawn,fork,alone``), one run each per round:

- ``spawn``: each child its own interpreter, as the pool starts them: its NVDEC sessions for
  CLIP (if given: probe, then 3 pooled sessions without PyTorch, :mod:`vidpipe.decode.nvdec_early`),
  then PyTorch and CUDA through it;
- ``light``: the same child without PyTorch (PyNvVideoCodec, the primary context, the sessions);
- ``fork``: one interpreter imports PyTorch once and forks the children (a zygote);
- ``alone``: one child interpreter with nothing beside it;
- ``parent``: the parent with nothing beside it.

Prints one JSON line per run: mode, the parent's and each child's ready time (s from the start).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

SESSIONS = (
    "import sys; clip = sys.argv[1] if len(sys.argv) > 1 else ''\n"
    "import PyNvVideoCodec\n"
    "from vidpipe.decode.cuda_driver import use_primary_context\n"
    "from vidpipe.decode.nvdec_early import pool_sessions\n"
    "use_primary_context(0)\n"
    "if clip:\n"
    "    from vidpipe.decode.probe import probe\n"
    "    pool_sessions(probe(clip), 0, 3)\n"
)
READY = "import time; t=time.time()\n" + SESSIONS + \
        "import torch.multiprocessing, torch; torch.zeros(1, device='cuda'); print(time.time(), flush=True)"  # fmt: skip
LIGHT = "import time; t=time.time()\n" + SESSIONS + "print(time.time(), flush=True)"
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


def run(mode: str, n: int, clip: str) -> dict:
    t0 = time.time()
    procs = []
    if mode in ("spawn", "fork", "light", "parent"):
        procs.append(subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True))
    if mode in ("spawn", "light"):
        code = READY if mode == "spawn" else LIGHT
        procs += [subprocess.Popen([sys.executable, "-c", code, clip], stdout=subprocess.PIPE, text=True)
                  for _ in range(n)]  # fmt: skip
    elif mode == "fork":
        procs.append(subprocess.Popen([sys.executable, "-c", ZYGOTE, str(n)], stdout=subprocess.PIPE, text=True))
    elif mode == "alone":
        procs.append(subprocess.Popen([sys.executable, "-c", READY, clip], stdout=subprocess.PIPE, text=True))
    outs = [p.communicate()[0].split() for p in procs]
    times = [round(float(x) - t0, 3) for out in outs for x in out]
    with_parent = mode != "alone"
    parent = times[0] if with_parent else None
    children = sorted(times[1:] if with_parent else times)
    return {"mode": mode, "n": n, "parent": parent, "children": children,
            "last_child": children[-1] if children else None}  # fmt: skip


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    modes = sys.argv[3].split(",") if len(sys.argv) > 3 else ["spawn", "fork", "alone"]
    clip = sys.argv[4] if len(sys.argv) > 4 else ""
    for _ in range(rounds):
        for mode in modes:
            print(json.dumps(run(mode, n, clip)), flush=True)


if __name__ == "__main__":
    main()
