"""Pacing of a file played as a camera (``LiveOptions.realtime``): packets are released at the
file's own rate, by their decode timestamps against the monotonic clock.

The first packet sets the origin; packet ``k`` is released at ``origin + (dts_k - dts_0)``. A
reader that falls behind (a slow disk, a busy machine) is not made to catch up in a burst beyond
:data:`MAX_LAG`: the origin moves forward instead, as a camera's frames would simply arrive
later. Waits check the stop flags at least every 0.2 s. The file ends the stream (no looping).
"""

from __future__ import annotations

import threading
import time

from vidpipe.sources.reconnect import wait

__all__ = ["Pacer", "MAX_LAG"]

#: the most a paced file may fall behind its schedule before the schedule moves (seconds)
MAX_LAG = 0.5


class Pacer:
    """Releases packets at their timestamps' pace."""

    def __init__(self) -> None:
        self._origin: float | None = None  # monotonic time of timestamp 0 (seconds)

    def pace(self, seconds: float | None, *stops: threading.Event) -> bool:
        """Wait until the packet at ``seconds`` (its dts, else pts) is due. Returns ``True`` when
        a stop flag ended the wait. Packets without a timestamp are released at once."""
        if seconds is None:
            return any(s.is_set() for s in stops)
        now = time.monotonic()
        if self._origin is None:
            self._origin = now - seconds
        due = self._origin + seconds
        if now - due > MAX_LAG:  # behind: move the schedule rather than burst
            self._origin = now - seconds
            return any(s.is_set() for s in stops)
        return wait(due - now, *stops)
