"""Idle NVDEC sessions kept for reuse across decoders and files.

Starting an NVDEC session is expensive and serialized: the hardware decoder is created when the
first sequence header is parsed, about 50 ms each on an H200, and the driver creates them one at
a time (28 sessions started together: the last one decodes its first frame after 1.5 s). A file
split across 14 sessions would spend longer starting them than decoding a 40-second clip. So a
session that finished its segments cleanly (drained, no error) goes back to this pool, keyed by
GPU, codec, bit depth, profile and frame size, and the next decoder of such a stream takes it,
already initialized. A session that raised is never pooled.

Idle sessions hold their decoder surfaces (about 20-170 MB each depending on the size):
:func:`clear` releases them; ``max_idle`` bounds how many are kept per key.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["SessionPool", "POOL", "clear"]

logger = logging.getLogger(__name__)


class SessionPool:
    """Sessions by key, most recently used first. Thread-safe."""

    def __init__(self, max_idle: int = 32) -> None:
        self.max_idle = max_idle
        self._idle: dict[Hashable, list[Any]] = {}
        self._lock = threading.Lock()
        self.created = 0
        self.reused = 0

    def acquire(self, key: Hashable, factory: Callable[[], Any]) -> Any:
        """An idle session of ``key``, or a new one from ``factory()``."""
        with self._lock:
            idle = self._idle.get(key)
            if idle:
                self.reused += 1
                return idle.pop()
            self.created += 1
        return factory()

    def release(self, key: Hashable, session: Any, destroy: Callable[[Any], None]) -> None:
        """Keep ``session`` for reuse (``destroy(session)`` when the pool is full)."""
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if len(idle) < self.max_idle:
                idle.append(session)
                return
        destroy(session)

    def idle(self, key: Hashable | None = None) -> int:
        """Idle sessions (of ``key``, or in total)."""
        with self._lock:
            if key is not None:
                return len(self._idle.get(key, ()))
            return sum(len(v) for v in self._idle.values())

    def clear(self, destroy: Callable[[Any], None] | None = None) -> int:
        """Drop every idle session; returns how many."""
        with self._lock:
            sessions = [s for v in self._idle.values() for s in v]
            self._idle.clear()
        for s in sessions:
            if destroy is not None:
                destroy(s)
        if sessions:
            logger.debug("released %d idle NVDEC sessions", len(sessions))
        return len(sessions)


#: the process-wide pool used by :class:`~vidpipe.decode.nvdec.NvdecDecoder`
POOL = SessionPool()


def clear() -> int:
    """Release every idle NVDEC session of the process (their GPU memory returns to the driver)."""
    return POOL.clear(lambda s: s.destroy())
