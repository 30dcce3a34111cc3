"""The stall watchdog of a live stream: stalled when no frame has been *decoded* for a while.

Socket errors and closed connections are not enough: cameras go quiet without either, and a
stream whose packets keep coming but that decodes nothing (only damaged data, no keyframe) is
no better. The live source calls :meth:`Watchdog.frame` for every decoded frame and asks
:meth:`Watchdog.stalled` in its read loop (at least every 0.2 s, also while no packet comes).
The clock starts when the connection opens, so a stream that opens but never delivers a frame
is stalled ``stall_timeout`` seconds later.

Default: 15 s (``LiveOptions.stall_timeout``), within the 15-20 s stall restarts camera
analytics tools converged on, and above the 10 s socket read timeout, so a dead socket is
usually reported as such first and the watchdog catches the quiet ones.
"""

from __future__ import annotations

import time

__all__ = ["Watchdog"]


class Watchdog:
    """Tracks the time of the last decoded frame of one connection."""

    def __init__(self, timeout: float) -> None:
        self.timeout = float(timeout)
        self.last = time.monotonic()

    def start(self) -> None:
        """A new connection: its clock starts now."""
        self.last = time.monotonic()

    def frame(self, now: float | None = None) -> None:
        """A frame was decoded."""
        self.last = time.monotonic() if now is None else now

    def quiet_for(self) -> float:
        """Seconds since the last decoded frame (or the connection's start)."""
        return time.monotonic() - self.last

    def stalled(self) -> bool:
        """``True`` once ``timeout`` seconds passed without a decoded frame."""
        return self.quiet_for() >= self.timeout
