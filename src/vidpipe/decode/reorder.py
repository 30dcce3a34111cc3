"""A bounded reorder buffer: items produced out of order by several threads come out in order.

Producers tag each item with its output position (0, 1, 2, ...). The consumer takes positions in
order with :meth:`ReorderBuffer.get`. Memory is bounded: :meth:`ReorderBuffer.reserve` (and
:meth:`~ReorderBuffer.put`) block while a position is ``capacity`` or more ahead of the next one
the consumer will take, so a producer running ahead waits instead of piling up frames.

Positions nobody will fill (a frame that could not be decoded) are declared with
:meth:`~ReorderBuffer.skip`; the consumer receives them as :data:`MISSING` and moves on.
:meth:`~ReorderBuffer.fail` wakes every waiting thread with an error and :meth:`~ReorderBuffer.cancel`
stops everything (the consumer went away), so one failing producer never hangs the others.

Wake-ups are targeted: the consumer is woken only when the position it waits for arrives, and a
producer waiting in :meth:`~ReorderBuffer.reserve` only when the consumer has moved far enough
for its position (a heap of waiters), so many producers cost no thundering herd per frame.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from typing import Any, Generic, TypeVar

from vidpipe._validate import check_range

__all__ = ["ReorderBuffer", "Cancelled", "MISSING"]

T = TypeVar("T")


class Cancelled(Exception):
    """Raised in producers blocked on (or calling) a buffer that was cancelled or failed."""


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


#: what :meth:`ReorderBuffer.get` returns for a skipped position
MISSING: Any = _Missing()


class ReorderBuffer(Generic[T]):
    """Deliver items in position order, holding at most ``capacity`` positions ahead.

    Args:
        capacity: how far ahead of the consumer (in positions) producers may write.
        total: the number of positions (``None``: unknown; :meth:`close` marks the end).

    Thread-safe: any number of producer threads, one consumer.
    """

    def __init__(self, capacity: int, total: int | None = None) -> None:
        self.capacity = check_range("capacity", capacity, low=1, integer=True)
        self.total = total
        self._items: dict[int, Any] = {}
        self._next = 0
        self._end: int | None = total
        self._error: BaseException | None = None
        self._cancelled = False
        self._cond = threading.Condition()  # the consumer waits on this one
        self._waiters: list[tuple[int, int, threading.Event]] = []  # (position, n, event) heap
        self._seq = itertools.count()
        self.peak = 0  # most items held at once
        self.missing = 0  # positions delivered as MISSING

    # ------------------------------------------------------------------------------ producers

    @property
    def next_position(self) -> int:
        """The position the consumer takes next."""
        return self._next

    def _check_open(self) -> None:
        if self._cancelled:
            raise Cancelled("the reorder buffer was cancelled")
        if self._error is not None:
            raise Cancelled(f"the reorder buffer failed: {self._error}")

    def reserve(self, position: int, timeout: float | None = None) -> None:
        """Block until ``position`` may be written (less than ``capacity`` ahead of the consumer).

        Raises :class:`Cancelled` if the buffer is cancelled or failed meanwhile, and
        ``TimeoutError`` after ``timeout`` seconds.
        """
        with self._cond:
            self._check_open()
            if position < self._next + self.capacity:
                return
            event = threading.Event()
            heapq.heappush(self._waiters, (position, next(self._seq), event))
        if not event.wait(timeout):
            with self._cond:
                self._check_open()
                if position < self._next + self.capacity:
                    return
                raise TimeoutError(f"position {position} not writable after {timeout}s (consumer at {self._next})")
        with self._cond:
            self._check_open()

    def _wake_writers(self, everyone: bool = False) -> None:
        """Release the waiters now allowed to write (all of them with ``everyone``); lock held."""
        limit = self._next + self.capacity
        while self._waiters and (everyone or self._waiters[0][0] < limit):
            heapq.heappop(self._waiters)[2].set()

    def put(self, position: int, item: T, timeout: float | None = None) -> None:
        """Store ``item`` at ``position`` (blocking like :meth:`reserve`). A position already
        delivered or filled is a programming error (``ValueError``)."""
        self.reserve(position, timeout)
        with self._cond:
            self._check_open()
            if position < self._next or position in self._items:
                raise ValueError(f"position {position} was already filled")
            if self._end is not None and position >= self._end:
                raise ValueError(f"position {position} is past the end ({self._end})")
            self._items[position] = item
            self.peak = max(self.peak, len(self._items))
            if position == self._next:
                self._cond.notify()

    def writable(self, position: int) -> bool:
        """Whether :meth:`reserve` of ``position`` would return at once (a hint: no lock)."""
        return position < self._next + self.capacity

    def put_many(self, items: "list[tuple[int, T]]") -> None:
        """Store several ``(position, item)`` pairs at once (one lock, one wake-up); each
        position must have been reserved (:meth:`reserve`), so this never blocks."""
        with self._cond:
            self._check_open()
            store = self._items
            for position, item in items:
                if position < self._next or position in store:
                    raise ValueError(f"position {position} was already filled")
                if self._end is not None and position >= self._end:
                    raise ValueError(f"position {position} is past the end ({self._end})")
                store[position] = item
            self.peak = max(self.peak, len(store))
            if self._next in store:
                self._cond.notify()

    def skip(self, start: int, end: int | None = None) -> int:
        """Mark the unfilled positions in ``[start, end)`` (default: just ``start``) as missing.

        Never blocks; filled positions are left alone. Returns how many were marked."""
        end = start + 1 if end is None else end
        n = 0
        with self._cond:
            for p in range(max(start, self._next), end):
                if p not in self._items:
                    self._items[p] = MISSING
                    n += 1
            if n and start <= self._next:
                self._cond.notify()
        return n

    def close(self, end: int | None = None) -> None:
        """No position at or after ``end`` (default: ``total`` or the highest filled + 1) will
        come; the consumer stops there."""
        with self._cond:
            if end is None:
                end = self.total if self.total is not None else max(self._items, default=self._next - 1) + 1
            self._end = max(end, self._next) if self._end is None else min(self._end, max(end, self._next))
            self._cond.notify_all()

    def fail(self, error: BaseException) -> None:
        """Stop with ``error``: the consumer's :meth:`get` raises it, producers get :class:`Cancelled`."""
        with self._cond:
            if self._error is None:
                self._error = error
            self._cond.notify_all()
            self._wake_writers(everyone=True)

    def cancel(self) -> None:
        """Stop everything (the consumer is gone); waiting producers get :class:`Cancelled`."""
        with self._cond:
            self._cancelled = True
            self._items.clear()
            self._cond.notify_all()
            self._wake_writers(everyone=True)

    # ------------------------------------------------------------------------------- consumer

    def get(self, timeout: float | None = None) -> tuple[int, Any] | None:
        """The next ``(position, item)`` in order (``item`` is :data:`MISSING` for a skipped
        position), or ``None`` at the end. Raises the error given to :meth:`fail`, or
        ``TimeoutError`` after ``timeout`` seconds."""
        run = self.get_ready(1, timeout)
        return None if run is None else run[0]

    def get_ready(self, limit: int, timeout: float | None = None) -> "list[tuple[int, Any]] | None":
        """The items ready in order from the consumer's position, at least one and at most
        ``limit`` (waits like :meth:`get`), or ``None`` at the end: one wake-up per run of
        positions instead of one per position. Positions taken count as consumed (writers may
        run ``capacity`` ahead of them), so take no more than you process at once."""
        with self._cond:
            ok = self._cond.wait_for(
                lambda: (
                    self._error is not None
                    or self._cancelled
                    or self._next in self._items
                    or (self._end is not None and self._next >= self._end)
                ),
                timeout,
            )
            if self._error is not None:
                raise self._error
            if self._cancelled:
                return None
            if not ok:
                raise TimeoutError(f"position {self._next} not delivered after {timeout}s")
            out: list[tuple[int, Any]] = []
            store, p = self._items, self._next
            stop = p + max(1, limit)
            while p < stop and p in store:
                item = store.pop(p)
                if item is MISSING:
                    self.missing += 1
                out.append((p, item))
                p += 1
            if not out:
                return None
            self._next = p
            self._wake_writers()
            return out

    def __len__(self) -> int:
        """Items held now."""
        with self._cond:
            return len(self._items)
