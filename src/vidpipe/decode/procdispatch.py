"""Which segments of a decoder-process run each child has (:mod:`vidpipe.decode.procrun`).

Segments go out in stream order, a few ahead per child; a dead child's segments go back to the
front of the line, with the positions it delivered, to be decoded again by another child (or by
threads in the parent, :meth:`Dispatch.rest`). The end of the list is sent only once every
segment is done.

Threads in the parent that decode while the decoder processes still start (:data:`LOCAL`) take
their segments one at a time from the same line (:meth:`Dispatch.take`), until the processes
are there.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vidpipe.decode.proclease import Lease
    from vidpipe.decode.segments import DecodePlan

__all__ = ["Dispatch", "LOCAL"]

#: the number of the parent's own threads in a run's messages and its dispatch (children are
#: ``0, 1, ...``)
LOCAL = -1


class Dispatch:
    """Segments given out to children, and what each has in flight.

    The end of the list is sent only once every segment is done: until then a child that dies
    can hand its segments to children still listening (:meth:`requeue`)."""

    def __init__(self, lease: "Lease | None", plan: "DecodePlan", job: int) -> None:
        self.lease = lease
        self.plan = plan
        self.job = job
        self.next = 0
        self.again: deque[tuple[int, tuple[int, ...]]] = deque()  # (segment, positions delivered)
        # segments each child (and LOCAL: the parent's threads) has and has not finished
        self.inflight: dict[int, set[int]] = {i: set() for i in range(len(lease.conns) if lease is not None else 0)}
        self.inflight[LOCAL] = set()
        self.ended: set[int] = set()  # children sent the end of the list
        self.lock = threading.Lock()

    def add_child(self, lease: "Lease | None" = None) -> None:
        """A child joined the lease (:meth:`~vidpipe.decode.proclease.Lease.grow`): the lease's
        next position. ``lease``: the first children of a run that started without any."""
        with self.lock:
            if lease is not None:
                self.lease = lease
            self.inflight[len(self.inflight) - 1] = set()  # (LOCAL is one of the keys)

    def left(self) -> int:
        """Segments not given to any child yet."""
        with self.lock:
            return len(self.plan.segments) - self.next + len(self.again)

    def take(self, child: int = LOCAL) -> tuple[int, tuple[int, ...]] | None:
        """The next segment for ``child`` to decode itself (the parent's threads: no message),
        with the positions already delivered of a segment decoded again; ``None``: none left."""
        with self.lock:
            if self.again:
                s, have = self.again.popleft()
            elif self.next < len(self.plan.segments):
                s, have = self.next, ()
                self.next += 1
            else:
                return None
            self.inflight[child].add(s)
            return s, have

    def give(self, child: int) -> None:
        """Send child ``child`` the next segment (one to decode again first); the end of the
        list to every child once all are done."""
        with self.lock:
            have: tuple[int, ...] | None = None
            if self.again:
                s, have = self.again.popleft()
            elif self.next < len(self.plan.segments):
                s = self.next
                self.next += 1
            else:
                s = None
            if s is not None:
                self.inflight[child].add(s)
        if s is None:
            self.end_if_done()
            return
        msg = ("seg", self.job, s) if have is None else ("redo", self.job, s, have)
        if not self.lease.send(child, msg):
            with self.lock:  # the child is gone before it got it: another one decodes it
                self.inflight[child].discard(s)
                self.again.append((s, have or ()))

    def end_if_done(self) -> None:
        with self.lock:
            if self.again or self.next < len(self.plan.segments) or any(self.inflight.values()):
                return
            children = [i for i in self.inflight if i != LOCAL and i not in self.ended]
            self.ended.update(children)
        for i in children:
            self.lease.send(i, ("seg", self.job, None))

    def done(self, child: int, s: int) -> None:
        with self.lock:
            self.inflight[child].discard(s)

    def requeue(self, child: int, got: set[int]) -> tuple[list[int], int]:
        """The dead ``child``'s segments (its in flight and not yet started), to be decoded
        again, earliest first, without the positions already delivered (``got``); returns them
        and how many positions of them were delivered."""
        with self.lock:
            gone = sorted(self.inflight[child])
            self.inflight[child].clear()
            redo = [(s, tuple(p for p in range(*self.plan.segments[s].positions) if p in got)) for s in gone]
            self.again = deque(sorted([*redo, *self.again]))
            return gone, sum(len(h) for _, h in redo)

    def rest(self) -> list[tuple[int, tuple[int, ...]]]:
        """Every segment not yet done nor in flight (the caller decodes them), in order."""
        with self.lock:
            out = [*sorted(self.again), *((s, ()) for s in range(self.next, len(self.plan.segments)))]
            self.again.clear()
            self.next = len(self.plan.segments)
            return out
