"""The progress bar of ``vidpipe detect`` (tqdm, on stderr).

The bar starts with the first batch of results, not when the command starts: model loading,
warm-up and the first decode would otherwise count as processing time and the first estimate
would be hours (``1:12:08`` for a 40-second job). Its total is the sum of the inputs' frame
counts once every input has reported one.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vidpipe.pipeline import DetectionRun

__all__ = ["progress"]


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


class _Bar:
    def __init__(self, det_run: "DetectionRun") -> None:
        self._run = det_run
        self._bar: Any = None

    def _total(self) -> int | None:
        known = [st.expected_frames for st in self._run.states]
        return sum(known) if known and all(k is not None for k in known) else None  # type: ignore[misc]

    def update(self, n: int) -> None:
        total = self._total()
        if self._bar is None:
            from tqdm import tqdm

            # initial=n: the first batch sets the start; the rate comes from the batches after it
            self._bar = tqdm(
                total=total, initial=n, unit="frame", dynamic_ncols=True, file=sys.stderr, smoothing=0.3
            )
            return
        if total is not None and self._bar.total != total:
            self._bar.total = total
            self._bar.refresh()
        self._bar.update(n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def progress(det_run: "DetectionRun", *, enabled: bool) -> "_Bar | _NoBar":
    """A bar over the frames of ``det_run``, or a no-op when ``enabled`` is False."""
    return _Bar(det_run) if enabled else _NoBar()
