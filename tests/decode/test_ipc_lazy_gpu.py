"""A decoder process maps a ring slot (the parent's CUDA allocation, by its IPC handle) when it is
first used, not when the ring arrives, and once, whichever of its threads comes first; what it
writes lands in the parent's memory. Real driver allocations and a real second process. Skipped
without CUDA."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

pytestmark = pytest.mark.gpu

CHILD = r"""
import json, sys, threading
from vidpipe.decode.ipc_memory import Mappings, MappedSlot
from vidpipe.decode import cuda_driver
cuda_driver.use_primary_context(0)
spec = json.loads(sys.stdin.read())
mappings = Mappings()
slots = [MappedSlot(mappings, 0, bytes.fromhex(h), tuple(spec["shape"]), "|u1", ring=1) for h in spec["handles"]]
out = {"open_after_ring": len(mappings._open)}
rows = []
def take(i):
    rows.append(slots[0][i % spec["shape"][0]])
threads = [threading.Thread(target=take, args=(i,)) for i in range(16)]
for t in threads: t.start()
for t in threads: t.join()
out["open_after_first_use"] = len(mappings._open)
out["count_of_slot0"] = mappings._open[bytes.fromhex(spec["handles"][0])][1]
import torch  # only to write a row here (a decoder process writes with a driver copy)
from vidpipe.decode.ipc_memory import as_torch
as_torch(slots[0][1]).fill_(7)
as_torch(slots[2][0]).fill_(9)
torch.cuda.synchronize()
out["open_at_end"] = len(mappings._open)
print(json.dumps(out))
"""


def test_a_child_maps_each_slot_at_its_first_use_and_once():
    from vidpipe.decode.ipc_memory import ExportedBuffers

    shape = (2, 4, 8)  # a slot of 2 rows
    exported = ExportedBuffers(0, 2 * 4 * 8)
    made: list = []
    try:
        made.extend(exported.new(shape, torch.uint8) for _ in range(3))
        for t, _ in made:
            t.zero_()
        torch.cuda.synchronize()
        spec = {"shape": shape, "handles": [h.hex() for _, h in made]}
        run = subprocess.run([sys.executable, "-c", CHILD], input=json.dumps(spec), capture_output=True, text=True,
                             timeout=120)  # fmt: skip
        assert run.returncode == 0, run.stderr[-2000:]
        got = json.loads(run.stdout.strip().splitlines()[-1])
        assert got["open_after_ring"] == 0, "the ring's slots were mapped when they came"
        assert got["open_after_first_use"] == 1 and got["count_of_slot0"] == 1, got  # 16 threads, one mapping
        assert got["open_at_end"] == 2, got  # slot 1 never used: never mapped
        torch.cuda.synchronize()
        assert (made[0][0][1] == 7).all() and (made[0][0][0] == 0).all()
        assert (made[2][0][0] == 9).all() and (made[1][0] == 0).all()
    finally:
        made.clear()
        exported.close()
