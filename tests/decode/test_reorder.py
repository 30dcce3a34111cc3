"""The bounded reorder buffer: order, bounds, holes, failure and cancellation across threads."""

from __future__ import annotations

import random
import threading
import time

import pytest

from vidpipe.decode.reorder import MISSING, Cancelled, ReorderBuffer
from vidpipe.errors import ConfigError


def drain(buf, timeout=5.0):
    out = []
    while True:
        got = buf.get(timeout=timeout)
        if got is None:
            return out
        out.append(got)


def test_out_of_order_producers_come_out_in_order():
    n, workers = 200, 4
    buf = ReorderBuffer(capacity=16, total=n)

    def produce(w):
        rng = random.Random(w)
        for p in range(w, n, workers):
            time.sleep(rng.random() * 0.001)
            buf.put(p, f"item{p}")

    threads = [threading.Thread(target=produce, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    out = drain(buf)
    for t in threads:
        t.join(timeout=5)
    assert [p for p, _ in out] == list(range(n))
    assert [i for _, i in out] == [f"item{p}" for p in range(n)]
    assert buf.peak <= 16


def test_a_producer_ahead_of_the_consumer_blocks():
    buf = ReorderBuffer(capacity=4, total=10)
    done = threading.Event()

    def far_ahead():
        buf.put(6, "six")  # 6 >= 0 + 4: must wait until the consumer has taken 3
        done.set()

    t = threading.Thread(target=far_ahead)
    t.start()
    time.sleep(0.05)
    assert not done.is_set()
    for p in range(4):
        buf.put(p, p)
    assert buf.get(timeout=1) == (0, 0)
    assert buf.get(timeout=1) == (1, 1)
    time.sleep(0.05)
    assert not done.is_set()  # consumer at 2: 6 is still 4 ahead
    assert buf.get(timeout=1) == (2, 2)
    t.join(timeout=2)
    assert done.is_set()
    with pytest.raises(TimeoutError):
        buf.reserve(9, timeout=0.01)


def test_skipped_positions_come_out_missing():
    buf = ReorderBuffer(capacity=8, total=5)
    buf.put(0, "a")
    buf.put(3, "d")
    assert buf.skip(1, 3) == 2
    assert buf.skip(3, 5) == 1  # 3 is filled, only 4 is marked
    out = drain(buf)
    assert out == [(0, "a"), (1, MISSING), (2, MISSING), (3, "d"), (4, MISSING)]
    assert buf.missing == 3


def test_close_ends_an_unknown_length_stream():
    buf = ReorderBuffer(capacity=8)
    buf.put(0, "a")
    buf.put(1, "b")
    buf.close(2)
    assert drain(buf) == [(0, "a"), (1, "b")]


def test_fail_wakes_the_consumer_and_blocked_producers():
    buf = ReorderBuffer(capacity=2, total=10)
    errors = []

    def blocked():
        try:
            buf.put(5, "x")
        except Cancelled as exc:
            errors.append(exc)

    t = threading.Thread(target=blocked)
    t.start()
    time.sleep(0.02)
    buf.fail(RuntimeError("worker 3 died"))
    t.join(timeout=2)
    assert not t.is_alive() and len(errors) == 1
    with pytest.raises(RuntimeError, match="worker 3 died"):
        buf.get(timeout=1)


def test_cancel_releases_producers_and_ends_the_consumer():
    buf = ReorderBuffer(capacity=1, total=10)
    buf.put(0, "a")
    t = threading.Thread(target=lambda: pytest.raises(Cancelled, buf.put, 3, "c"))
    t.start()
    buf.cancel()
    t.join(timeout=2)
    assert not t.is_alive()
    assert buf.get(timeout=1) is None
    with pytest.raises(Cancelled):
        buf.put(1, "b")


def test_misuse_is_reported():
    buf = ReorderBuffer(capacity=4, total=3)
    buf.put(0, "a")
    with pytest.raises(ValueError, match="already"):
        buf.put(0, "again")
    with pytest.raises(ValueError, match="past the end"):
        buf.put(3, "too far")
    with pytest.raises(ConfigError):
        ReorderBuffer(capacity=0)


def test_runs_are_put_and_taken_at_once():
    n, workers, run = 120, 3, 8
    buf = ReorderBuffer(capacity=24, total=n)

    def produce(w):  # runs of 8 positions, as decoder workers hand over their frames
        for start in range(w * run, n, workers * run):
            items = []
            for p in range(start, min(start + run, n)):
                buf.reserve(p, timeout=5)
                items.append((p, f"item{p}"))
            buf.put_many(items)

    threads = [threading.Thread(target=produce, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    got, sizes = [], []
    while True:
        part = buf.get_ready(16 - buf.next_position % 16, timeout=5)
        if part is None:
            break
        sizes.append(len(part))
        got += part
    for t in threads:
        t.join(timeout=5)
    assert [p for p, _ in got] == list(range(n)) and [i for _, i in got] == [f"item{p}" for p in range(n)]
    assert max(sizes) <= 16 and len(sizes) < n  # never past a batch of 16, fewer wake-ups than items
    assert buf.writable(n + 23) and not buf.writable(n + 24)


def test_put_many_refuses_filled_positions_and_get_ready_reports_holes():
    buf = ReorderBuffer(capacity=8, total=6)
    buf.put_many([(0, "a"), (1, "b")])
    with pytest.raises(ValueError, match="already filled"):
        buf.put_many([(1, "again")])
    with pytest.raises(ValueError, match="past the end"):
        buf.put_many([(6, "x")])
    buf.skip(2, 4)
    buf.put_many([(4, "e"), (5, "f")])
    assert buf.get_ready(3) == [(0, "a"), (1, "b"), (2, MISSING)]
    assert buf.get_ready(8) == [(3, MISSING), (4, "e"), (5, "f")]
    assert buf.get_ready(8) is None and buf.missing == 2
