"""Frame numbers and timing: which frame of the stream a decoded frame is, and whether any are missing.

Frame numbers never come from timestamps: a frame's number (``FrameMeta.index``) is its position
among the frames of the selected range, in presentation order: 0, 1, 2, ... as FFmpeg's ``n``
counts them, whatever the frame rate. A stream's frames are its packets (one picture each, for
the codecs vidpipe decodes), so :class:`FrameNumbers` numbers a decoded frame by the rank of its
timestamp among the packets' (the segment planner does the same from a demux scan, see
:mod:`vidpipe.decode.segments`): a packet the decoder fails to turn into a frame leaves its
number unused and is counted as lost, so the other frames keep their numbers.

Timestamps only say whether frames are *missing from the file* (:func:`timestamp_gaps`): a stream whose frame intervals
are all whole multiples of one interval, nearly all exactly one, is constant-rate, and each
interval of ``k`` frame durations means ``k - 1`` frames the recorder lost. Anything else
(phones slowing down in low light, screen recordings, 1.5-interval steps, jitter) is variable
frame rate and never "missing" anything.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["FrameNumbers", "TimestampGaps", "timestamp_gaps", "warn_timestamp_gaps"]

logger = logging.getLogger(__name__)

#: the least share of one-interval steps for a stream to count as constant-rate
REGULAR_SHARE = 0.9
#: timestamps rounded to milliseconds (Matroska) still match a multiple of the interval
_ROUNDING_S = 0.0011


@dataclass(frozen=True)
class TimestampGaps:
    """Frames a constant-rate stream's timestamps say are missing.

    Attributes:
        missing: frames missing in total (``0`` for variable-rate or complete streams).
        gaps: how many places the timestamps skip at.
        first_at: presentation time (seconds) of the frame after the first gap, else ``None``.
        interval: the frame interval in seconds of a constant-rate stream, else ``None``.
    """

    missing: int = 0
    gaps: int = 0
    first_at: float | None = None
    interval: float | None = None


def timestamp_gaps(times: Sequence[float]) -> TimestampGaps:
    """Check the presentation times (seconds, any order, at least 5 frames) of consecutive frames.

    Returns :class:`TimestampGaps`; ``missing`` is non-zero only for a constant-rate stream
    (every step a whole multiple ``k >= 1`` of the frame interval, within millisecond rounding,
    and at least :data:`REGULAR_SHARE` of them exactly one interval) whose steps skip frames.
    """
    ts = sorted(times)
    steps = [b - a for a, b in zip(ts, ts[1:])]
    if len(steps) < 4:
        return TimestampGaps()
    interval = sorted(steps)[len(steps) // 2]  # the median step
    if interval <= 0:
        return TimestampGaps()
    tol = max(_ROUNDING_S, 0.01 * interval)
    multiples = []
    for s in steps:
        k = round(s / interval)
        if k < 1 or abs(s - k * interval) > tol * max(1, k):
            return TimestampGaps()  # not a whole number of intervals: variable frame rate
        multiples.append(k)
    if sum(k == 1 for k in multiples) < REGULAR_SHARE * len(multiples):
        return TimestampGaps()  # irregular: variable frame rate with a regular base clock
    missing = sum(k - 1 for k in multiples)
    if not missing:
        return TimestampGaps(interval=interval)
    first = next(i for i, k in enumerate(multiples) if k > 1)
    return TimestampGaps(missing, sum(k > 1 for k in multiples), ts[first + 1], interval)


def warn_timestamp_gaps(source: str, times: Sequence[float]) -> int:
    """:func:`timestamp_gaps` of ``times``, logged as one warning naming ``source`` when frames are
    missing; returns how many."""
    gaps = timestamp_gaps(times)
    if gaps.missing:
        logger.warning(
            "%s: %d frame(s) missing from the file: its constant-rate timestamps (every %.4fs) skip "
            "%d time(s), first before t=%.3fs",
            source, gaps.missing, gaps.interval, gaps.gaps, gaps.first_at,
        )  # fmt: skip
    return gaps.missing


class FrameNumbers:
    """Numbers the frames a decoder outputs by the rank of their timestamps among the packets fed.

    Feed every packet's presentation time (seconds) to :meth:`packet` before decoding it, and
    ask :meth:`frame` for the number of each frame the decoder outputs (presentation order).
    Frames and packets before ``start`` are outside the range and get no number. A packet whose
    frame never comes out (the decoder dropped it: damaged data) is counted in :attr:`lost` and its
    number is skipped. Without timestamps (a packet or frame without one, or frames out of order)
    the numbering falls back to counting the frames as they come.
    """

    def __init__(self, start: float | None = None) -> None:
        self.start = start
        self.lost = 0
        self.lost_at: float | None = None  # time of the first frame after the first loss
        self._pending: list[float] = []  # packet times not yet matched by a frame (a heap)
        self._next = 0  # the next number
        self._last: float | None = None
        self._by_rank = True

    def _in_range(self, t: float) -> bool:
        return self.start is None or t >= self.start

    def packet(self, t: float | None) -> None:
        """A packet with presentation time ``t`` (``None``: unknown) goes to the decoder."""
        if t is None:
            self._by_rank = False
        elif self._by_rank and self._in_range(t):
            heapq.heappush(self._pending, t)

    def frame(self, t: float | None) -> int | None:
        """The number of the next decoded frame, shown at ``t``; ``None`` if before ``start``."""
        if t is not None and not self._in_range(t):
            return None
        if self._by_rank and (t is None or (self._last is not None and t <= self._last)):
            self._by_rank = False
        if self._by_rank:
            pending = self._pending
            skipped = 0
            while pending and pending[0] < t:
                heapq.heappop(pending)
                skipped += 1
            if skipped:
                self.lost += skipped
                self._next += skipped
                if self.lost_at is None:
                    self.lost_at = t
            if pending and pending[0] == t:
                heapq.heappop(pending)
            else:  # a frame at a time no packet had: count frames from here on
                self._by_rank = False
        self._last = t
        number = self._next
        self._next += 1
        return number

    def finish(self) -> int:
        """At the clean end of the stream: packets left without a frame are lost too; returns
        :attr:`lost`."""
        if self._by_rank and self._pending:
            self.lost += len(self._pending)
            if self.lost_at is None:
                self.lost_at = self._pending[0]
            self._pending.clear()
        return self.lost
