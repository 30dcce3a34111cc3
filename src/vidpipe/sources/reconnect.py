"""The reconnect pace of a live stream and how an offline camera is logged.

:class:`Backoff`: after a failed or lost connection the stream waits ``reconnect_min`` seconds,
then twice that after each further failure, capped at ``reconnect_max`` (1, 2, 4, 8, 10, 10, ...
with the defaults), forever. A connection that delivered frames resets the pace.

:class:`OfflineLog`: a camera that cannot be reached is logged once at WARNING, then at INFO at
most once per ``every`` seconds (60 by default) while it stays offline, never once per retry;
its return is logged at INFO with how long it was away.

:func:`wait` sleeps in steps of at most :data:`STEP` seconds, checking the stop flag, so a run's
close ends a waiting stream promptly.
"""

from __future__ import annotations

import logging
import threading
import time

__all__ = ["Backoff", "OfflineLog", "wait", "STEP"]

#: the longest a live stream's wait goes without looking at the run's stop flag (seconds)
STEP = 0.2


def wait(seconds: float, *events: threading.Event) -> bool:
    """Sleep ``seconds`` unless one of ``events`` is set first (checked every :data:`STEP` s at
    most). Returns ``True`` when an event ended the wait."""
    end = time.monotonic() + max(0.0, seconds)
    first = events[0] if events else threading.Event()
    while True:
        if any(e.is_set() for e in events):
            return True
        left = end - time.monotonic()
        if left <= 0:
            return False
        first.wait(min(STEP, left))


class Backoff:
    """Capped exponential retry pace: ``next()`` gives the wait before the next attempt."""

    def __init__(self, low: float, high: float) -> None:
        self.low, self.high = float(low), float(high)
        self.failures = 0

    def next(self) -> float:
        """The wait before the next attempt (counts one failure)."""
        delay = min(self.high, self.low * (2 ** min(self.failures, 30)))
        self.failures += 1
        return delay

    def reset(self) -> None:
        """A good connection: the next failure waits ``low`` again."""
        self.failures = 0


class OfflineLog:
    """Rate-limited log lines of one stream being offline (see the module docstring)."""

    def __init__(self, logger: logging.Logger, name: str, *, cap: float, every: float = 60.0) -> None:
        self.logger, self.name, self.every, self.cap = logger, name, every, cap
        self.since: float | None = None  # monotonic time the stream went offline
        self.attempts = 0
        self._last_log = 0.0

    def failed(self, reason: str, retry_in: float) -> None:
        """One more failed attempt (``reason`` is already redacted)."""
        now = time.monotonic()
        self.attempts += 1
        if self.since is None:
            self.since = self._last_log = now
            self.logger.warning(
                "%s: offline (%s); retrying in %g s, then at most every %g s (logged again once a minute)",
                self.name, reason, retry_in, self.cap,
            )  # fmt: skip
        elif now - self._last_log >= self.every:
            self._last_log = now
            self.logger.info(
                "%s: still offline after %.0f s and %d attempts (%s); next retry in %g s",
                self.name, now - self.since, self.attempts, reason, retry_in,
            )  # fmt: skip

    def back(self) -> None:
        """The stream delivers frames again."""
        if self.since is not None:
            self.logger.info(
                "%s: back online after %.1f s offline (%d failed attempts)",
                self.name, time.monotonic() - self.since, self.attempts,
            )  # fmt: skip
        self.since = None
        self.attempts = 0
