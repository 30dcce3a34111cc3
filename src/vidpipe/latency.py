"""Per-stream delivery rate and capture-to-result latency of a run.

Latency of a result = ``time.monotonic()`` when it is handed to the caller minus
``meta.captured_mono`` (when its frame's data was received; live sources only: files and image
folders have no capture time and count only towards the rate). Each stream keeps its last
:data:`RESERVOIR` latencies (a bounded window: recent behaviour, constant memory) and the times of
its deliveries over the last :data:`WINDOW_S` seconds (its results per second).
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vidpipe.types import FrameResult

__all__ = ["StreamMeter", "Meters", "percentile", "RESERVOIR", "WINDOW_S"]

#: latencies kept per stream (the most recent ones)
RESERVOIR = 4096
#: the window of the results-per-second rate (seconds)
WINDOW_S = 5.0


def percentile(ordered: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) of sorted values, linearly interpolated between the
    closest ranks (NumPy's default method); ``None`` for no values."""
    if not ordered:
        return None
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarise(values: Iterable[float], count: int) -> dict[str, Any]:
    """``{"p50": ms, "p99": ms, "count": n}`` of latencies in milliseconds (``None`` when empty);
    ``count`` is every latency recorded, the percentiles are over the kept ones."""
    ordered = sorted(values)
    return {"p50": percentile(ordered, 50), "p99": percentile(ordered, 99), "count": count}


class StreamMeter:
    """Rate and latency of one stream's delivered results (thread-safe)."""

    def __init__(self, *, reservoir: int = RESERVOIR, window_s: float = WINDOW_S) -> None:
        self._lock = threading.Lock()
        self._lat: deque[float] = deque(maxlen=reservoir)
        self._count = 0
        self._window = window_s
        self._times: deque[tuple[float, int]] = deque()  # (monotonic, results) per delivery
        self._since: float | None = None  # first delivery, or start()

    def start(self, now: float | None = None) -> None:
        """The stream began (its rate counts from here, not from the run's start)."""
        with self._lock:
            self._since = time.monotonic() if now is None else now

    def record(self, now: float, results: int, latencies_ms: Sequence[float] = ()) -> None:
        """``results`` results delivered at ``now`` (monotonic), with the latencies of those that
        carry a capture time."""
        with self._lock:
            if self._since is None:
                self._since = now
            self._times.append((now, results))
            self._trim(now)
            if latencies_ms:
                self._lat.extend(latencies_ms)
                self._count += len(latencies_ms)

    def _trim(self, now: float) -> None:
        while self._times and self._times[0][0] < now - self._window:
            self._times.popleft()

    def fps(self, now: float | None = None) -> float:
        """Results per second over the last ``window_s`` seconds (or since the stream began)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            self._trim(now)
            if self._since is None:
                return 0.0
            span = min(self._window, now - self._since)
            return sum(n for _, n in self._times) / span if span > 0 else 0.0

    def latency(self) -> dict[str, Any]:
        """``{"p50": ms | None, "p99": ms | None, "count": int}`` over the kept latencies."""
        with self._lock:
            values, count = list(self._lat), self._count
        return summarise(values, count)


class Meters:
    """The :class:`StreamMeter` of every stream of a run, plus all streams' latencies together."""

    def __init__(self, *, reservoir: int = RESERVOIR, window_s: float = WINDOW_S) -> None:
        self._reservoir, self._window = reservoir, window_s
        self._lock = threading.Lock()
        self._meters: dict[int, StreamMeter] = {}
        self._all = StreamMeter(reservoir=reservoir, window_s=window_s)

    def meter(self, stream_id: int) -> StreamMeter:
        with self._lock:
            m = self._meters.get(stream_id)
            if m is None:
                m = self._meters[stream_id] = StreamMeter(reservoir=self._reservoir, window_s=self._window)
            return m

    def record(self, results: "Sequence[FrameResult]", now: float | None = None) -> None:
        """Account ``results`` as delivered now (grouped per stream)."""
        now = time.monotonic() if now is None else now
        groups: dict[int, list[float]] = {}
        counts: dict[int, int] = {}
        for r in results:
            sid = r.meta.stream_id
            counts[sid] = counts.get(sid, 0) + 1
            lat = groups.setdefault(sid, [])
            if r.meta.captured_mono is not None:
                lat.append(1e3 * (now - r.meta.captured_mono))
        everyone: list[float] = []
        for sid, n in counts.items():
            self.meter(sid).record(now, n, groups[sid])
            everyone.extend(groups[sid])
        self._all.record(now, len(results), everyone)

    def overall(self) -> StreamMeter:
        """All streams together."""
        return self._all
