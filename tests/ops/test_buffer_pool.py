"""BufferPool reuses a buffer only when nothing outside it references the memory, and fails
closed where PyTorch cannot report that (no reuse, said once)."""

from __future__ import annotations

import logging

import torch

from vidpipe.ops import pool as pool_mod
from vidpipe.ops.pool import BufferPool


def test_a_released_buffer_is_reused_once_no_view_of_it_is_kept():
    p = BufferPool("cpu")
    a = p.acquire((2, 3), torch.uint8)
    kept = a.tensor[0]  # a caller keeps a view of the delivered batch
    p.release(a)
    b = p.acquire((2, 3), torch.uint8)
    assert b is not a and p.stats.reuses == 0  # the kept view is never overwritten
    del kept
    p.release(b)
    c = p.acquire((2, 3), torch.uint8)
    assert c in (a, b) and p.stats.reuses == 1


def test_without_use_counts_the_pool_reuses_nothing_and_says_so_once(monkeypatch, caplog):
    monkeypatch.setattr(pool_mod, "_use_count", lambda t: None)
    p = BufferPool("cpu", max_free=2)
    with caplog.at_level(logging.WARNING, logger="vidpipe.ops.pool"):
        bufs = []
        for _ in range(5):
            b = p.acquire((4,), torch.float32)
            assert all(b is not old for old in bufs)
            bufs.append(b)
            p.release(b)
    assert p.stats.reuses == 0 and p.stats.allocations == 5
    assert p.stats.retired == 3 and p.stats.allocated_bytes == 2 * 4 * 4  # bounded by max_free
    said = [r for r in caplog.records if "storage use counts" in r.getMessage()]
    assert len(said) == 1
