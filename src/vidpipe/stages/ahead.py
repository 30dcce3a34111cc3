"""Overlap the stages with detection: the model's loop runs one step ahead on a thread of its own.

Stages (a tracker, zones, crops) run on the thread that iterates the run. Without this, their
time adds to the model's: the model's loop (launch a batch, finish the previous one) waits while
the stages process each batch. :func:`run_ahead` moves the model's loop to a thread that keeps up
to ``depth`` finished batches waiting, so the next batches are detected while the caller's
thread runs the stages on this one (the model's loop mostly waits on the GPU, without the GIL).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any, TypeVar

__all__ = ["run_ahead"]

T = TypeVar("T")

_POLL_S = 0.1
_END = object()


def run_ahead(items: Iterator[T], *, depth: int = 2, name: str = "vidpipe-ahead") -> Iterator[T]:
    """Iterate ``items`` on a thread of its own, up to ``depth`` items ahead of the caller.

    An exception raised by ``items`` is raised here, in the caller's thread, after the items
    before it. Closing the returned generator (the caller stops early) stops the thread after
    its current item and closes ``items`` there."""
    box: queue.Queue = queue.Queue(maxsize=max(1, depth))
    stop = threading.Event()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                box.put(item, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put(("item", item)):
                    break
        except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread
            put(("error", exc))
            return
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()
        put(("end", None))

    thread = threading.Thread(target=produce, name=name, daemon=True)
    thread.start()
    try:
        while True:
            try:
                kind, value = box.get(timeout=_POLL_S)
            except queue.Empty:
                if not thread.is_alive() and box.empty():
                    return  # ended without a word (cannot happen unless it was stopped)
                continue
            if kind == "item":
                yield value
            elif kind == "error":
                raise value
            else:
                return
    finally:
        stop.set()
        thread.join(timeout=10)
