"""Per-batch scratch from the default stream's cache (vidpipe.ops.scratch): whatever the current
stream, the block comes from the default stream's pool, and another stream gets it again once the
first one's work on it is done."""

from __future__ import annotations

import pytest
import torch

from vidpipe.ops import scratch


def test_on_the_cpu_it_is_torch_empty():
    t = scratch.empty((2, 3), dtype=torch.float32, device=torch.device("cpu"))
    assert t.shape == (2, 3) and t.dtype == torch.float32 and t.device.type == "cpu"


@pytest.mark.gpu
def test_every_stream_gets_its_blocks_from_the_default_stream():
    dev = torch.device("cuda")
    side = torch.cuda.Stream(dev)
    size = 40 << 20  # a segment of its own: its stream is the block's
    with torch.cuda.stream(side):
        t = scratch.empty((size,), dtype=torch.uint8, device=dev)
        t.fill_(7)
    address = t.data_ptr()
    streams = {seg["stream"] for seg in torch.cuda.memory_snapshot()
               if seg["address"] <= address < seg["address"] + seg["total_size"]}  # fmt: skip
    assert streams == {0}  # the default stream's pool, not the side stream's
    del t
    torch.cuda.synchronize()
    with torch.cuda.stream(torch.cuda.Stream(dev)):  # another run's stream reuses the same block
        again = scratch.empty((size,), dtype=torch.uint8, device=dev)
    assert again.data_ptr() == address
