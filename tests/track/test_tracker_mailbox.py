"""The tracker child's shared-memory mailbox: requests and replies through it give the ids the
socket gives, payloads too large for a slot go over the socket in order, and the run's side makes
no system call for a request that fits."""

from __future__ import annotations

import numpy as np
import pytest

from vidpipe.track.book import PackedFrames, TrackBook
from vidpipe.track.config import TrackConfig
from vidpipe.track.mailbox import SLOTS, Mailbox, supported
from vidpipe.track.process import TrackerProcess

pytestmark = pytest.mark.skipif(not supported(), reason="the mailbox needs Linux on x86-64")


def _frames(start: int, n: int, *, objects: int) -> PackedFrames:
    """``n`` frames of ``objects`` boxes walking right 3 px a frame, 60 px apart."""
    f = np.arange(start, start + n, dtype=np.float64)
    x = (np.arange(objects) * 60.0)[None, :] + 3.0 * f[:, None]  # (n, objects)
    rows = np.zeros((n * objects, 6), np.float32)
    rows[:, 0] = x.ravel()
    rows[:, 1] = 20
    rows[:, 2] = x.ravel() + 40
    rows[:, 3] = 120
    rows[:, 4] = 0.9
    return PackedFrames(0, f / 30, np.full(n, objects, np.int64), rows)


def test_a_mailbox_carries_numbered_messages_both_ways():
    box = Mailbox(request_bytes=64, reply_bytes=32)
    other = Mailbox(box.fd, request_bytes=64, reply_bytes=32)  # the same memory, as the child maps it
    try:
        for seq in range(1, 2 * SLOTS + 1):
            box.put(seq, b"req%d" % seq, reply=False)
            assert other.requested() == seq and other.get(seq, reply=False) == b"req%d" % seq
            other.put(seq, None if seq % 3 == 0 else b"rep%d" % seq, reply=True)
            assert box.replied() == seq
            assert box.get(seq, reply=True) == (None if seq % 3 == 0 else b"rep%d" % seq)
        with pytest.raises(RuntimeError, match="holds message"):
            box.get(1, reply=True)  # overwritten by a later message in the same slot
        assert not box.fits(b"x" * 65, reply=False) and box.fits(b"x" * 32, reply=True)
        with pytest.raises(ValueError, match="do not fit"):
            box.put(99, b"x" * 33, reply=True)
    finally:
        other.fd = -1  # the descriptor is box's
        other._mm.close()
        box.close()


@pytest.mark.parametrize("request_bytes,reply_bytes", [(1 << 20, 256 << 10), (3000, 600)], ids=["fits", "socket-too"])
def test_ids_through_the_mailbox_are_the_inline_ones(request_bytes, reply_bytes):
    """Batches of 1 to 40 objects a frame, two requests outstanding as in a run: with small slots
    the large requests and replies go over the socket between ones that go through the mailbox."""
    proc = TrackerProcess(TrackConfig(), mailbox=Mailbox(request_bytes=request_bytes, reply_bytes=reply_bytes))
    book = TrackBook(TrackConfig())
    try:
        assert proc._box is not None
        batches = [_frames(8 * i, 8, objects=1 + (13 * i) % 40) for i in range(12)]
        want = [book.track(b, first_id=1).ids.tolist() for b in batches]
        got, pending = [], []
        for b in batches:
            pending.append(proc.request([], [(b, 1)]))
            if len(pending) == 2:
                got.append(proc.reply(pending.pop(0))[0].ids.tolist())
        got += [proc.reply(s)[0].ids.tolist() for s in pending]
        assert got == want
    finally:
        proc.close()


def test_a_request_that_fits_makes_no_system_call(monkeypatch):
    """The point of the mailbox: nothing is written to the socket for a request that fits."""
    proc = TrackerProcess(TrackConfig())
    try:
        proc.wait_started()
        sent = []
        monkeypatch.setattr(proc._conn, "send_bytes", lambda *a, **k: sent.append(a))
        monkeypatch.setattr(proc._conn, "send", lambda *a, **k: sent.append(a))
        seq = proc.request([], [(_frames(0, 32, objects=2), 1)])
        assert sent == []
        monkeypatch.undo()
        assert proc.reply(seq)[0].ids.shape == (64,)
    finally:
        proc.close()
