"""Fixed-batch pad/split, joining raw outputs, and the out-of-memory back-off."""

from __future__ import annotations

import logging

import pytest
import torch

from vidpipe.errors import ModelError
from vidpipe.models.backends import OomBackoff
from vidpipe.models.backends.batching import (
    cat_raw,
    run_chunked,
    run_fixed_batch,
    slice_raw,
)


def per_row(x: torch.Tensor):
    """A raw output with every structure: tensor, dict, tuple, per-image list of dicts."""
    m = x.mean(dim=(1, 2, 3))
    return (
        m[:, None] * torch.arange(3.0),
        {"s": m * 2},
        [
            {"boxes": v.view(1, 1).expand(1, 4), "labels": torch.ones(1, dtype=torch.int64), "scores": v.view(1)}
            for v in m
        ],
    )


def _rows(n: int) -> torch.Tensor:
    return torch.arange(n, dtype=torch.float32).view(n, 1, 1, 1).expand(n, 3, 2, 2).contiguous()


def _assert_same(a, b) -> None:
    assert torch.equal(a[0], b[0]) and torch.equal(a[1]["s"], b[1]["s"])
    assert len(a[2]) == len(b[2])
    for da, db in zip(a[2], b[2]):
        assert torch.equal(da["boxes"], db["boxes"])


@pytest.mark.parametrize("rows", [1, 2, 3, 5, 8])
def test_fixed_batch_and_chunks_match_one_call(rows):
    x = _rows(rows)
    whole = per_row(x)
    calls = []

    def fixed(t):
        calls.append(t.shape[0])
        return per_row(t)

    _assert_same(run_fixed_batch(fixed, x, 4), whole)
    assert set(calls) == {4}  # never another batch size
    _assert_same(run_chunked(per_row, x, 3), whole)


def test_slice_and_cat_are_inverse():
    raw = per_row(_rows(5))
    _assert_same(cat_raw([slice_raw(raw, 2), per_row(_rows(5)[2:])]), raw)


class _OomAbove(torch.nn.Module):
    """Raises torch's CUDA out-of-memory error for batches above ``limit`` (the condition, not a GPU)."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self.calls: list[int] = []

    def forward(self, x):
        self.calls.append(x.shape[0])
        if x.shape[0] > self.limit:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return per_row(x)


def test_oom_backs_off_and_says_so(caplog):
    net = _OomAbove(3)
    run = OomBackoff(net, name="tiny")
    x = _rows(16)
    with caplog.at_level(logging.WARNING):
        out = run(x)
    _assert_same(out, per_row(x))
    assert run.limit == 2 and run.backoffs == 3  # 16 -> 8 -> 4 -> 2
    assert "ran out of memory at batch 16" in caplog.text and "batches of 8" in caplog.text
    net.calls.clear()
    run(x)  # sticky: no new attempts at larger sizes
    assert max(net.calls) == 2


def test_oom_at_batch_one_is_an_error():
    run = OomBackoff(_OomAbove(0), name="huge")
    with pytest.raises(ModelError, match="out of memory even at batch 1"):
        run(_rows(4))


def test_other_errors_pass_through():
    def broken(x):
        raise RuntimeError("shape mismatch")

    with pytest.raises(RuntimeError, match="shape mismatch"):
        OomBackoff(broken)(_rows(2))
