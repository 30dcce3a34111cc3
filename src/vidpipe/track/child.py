"""The tracker's helper process (``python -m vidpipe.track.child``): a
:class:`~vidpipe.track.book.TrackBook` fed over a socket by
:class:`~vidpipe.track.process.TrackerProcess`.

Protocol (pickled tuples over the inherited socket ``VIDPIPE_TRACK_FD``): the parent sends
``("config", TrackConfig)`` first; the child answers ``("hello", pid)``. Then for each
``("track", seq, resets, [(PackedFrames, first_id), ...])`` the child forgets the streams in
``resets``, tracks the groups in order and answers ``("ids", seq, [StreamIds, ...])`` (or
``("error", seq, text)``); ``("close",)`` or the socket's end stops it. With a
:class:`~vidpipe.track.mailbox.Mailbox` (``VIDPIPE_TRACK_MAILBOX_FD``: ``fd,request bytes,reply
bytes``) the same pickled messages come and go through its slots (polled between short waits on
the socket: every 0.2 ms while requests come, every 2 ms after 50 ms without one, every 10 ms after
a second), except those marked as sent over the socket. The process never imports
torch, and ends with its parent however the parent ends (:mod:`vidpipe.lifetime.child`).
"""

from __future__ import annotations

import os
import pickle
import sys
import time
from typing import Any, NoReturn

__all__ = ["main"]

#: seconds between looks at the mailbox: while requests come, 50 ms after the last one, 1 s after it
_POLL_S = (0.0002, 0.002, 0.01)


def main() -> NoReturn:
    from vidpipe.lifetime.child import watch_from_env

    watch_from_env()  # first: a parent killed meanwhile ends us
    from multiprocessing.connection import Connection

    from vidpipe.track.book import TrackBook
    from vidpipe.track.mailbox import Mailbox
    from vidpipe.track.process import FD_ENV, MAILBOX_ENV

    conn = Connection(int(os.environ[FD_ENV]))
    box = None
    if os.environ.get(MAILBOX_ENV):
        fd, req, rep = (int(v) for v in os.environ[MAILBOX_ENV].split(","))
        box = Mailbox(fd, request_bytes=req, reply_bytes=rep)
    try:
        kind, config, engine = conn.recv()
        if kind != "config":
            raise ValueError(f"expected the tracker's config first, got {kind!r}")
        book = TrackBook(config, engine=engine)
        book.start_building()  # compiled (or loaded from numba's cache) while the numpy trackers begin
        conn.send(("hello", os.getpid()))
        done = 0  # the last request answered
        early: dict[int, tuple] = {}  # requests read from the socket before the ones in the mailbox ahead of them
        last = time.monotonic()
        while True:
            nxt = done + 1
            msg = early.pop(nxt, None)
            on_socket = False
            if msg is None and box is not None and box.requested() >= nxt:
                data = box.get(nxt, reply=False)
                on_socket = data is None
                if data is not None:
                    msg = pickle.loads(data)
            if msg is None:
                idle = time.monotonic() - last
                wait = _POLL_S[0] if idle < 0.05 else _POLL_S[1] if idle < 1.0 else _POLL_S[2]
                if box is not None and not on_socket and not conn.poll(wait):
                    continue
                got = conn.recv()  # requests are numbered: one may come before those in the mailbox
                if got[0] == "close":
                    break
                early[got[1]] = got
                continue
            done = nxt
            _answer(conn, box, done, _track(book, msg))
            last = time.monotonic()
    except (EOFError, OSError):  # the parent closed the socket or is gone
        pass
    finally:
        conn.close()
        if box is not None:
            box.close()
    sys.stderr.flush()
    os._exit(0)


def _track(book: Any, msg: tuple) -> tuple:
    """``("ids", seq, [StreamIds, ...])`` for a ``("track", seq, resets, groups)`` request, or
    ``("error", seq, text)``."""
    _, seq, resets, groups = msg
    try:
        for sid in resets:
            book.reset(sid)
        return ("ids", seq, [book.track(frames, first_id=first) for frames, first in groups])
    except Exception as exc:  # noqa: BLE001 - the parent tracks inline from here on
        return ("error", seq, f"{type(exc).__name__}: {exc}")


def _answer(conn: Any, box: Any, seq: int, reply: tuple) -> None:
    """Send ``reply`` through the mailbox, or over the socket (marked in the mailbox) when it does
    not fit or there is no mailbox."""
    if box is None:
        conn.send(reply)
        return
    data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
    if box.fits(data, reply=True):
        box.put(seq, data, reply=True)
    else:
        conn.send_bytes(data)  # first, then its mark
        box.put(seq, None, reply=True)


if __name__ == "__main__":
    main()
