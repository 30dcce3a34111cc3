"""The turns between a CUDA graph's capture and side threads' driver calls
(:mod:`vidpipe._capture_turns`), with threads only: never both at once, a capture that waits goes
before side work that comes after it (a side thread starting NVDEC sessions back to back would
keep a plain lock), and a thread may take its turn again inside it. The GPU test
``tests/test_capture_turns_gpu.py`` has the driver calls and captures themselves."""

from __future__ import annotations

import threading
import time

from vidpipe._capture_turns import capturing, driver_work


def test_a_capture_gets_its_turn_between_back_to_back_side_calls_and_never_overlaps_them():
    inside = {"side": 0, "capture": 0}
    overlaps, stop = [], threading.Event()

    def side():
        while not stop.is_set():
            with driver_work(), driver_work():  # re-entrant: a session's start that asks the caps
                inside["side"] += 1
                overlaps.append(inside["capture"])
                time.sleep(0.005)
                inside["side"] -= 1

    threads = [threading.Thread(target=side) for _ in range(2)]
    for t in threads:
        t.start()
    time.sleep(0.05)
    waits = []
    try:
        for _ in range(5):
            t0 = time.perf_counter()
            with capturing():
                waits.append(time.perf_counter() - t0)
                inside["capture"] += 1
                overlaps.append(inside["side"])
                time.sleep(0.02)
                inside["capture"] -= 1
            time.sleep(0.01)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert max(waits) < 0.5, waits  # one side call (5 ms) at most, not the side threads' whole loop
    assert not any(overlaps), "a driver call ran during a capture"
    assert len(overlaps) > 20  # the side threads went on between the captures


def test_a_capture_waits_for_a_hung_side_call_only_so_long(monkeypatch, caplog):
    from vidpipe import _capture_turns

    monkeypatch.setattr(_capture_turns, "CAPTURE_WAIT_S", 0.2)
    held, release = threading.Event(), threading.Event()

    def hung():
        with driver_work():
            held.set()
            release.wait(5)

    t = threading.Thread(target=hung)
    t.start()
    held.wait(5)
    t0 = time.perf_counter()
    try:
        with capturing():
            waited = time.perf_counter() - t0
    finally:
        release.set()
        t.join()
    assert 0.15 < waited < 2.0
    assert "capturing the CUDA graph beside it" in caplog.text
    with capturing():  # the turns work on afterwards
        pass
    with driver_work():
        pass


def test_a_capture_past_its_wait_may_still_take_turns_inside_it(monkeypatch):
    """The capture that went on without its turn holds nothing: a driver call of its own thread
    inside it, or the hung side call's end, never waits for it."""
    from vidpipe import _capture_turns

    monkeypatch.setattr(_capture_turns, "CAPTURE_WAIT_S", 0.1)
    held, release, ended = threading.Event(), threading.Event(), threading.Event()

    def hung():
        with driver_work():
            held.set()
            release.wait(5)
        ended.set()

    t = threading.Thread(target=hung)
    t.start()
    held.wait(5)
    try:
        with capturing():
            release.set()
            assert ended.wait(2), "the side call's end waited for the capture"
            with driver_work():  # its own thread's driver call, inside
                pass
    finally:
        release.set()
        t.join()
