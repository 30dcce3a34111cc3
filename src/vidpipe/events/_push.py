"""The common part of the sinks that push events over the network (webhook, MQTT): a bounded
queue filled by :meth:`~vidpipe.sinks.base.Sink.write` without ever blocking, emptied by one
background thread, counters of what was delivered, dropped and left undelivered, and a close
that flushes what is queued within a bounded wait.

Counters (``stats``): ``accepted`` (events queued), ``dropped`` (refused because the queue was
full), then each accepted event ends ``delivered`` (the server or broker acknowledged it),
``failed`` (given up after the retries, or refused by the server), or ``undelivered`` (still
queued or in flight when the close's wait ran out). Drops are logged once at once, then at most
every :data:`DROP_LOG_INTERVAL_S` seconds with the running count.
"""

from __future__ import annotations

import logging
import threading
import time
from abc import abstractmethod
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from vidpipe._validate import check_range
from vidpipe.events.table import events_of
from vidpipe.sinks.base import Sink

if TYPE_CHECKING:
    from vidpipe.stages.base import Event
    from vidpipe.summary import RunSummary
    from vidpipe.types import FrameResult

__all__ = ["PushSink", "DROP_LOG_INTERVAL_S"]

DROP_LOG_INTERVAL_S = 30.0
#: the longest flush of an aborted run (Ctrl-C, an error): the user is waiting
ABORT_WAIT_S = 2.0


class RateLimitedLog:
    """Logs the first call at once, then at most once per ``interval_s`` (the rest counted)."""

    def __init__(self, logger: logging.Logger, interval_s: float) -> None:
        self._logger = logger
        self._interval = interval_s
        self._last: float | None = None

    def __call__(self, level: int, msg: str, *args: Any) -> None:
        now = time.monotonic()
        if self._last is None or now - self._last >= self._interval:
            self._last = now
            self._logger.log(level, msg, *args)


class PushSink(Sink):
    """Base of the pushing sinks (see the module docstring). Subclasses implement :meth:`_work`
    (the thread's body: take events with :meth:`_take`, deliver them, count with
    :meth:`_count`) and :attr:`target` (the redacted destination)."""

    kind = "push"
    logger = logging.getLogger(__name__)

    def __init__(self, *, queue_size: int, close_timeout_s: float) -> None:
        super().__init__()
        self.queue_size = check_range("queue_size", queue_size, low=1, integer=True)
        self.close_timeout_s = float(check_range("close_timeout_s", close_timeout_s, low=0.0))
        self._queue: deque["Event"] = deque()
        self._cond = threading.Condition()
        self._closing = False  # no more events: flush and end
        self._give_up = threading.Event()  # the close's wait ran out: end now
        self._counts = {"accepted": 0, "dropped": 0, "delivered": 0, "failed": 0, "undelivered": 0}
        self._in_flight = 0
        self._drop_log = RateLimitedLog(self.logger, DROP_LOG_INTERVAL_S)
        self._thread: threading.Thread | None = None
        self._deadline = 0.0  # when the close's wait runs out (monotonic s)

    # ------------------------------------------------------------------ the pipeline's side
    @property
    @abstractmethod
    def target(self) -> str:
        """Where events go, credentials masked (for logs, stats and errors)."""

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._main, name=f"vidpipe-{self.kind}", daemon=True)
        self._thread.start()

    def write(self, results: Sequence["FrameResult"]) -> None:
        """Queue the events of a batch of results; never blocks on the network (events that do
        not fit in the queue are dropped and counted)."""
        self._check_open()
        events = events_of(results)
        if events:
            self.push(events)

    def push(self, events: Sequence["Event"]) -> int:
        """Queue ``events`` (the ones that fit); returns how many were dropped.

        Raises:
            SinkError: the sink is closed.
        """
        self._check_open()
        with self._cond:
            room = self.queue_size - len(self._queue) - self._in_flight
            take = max(0, min(room, len(events)))
            self._queue.extend(events[:take])
            self._counts["accepted"] += take
            dropped = len(events) - take
            self._counts["dropped"] += dropped
            total = self._counts["dropped"]
            if take:
                self._cond.notify()
        if dropped:
            self._drop_log(logging.WARNING, "%s %s: queue full (%d events); %d events dropped so far",
                           self.kind, self.target, self.queue_size, total)
        return dropped

    @property
    def stats(self) -> dict[str, Any]:
        """``{"target", "accepted", "dropped", "delivered", "failed", "undelivered", "queued"}``."""
        with self._cond:
            out: dict[str, Any] = {"target": self.target, **self._counts}
            out["queued"] = len(self._queue) + self._in_flight
        return out

    # ------------------------------------------------------------------ the thread's side
    def _main(self) -> None:
        try:
            self._work()
        except Exception:  # noqa: BLE001 - never take the pipeline down; say why and stop pushing
            self.logger.exception("%s %s: the sender stopped", self.kind, self.target)

    @abstractmethod
    def _work(self) -> None: ...

    def _take(self, most: int, *, linger_s: float) -> list["Event"]:
        """Up to ``most`` events: waits for the first one, then up to ``linger_s`` more for the
        batch to fill (not when closing). ``[]``: closing and nothing left (end the thread)."""
        with self._cond:
            while not self._queue and not self._closing:
                self._cond.wait()
            if self._give_up.is_set():
                return []
            if not self._queue:
                return []
            deadline = time.monotonic() + linger_s
            while len(self._queue) < most and not self._closing:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            n = min(most, len(self._queue))
            batch = [self._queue.popleft() for _ in range(n)]
            self._in_flight += n
            return batch

    def _count(self, n: int, outcome: str) -> None:
        """``n`` events taken by :meth:`_take` ended ``delivered`` or ``failed``."""
        with self._cond:
            self._in_flight -= n
            self._counts[outcome] += n
            self._cond.notify_all()

    def _wait(self, seconds: float) -> bool:
        """Sleep (a retry's back-off); True if the close's wait ran out meanwhile."""
        return self._give_up.wait(seconds)

    # ------------------------------------------------------------------ closing
    def _finalize(self, summary: "RunSummary | None", *, complete: bool, reason: str | None) -> None:
        """Flush: wait up to ``close_timeout_s`` (:data:`ABORT_WAIT_S` at most when aborted) for
        the queue to be delivered, then stop."""
        wait = self.close_timeout_s if complete else min(self.close_timeout_s, ABORT_WAIT_S)
        self._deadline = time.monotonic() + wait
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        thread = self._thread
        if thread is not None:
            thread.join(wait)
            if thread.is_alive():
                self._give_up.set()
                with self._cond:
                    self._cond.notify_all()
                thread.join(self._stop_grace_s())
        self._stop()
        with self._cond:
            left = len(self._queue) + self._in_flight
            self._counts["undelivered"] += left
            self._queue.clear()
            self._in_flight = 0
        c = self._counts
        level = logging.INFO if not (left or c["dropped"] or c["failed"]) else logging.WARNING
        self.logger.log(level, "%s %s: %d events delivered, %d dropped (queue full), %d failed, %d undelivered",
                        self.kind, self.target, c["delivered"], c["dropped"], c["failed"], c["undelivered"])

    def _stop_grace_s(self) -> float:
        """How long to wait for the thread after giving up (a request in progress)."""
        return 1.0

    def _stop(self) -> None:
        """Release the connection (after the thread ended or was given up on)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.target!r}, state={self.state!r})"
