"""Probe (GPU host): what mapping a decoder-process ring costs a child, by how the ring's bytes are
split into CUDA allocations. The parent allocates TOTAL_GIB in K allocations (each with its IPC
handle), a fresh child process opens every handle (``cuIpcOpenMemHandle``) and reports the time;
one child per split, after a first child that only starts its context. Diagnosis only.

    python3 tools/bench-probes/ipc_map_cost.py [TOTAL_GIB] [K1,K2,...]
"""
import json
import subprocess
import sys
import time

from vidpipe.decode import cuda_driver as cd

CHILD = r"""
import json, sys, time
from vidpipe.decode import cuda_driver as cd
cd.use_primary_context(0)
handles = [bytes.fromhex(h) for h in json.loads(sys.stdin.read())]
t = time.perf_counter(); ptrs = [cd.ipc_open(0, h) for h in handles]; opened = time.perf_counter() - t
t = time.perf_counter()
for p in ptrs: cd.ipc_close(0, p)
print(json.dumps({"open_s": opened, "close_s": time.perf_counter() - t}))
"""


def child(handles):
    out = subprocess.run([sys.executable, "-c", CHILD], input=json.dumps([h.hex() for h in handles]),
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main():
    total = float(sys.argv[1]) if len(sys.argv) > 1 else 4.4
    splits = [int(k) for k in (sys.argv[2] if len(sys.argv) > 2 else "44,11,4,1").split(",")]
    cd.use_primary_context(0)
    child([])  # a first child: the driver's own start
    for k in splits * 2:
        size = int(total * (1 << 30) / k)
        t = time.perf_counter()
        ptrs = [cd.alloc(0, size) for _ in range(k)]
        handles = [cd.ipc_handle(0, p) for p in ptrs]
        made = time.perf_counter() - t
        got = child(handles)
        for p in ptrs:
            cd.free(0, p)
        print(f"{k:3d} allocations of {size / 2**20:8.0f} MiB: parent alloc+handles {made * 1e3:6.1f} ms, "
              f"child opens {got['open_s'] * 1e3:6.1f} ms ({got['open_s'] * 1e3 / k:.2f} ms each), "
              f"closes {got['close_s'] * 1e3:6.1f} ms", flush=True)


if __name__ == "__main__":
    main()
