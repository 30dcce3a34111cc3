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
import math
import threading
from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["SessionPool", "POOL", "clear", "sessions_worth_starting", "SESSION_PAYBACK_FRAMES"]

logger = logging.getLogger(__name__)

#: frames a new session must have ahead of it to pay for its start, as ``sessions = sqrt(frames /
#: SESSION_PAYBACK_FRAMES)``: a session starts in about 50 ms, serialized by the driver, and decodes
#: about 650 1080p frames/s alone, so ``k`` new sessions cost about ``0.05 k + frames / (650 k)``
#: seconds, least at ``k = sqrt(frames / 32.5)``. Measured on an H200 in fresh processes (1080p
#: H.264, decode only, seconds for k = 1 / 2 / 4 / 8 / 21 sessions): 150 frames 0.32 / 0.28 / 0.31 /
#: 0.38 / 0.41; 600 frames 0.98 / 0.72 / 0.51 / 0.54 / 1.22; 2,400 frames 3.70 / 2.13 / 1.35 / 0.99 /
#: 1.55 (the rule gives 2, 4 and 9)
SESSION_PAYBACK_FRAMES = 32.5


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


def sessions_worth_starting(frames: int, *, idle: int, most: int) -> int:
    """Sessions to decode ``frames`` frames with, at most ``most``, when ``idle`` initialized
    sessions wait in the pool: all of those (they cost nothing more), and new ones only as far as
    their start pays (:data:`SESSION_PAYBACK_FRAMES`). At least one."""
    new = max(1, round(math.sqrt(max(0, frames) / SESSION_PAYBACK_FRAMES)))
    return max(1, min(most, max(idle, new)))
