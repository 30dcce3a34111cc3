"""Ctrl-C and SIGTERM during ``vidpipe detect``: stop cleanly, keep every result.

The first SIGINT (Ctrl-C) or SIGTERM asks the run to stop (:meth:`DetectionRun.stop`): the
readers stop, the batch being detected is still delivered and written, the outputs are finalised
as partial, and the command exits 130 (SIGINT) or 143 (SIGTERM). A second signal raises
``KeyboardInterrupt`` at once; the outputs still keep every row written so far.
"""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType
from typing import Any, Callable

logger = logging.getLogger("vidpipe.cli")

__all__ = ["StopOnSignal"]

_SIGNALS = tuple(s for s in (getattr(signal, "SIGINT", None), getattr(signal, "SIGTERM", None)) if s is not None)


class StopOnSignal:
    """Context manager: while active, SIGINT/SIGTERM call ``stop()`` once, then interrupt.

    Attributes:
        signal_name: ``"SIGINT"`` / ``"SIGTERM"`` once a signal arrived, else ``None``.
        exit_code: ``128 + signal number`` once a signal arrived, else ``None``.
    """

    def __init__(self, stop: Callable[[], None]) -> None:
        self._stop = stop
        self._previous: dict[int, Any] = {}
        self.signal_name: str | None = None
        self.exit_code: int | None = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signal_name is not None:  # second signal: stop at once
            raise KeyboardInterrupt
        self.signal_name = signal.Signals(signum).name
        self.exit_code = 128 + signum
        self._stop()
        logger.warning(
            "%s: stopping; writing the frames already detected (press Ctrl-C again to quit at once)",
            self.signal_name,
        )

    def __enter__(self) -> "StopOnSignal":
        if threading.current_thread() is threading.main_thread():
            for sig in _SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
