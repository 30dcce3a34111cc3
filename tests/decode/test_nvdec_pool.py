"""The NVDEC session pool and how many sessions a file is decoded with (no GPU needed: the pool
holds any object; the rule is arithmetic on measured constants)."""

from __future__ import annotations

import math

import pytest

from vidpipe.decode.nvdec_pool import SESSION_PAYBACK_FRAMES, SessionPool, sessions_worth_starting


def test_sessions_worth_starting_follows_the_measured_optimum():
    """Cold (nothing pooled): the fewest-seconds session count measured on an H200 for 150, 600
    and 2,400 frames of 1080p (2, 4, 8 of 1/2/4/8/21 tried; the rule says 2, 4, 9); never above
    ``most``, never below one; pooled sessions are all used (they cost nothing to start)."""
    assert [sessions_worth_starting(n, idle=0, most=21) for n in (150, 600, 2400)] == [2, 4, 9]
    assert sessions_worth_starting(100_000, idle=0, most=21) == 21
    assert sessions_worth_starting(0, idle=0, most=21) == 1
    assert sessions_worth_starting(30, idle=0, most=1) == 1
    assert sessions_worth_starting(150, idle=21, most=21) == 21  # a warm process decodes as before
    assert sessions_worth_starting(150, idle=21, most=3) == 3  # (one per segment at most)
    assert sessions_worth_starting(600, idle=2, most=21) == 4
    # the cost model behind the constant: 0.05 s a start against ~650 frames/s a session
    assert SESSION_PAYBACK_FRAMES == pytest.approx(650 * 0.05)
    cost = {k: 0.05 * k + 2400 / (650 * k) for k in range(1, 22)}
    assert abs(min(cost, key=cost.get) - math.sqrt(2400 / SESSION_PAYBACK_FRAMES)) < 1


def test_pool_reuses_by_key_and_bounds_what_it_keeps():
    pool = SessionPool(max_idle=2)
    made = iter(range(100))
    a = pool.acquire("k", lambda: next(made))
    b = pool.acquire("k", lambda: next(made))
    assert (a, b, pool.created, pool.idle()) == (0, 1, 2, 0)
    destroyed = []
    for s in (a, b, 7):
        pool.release("k", s, destroyed.append)
    assert (pool.idle("k"), pool.idle("other"), destroyed) == (2, 0, [7])
    assert pool.acquire("k", lambda: next(made)) == 1 and pool.reused == 1  # the most recent first
    assert pool.clear(destroyed.append) == 1 and destroyed == [7, 0] and pool.idle() == 0
