"""run_ahead: items in order, errors raised in the caller's thread after the items before them,
an early stop ends the producing thread and closes its iterator, and the two threads overlap."""

from __future__ import annotations

import threading
import time

import pytest

from vidpipe.stages.ahead import run_ahead


def test_items_in_order_then_the_error():
    def gen():
        yield from range(5)
        raise ValueError("boom")

    got = []
    with pytest.raises(ValueError, match="boom"):
        for x in run_ahead(gen()):
            got.append(x)
    assert got == [0, 1, 2, 3, 4]


def test_early_stop_closes_the_source_in_its_thread():
    closed = threading.Event()

    def gen():
        try:
            i = 0
            while True:
                yield i
                i += 1
        finally:
            closed.set()

    before = threading.active_count()
    it = run_ahead(gen(), depth=2, name="test-ahead")
    assert [next(it) for _ in range(3)] == [0, 1, 2]
    it.close()
    assert closed.wait(2)
    deadline = time.monotonic() + 2
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not any(t.name == "test-ahead" for t in threading.enumerate())


def test_producer_and_consumer_overlap():
    """10 items that take 20 ms to make and 20 ms to use: about 0.2 s together, not 0.4 s."""

    def gen():
        for i in range(10):
            time.sleep(0.02)
            yield i

    t0 = time.perf_counter()
    for _ in run_ahead(gen()):
        time.sleep(0.02)
    took = time.perf_counter() - t0
    assert took < 0.34, took
