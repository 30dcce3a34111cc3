"""The tracker's helper process (``python -m vidpipe.track.child``): a
:class:`~vidpipe.track.book.TrackBook` fed over a socket by
:class:`~vidpipe.track.process.TrackerProcess`.

Protocol (pickled tuples over the inherited socket ``VIDPIPE_TRACK_FD``): the parent sends
``("config", TrackConfig)`` first; the child answers ``("hello", pid)``. Then for each
``("track", seq, resets, [(PackedFrames, first_id), ...])`` the child forgets the streams in
``resets``, tracks the groups in order and answers ``("ids", seq, [StreamIds, ...])`` (or
``("error", seq, text)``); ``("close",)`` or the socket's end stops it. The process never imports
torch, and ends with its parent however the parent ends (:mod:`vidpipe.lifetime.child`).
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

__all__ = ["main"]


def main() -> NoReturn:
    from vidpipe.lifetime.child import watch_from_env

    watch_from_env()  # first: a parent killed meanwhile ends us
    from multiprocessing.connection import Connection

    from vidpipe.track.book import TrackBook
    from vidpipe.track.process import FD_ENV

    conn = Connection(int(os.environ[FD_ENV]))
    try:
        kind, config = conn.recv()
        if kind != "config":
            raise ValueError(f"expected the tracker's config first, got {kind!r}")
        book = TrackBook(config)
        conn.send(("hello", os.getpid()))
        while True:
            msg = conn.recv()
            if msg[0] == "close":
                break
            _, seq, resets, groups = msg
            try:
                for sid in resets:
                    book.reset(sid)
                conn.send(("ids", seq, [book.track(frames, first_id=first) for frames, first in groups]))
            except Exception as exc:  # noqa: BLE001 - the parent tracks inline from here on
                conn.send(("error", seq, f"{type(exc).__name__}: {exc}"))
    except (EOFError, OSError):  # the parent closed the socket or is gone
        pass
    finally:
        conn.close()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
