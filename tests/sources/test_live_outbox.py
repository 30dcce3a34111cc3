"""A decoder process's live messages go out through one thread (vidpipe.sources.live_child._Outbox):
in order, and those queued while it sent go together as one ``live-batch`` (the parent's receiver
then takes them with one receive)."""

from __future__ import annotations

import threading

from vidpipe.sources.live_child import OUTBOX_BATCH, _Outbox


def test_messages_queued_while_one_is_sent_go_out_together_in_order():
    sent: list[tuple] = []
    first_in_flight, parent_slow = threading.Event(), threading.Event()

    def send(msg: tuple) -> None:
        sent.append(msg)
        if len(sent) == 1:
            first_in_flight.set()
            parent_slow.wait(5)  # the parent is behind: the stream threads keep queueing

    box = _Outbox(send)
    box.put(("live-frame", 0, 0))
    assert first_in_flight.wait(5)
    for i in range(1, 6):
        box.put(("live-frame", i % 2, i))
    parent_slow.set()
    box.close()
    assert sent[0] == ("live-frame", 0, 0)
    assert sent[1] == ("live-batch", [("live-frame", i % 2, i) for i in range(1, 6)])
    assert len(sent) == 2


def test_a_batch_is_bounded_and_close_sends_everything_queued():
    sent: list[tuple] = []
    gate = threading.Event()
    started = threading.Event()

    def send(msg: tuple) -> None:
        started.set()
        gate.wait(5)
        sent.append(msg)

    box = _Outbox(send)
    box.put(("live-state", 0, {}))
    assert started.wait(5)
    n = OUTBOX_BATCH + 10
    for i in range(n):
        box.put(("live-frame", 0, i))
    gate.set()
    box.close()
    flat = [m for msg in sent for m in (msg[1] if msg[0] == "live-batch" else [msg])]
    assert flat == [("live-state", 0, {})] + [("live-frame", 0, i) for i in range(n)]
    assert all(len(msg[1]) <= OUTBOX_BATCH for msg in sent if msg[0] == "live-batch")


def test_a_parent_gone_ends_the_outbox_without_raising_in_the_streams():
    def send(msg: tuple) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    box = _Outbox(send)
    box.put(("live-frame", 0, 0))
    box.put(("live-frame", 0, 1))  # a put never raises
    box.close(timeout=5)
    assert not box._thread.is_alive()  # noqa: SLF001 - the test checks it stopped
