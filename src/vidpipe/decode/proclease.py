"""Some of a decoder-process pool's children, taken for one decode: :class:`Lease`.

A pool (:class:`~vidpipe.decode.procpool.DecoderProcessPool`) lends its free children out in
disjoint leases (:meth:`~vidpipe.decode.procpool.DecoderProcessPool.lease`), so several files
decode in processes at the same time, each child serving one decode at a time. A lease is what a
run (:mod:`vidpipe.decode.procrun`, its :class:`~vidpipe.decode.procdispatch.Dispatch` and its
:class:`~vidpipe.decode.procring.Ring`) sees of the pool: its own children, numbered ``0`` to
``k - 1``, and nothing of the others. A lease may grow while its decode runs
(:meth:`Lease.grow`: children another file gave back); new children get the next numbers.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from vidpipe.decode.base import StreamInfo
    from vidpipe.decode.procpool import DecoderProcessPool
    from vidpipe.decode.procring import Ring

__all__ = ["Lease"]


class Lease:
    """The pool's children ``children`` (pool numbers), lent to one decode until
    :meth:`release` (or the end of a ``with`` block). Numbers in its methods are positions in
    ``children``."""

    def __init__(self, pool: "DecoderProcessPool", children: tuple[int, ...]) -> None:
        self.pool = pool
        self.children = children
        self.conns: list[Any] = [pool.conns[i] for i in children]
        self._released = False
        self.made = time.monotonic()  # (grow takes only children given back after this)

    def grow(self, *, most: int, idle_s: float) -> list[int]:
        """Take up to ``most`` more of the pool's children: those another decode gave back since
        this lease was made, free for ``idle_s`` seconds or more; returns their positions in this
        lease (``[]``: none). They are given back with the rest."""
        if self._released:
            return []
        more = self.pool.lend_idle(most=most, idle_s=idle_s, since=self.made)
        first = len(self.children)
        self.children = (*self.children, *more)
        self.conns.extend(self.pool.conns[i] for i in more)
        return list(range(first, len(self.children)))

    def __repr__(self) -> str:
        return f"Lease(children={self.children}, device={self.pool.device!r})"

    @property
    def alive(self) -> list[bool]:
        return [self.pool.alive[i] for i in self.children]

    @property
    def size(self) -> int:
        """Children of the lease still running."""
        return sum(self.alive)

    @property
    def closing(self) -> bool:
        return self.pool.closing

    def break_pool(self) -> None:
        """The pool cannot be trusted any more (children that did not stop): it is replaced."""
        self.pool.broken = True

    def send(self, i: int, msg: tuple, fds: tuple[int, ...] = ()) -> bool:
        """:meth:`DecoderProcessPool.send` to the lease's child ``i``."""
        return self.pool.send(self.children[i], msg, fds)

    def broadcast(self, msg: tuple, fds: tuple[int, ...] = ()) -> None:
        for i in range(len(self.children)):
            self.send(i, msg, fds)

    def mark_dead(self, i: int) -> None:
        self.pool.mark_dead(self.children[i])

    def ring(self, shape: tuple[int, ...], dtype: "torch.dtype", slots: int, device: "torch.device") -> "Ring":
        """The shared batch buffers of this layout for these children (kept across decodes)."""
        return self.pool.ring_for(self, shape, dtype, slots, device)

    def warm(self, info: "StreamInfo", sessions: int) -> None:
        """Have ``sessions`` pooled NVDEC sessions for this kind of stream in each child."""
        self.pool.warm(info, sessions, children=self.children)

    def release(self) -> None:
        """Give the children back to the pool (once; later calls do nothing)."""
        if not self._released:
            self._released = True
            self.pool.give_back(self.children)

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
