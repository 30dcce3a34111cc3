"""Turns between a CUDA graph's capture and the CUDA driver work that threads of the process
start on their own.

PyTorch captures a CUDA graph (``torch.cuda.graph``) in its default "global" mode: a call of
another thread of the process that the driver does not allow during a capture invalidates the
capture ("operation failed due to a previous error during capture") and the model then runs
eagerly (:func:`~vidpipe.models.backends.accel.accelerate`). NVDEC's ``GetDecoderCaps`` is such a
call: on an H200, a thread querying the capabilities while the model's graph was captured
failed with error 900 (``CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED``) and the capture fell back to
eager. ``vidpipe.detect`` queries them in a thread beside the model's load
(:mod:`vidpipe.prewarm`), and ``vidpipe detect`` may start NVDEC sessions in one
(:mod:`vidpipe.decode.prestart`); with a model loaded before the call, that work meets the
capture.

Turns: a capture holds :func:`capturing` for its length (a fraction of a second), and each
such driver call of a side thread holds :func:`driver_work` (a capability query: about 0.2 s; a
session's start: about 50 ms). Whichever comes second waits for the other; a capture that waits
goes first.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator

__all__ = ["capturing", "driver_work"]

logger = logging.getLogger(__name__)

#: the longest a capture waits for its turn (a side call that hangs in the driver): then it
#: captures anyway, as it did before there were turns, and may fall back to eager
CAPTURE_WAIT_S = 5.0


class _Turns:
    """A re-entrant lock (per thread) where a capture that waits goes before side work that
    comes after it: a side thread starting sessions back to back would otherwise take the lock
    again at once, each time, and keep the capture waiting (Python's locks are not fair)."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._owner: int | None = None
        self._depth = 0
        self._captures_waiting = 0

    @contextlib.contextmanager
    def hold(self, *, capture: bool) -> Iterator[None]:
        me = threading.get_ident()
        deadline = time.monotonic() + CAPTURE_WAIT_S
        with self._cond:
            if self._owner == me:
                self._depth += 1
                taken = True
            else:
                self._captures_waiting += capture
                try:
                    while self._owner is not None or (not capture and self._captures_waiting):
                        left = deadline - time.monotonic()
                        if capture and left <= 0:
                            break
                        self._cond.wait(left if capture else None)
                finally:
                    self._captures_waiting -= capture
                taken = self._owner is None
                if taken:
                    self._owner, self._depth = me, 1
                else:  # a capture that waited CAPTURE_WAIT_S: it goes on without its turn
                    self._cond.notify_all()  # and the side threads it held back go on too
        if not taken:
            logger.warning("a CUDA driver call of another thread has lasted %.0f s; capturing the CUDA graph "
                           "beside it", CAPTURE_WAIT_S)  # fmt: skip
            yield
            return
        try:
            yield
        finally:
            with self._cond:
                self._depth -= 1
                if self._depth == 0:
                    self._owner = None
                    self._cond.notify_all()


_TURNS = _Turns()


def capturing() -> contextlib.AbstractContextManager[None]:
    """Held while a CUDA graph is captured: no :func:`driver_work` runs meanwhile, and none
    starts while a capture waits for its turn."""
    return _TURNS.hold(capture=True)


def driver_work() -> contextlib.AbstractContextManager[None]:
    """Held by one CUDA driver call of a side thread (NVDEC capabilities, a session's start):
    not while a CUDA graph is captured or waits to be."""
    return _TURNS.hold(capture=False)
