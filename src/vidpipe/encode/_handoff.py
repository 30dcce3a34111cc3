"""The caller's side of both writers (:class:`~vidpipe.encode.VideoWriter`,
:class:`~vidpipe.encode.process.ProcessVideoWriter`): frames handed to the writer's thread
through a bounded queue, device frames copied into pinned host buffers first, and the time the
caller spent waiting for either.

Queue items are ``((tensor, buf, event), pts)``: ``buf`` a pinned buffer (``event`` marks the end
of the copy into it) or host planes (``event`` ``None``), ``tensor`` kept alive until then.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = ["Handoff", "STOP"]

STOP = object()  # the queue's last item: finish the output


def _nothing() -> None:
    pass


class Handoff:
    """A writer's bounded frame queue and pinned buffers.

    Args:
        frames: frames that may wait in the queue.
        check: called while the caller waits; raises when the writer has failed.
        waiting: called on each 0.1 s the caller waits (a live target's stall check).
        failed: whether the writer has failed (:meth:`finish` then stops trying).
    """

    def __init__(self, frames: int, *, check: Callable[[], None], failed: Callable[[], bool],
                 waiting: Callable[[], None] = _nothing) -> None:  # fmt: skip
        self.queue: queue.Queue = queue.Queue(maxsize=frames)
        self._frames = frames
        self._pinned: queue.Queue | None = None
        self._check, self._failed, self._waiting = check, failed, waiting
        self.blocked_writes = 0  # times the caller waited (a full queue, no free pinned buffer)
        self.blocked_s = 0.0

    def to_host(self, device: "torch.Tensor") -> tuple:
        """``(device, buf, event)``: an asynchronous copy of ``device`` into a pinned buffer (a pool
        of ``frames + 2``: queued, one being written out, one being filled), recorded on the
        current CUDA stream."""
        import torch

        if self._pinned is None:
            self._pinned = queue.Queue()
            for _ in range(self._frames + 2):
                self._pinned.put(torch.empty(device.shape, dtype=torch.uint8, pin_memory=True))
        pinned = self._pinned
        buf = self._wait(pinned.get_nowait, lambda: pinned.get(timeout=0.1))
        buf.copy_(device, non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        return (device, buf, event)

    def put(self, item: Any) -> None:
        """Queue ``item``; waits only while the queue is full."""
        self._wait(lambda: self.queue.put_nowait(item), lambda: self.queue.put(item, timeout=0.1))

    def recycle(self, data: tuple) -> None:
        """``data``'s pinned buffer (if it has one) is free again."""
        if data[1] is not None and data[2] is not None and self._pinned is not None:
            self._pinned.put(data[1])

    def drain(self, closed: Callable[[], bool]) -> None:
        """After a failure, on the writer's thread: take (and recycle) what comes until
        :data:`STOP`, or until the queue stays empty once ``closed()``."""
        while True:
            try:
                item = self.queue.get(timeout=0.5)
            except queue.Empty:
                if closed():
                    return
                continue
            if item is STOP:
                return
            self.recycle(item[0])

    def finish(self, alive: Callable[[], bool]) -> None:
        """Queue :data:`STOP` while the writer's thread is ``alive()`` (gives up once it failed)."""
        while alive():
            try:
                self.queue.put(STOP, timeout=0.1)
                return
            except queue.Full:
                self._waiting()
                if self._failed():
                    return

    def _wait(self, now: Callable[[], Any], later: Callable[[], Any]) -> Any:
        try:
            return now()
        except (queue.Empty, queue.Full):
            pass
        t0 = time.perf_counter()
        self.blocked_writes += 1
        try:
            while True:
                self._check()
                try:
                    return later()
                except (queue.Empty, queue.Full):
                    self._waiting()
        finally:
            self.blocked_s += time.perf_counter() - t0
