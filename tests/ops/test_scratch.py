"""The letterbox's work buffer (vidpipe.ops.scratch.ScratchArena): one buffer whatever the timing,
lent to one caller at a time, each borrower's kernels after the previous one's."""

from __future__ import annotations

import threading

import pytest
import torch

from vidpipe.ops.scratch import ScratchArena


def test_on_the_cpu_each_borrow_is_a_fresh_tensor():
    arena = ScratchArena("cpu")
    with arena.borrow((2, 3), dtype=torch.float32) as t:
        assert t.shape == (2, 3) and t.dtype == torch.float32 and t.device.type == "cpu"
    assert arena.nbytes == 0


@pytest.mark.gpu
def test_one_buffer_the_size_of_the_largest_request_for_every_stream_and_thread():
    dev = torch.device("cuda", torch.cuda.current_device())
    arena = ScratchArena(dev)
    big, small = (4, 3, 1080, 416), (4, 3, 272, 416)
    with arena.borrow(small, dtype=torch.float32) as t:
        t.fill_(1)
    assert arena.nbytes == 4 * 3 * 272 * 416 * 4
    with arena.borrow(big, dtype=torch.float32) as t:  # grows (after the small one's work is done)
        first = t.data_ptr()
        assert t.shape == big and t.dtype == torch.float32 and t.is_contiguous()
    assert arena.nbytes == 4 * 3 * 1080 * 416 * 4
    torch.cuda.synchronize()
    reserved = torch.cuda.memory_reserved(dev)
    ptrs = set()

    def work():
        stream = torch.cuda.Stream(dev)
        with torch.cuda.stream(stream):
            for i in range(50):
                with arena.borrow(big if i % 2 else small, dtype=torch.float32) as t:
                    t.fill_(i)
                    ptrs.add(t.data_ptr())

    threads = [threading.Thread(target=work) for _ in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    torch.cuda.synchronize()
    assert ptrs == {first}  # the same memory for every borrower
    assert arena.nbytes == 4 * 3 * 1080 * 416 * 4
    # streams' own small allocations may come and go; no buffer of the arena's size was added
    assert torch.cuda.memory_reserved(dev) - reserved < arena.nbytes


@pytest.mark.gpu
def test_the_next_borrower_waits_on_the_gpu_for_the_previous_ones_kernels():
    dev = torch.device("cuda", torch.cuda.current_device())
    arena = ScratchArena(dev)
    a, b = torch.cuda.Stream(dev), torch.cuda.Stream(dev)
    with torch.cuda.stream(a), arena.borrow((1 << 20,), dtype=torch.float32) as t:
        t.fill_(0)
    torch.cuda.synchronize()
    with torch.cuda.stream(a), arena.borrow((1 << 20,), dtype=torch.float32) as t:
        torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU time before the write
        t.fill_(1)
    with torch.cuda.stream(b), arena.borrow((1 << 20,), dtype=torch.float32) as t:
        seen = t.clone()  # queued on another stream: runs only after a's fill
    torch.cuda.synchronize()
    assert bool((seen == 1).all())


@pytest.mark.gpu
def test_a_borrower_that_raises_leaves_the_arena_usable():
    dev = torch.device("cuda", torch.cuda.current_device())
    arena = ScratchArena(dev)
    with pytest.raises(RuntimeError, match="boom"):
        with arena.borrow((16,), dtype=torch.float32):
            raise RuntimeError("boom")
    done = threading.Event()

    def again():
        with arena.borrow((16,), dtype=torch.float32) as t:
            t.zero_()
        done.set()

    threading.Thread(target=again, daemon=True).start()
    assert done.wait(10)  # the lock was released


@pytest.mark.gpu
def test_fused_letterbox_with_the_arena_equals_without():
    from vidpipe.ops.fused import yuv_letterbox
    from vidpipe.types import ColorSpec, FrameBatch, FrameMeta

    dev = torch.device("cuda", torch.cuda.current_device())
    g = torch.Generator().manual_seed(3)
    nv12 = torch.randint(16, 236, (3, 1080 * 3 // 2, 1920), generator=g, dtype=torch.uint8).to(dev)
    metas = tuple(FrameMeta("x", 0, i, None, 1080, 1920) for i in range(3))
    batch = FrameBatch(nv12, metas, "nv12", ColorSpec("bt709", "limited"))
    arena = ScratchArena(dev)
    ref, _ = yuv_letterbox(batch, (416, 416), dtype=torch.float16, backend="triton")
    got, _ = yuv_letterbox(batch, (416, 416), dtype=torch.float16, backend="triton", scratch=arena)
    assert arena.nbytes == 3 * 3 * 1080 * 416 * 4
    assert torch.equal(ref, got)
