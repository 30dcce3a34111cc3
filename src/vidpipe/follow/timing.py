"""Milliseconds per frame of a step: host wall time, or GPU time through CUDA events (resolved
when read, never forcing a synchronisation per frame); and :class:`TimedStage`, a stage wrapped
to report its own ms per frame (the tracker's, for the follow command's timings)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from vidpipe.stages.base import Stage
    from vidpipe.types import FrameResult

__all__ = ["StepClock", "TimedStage"]


class StepClock:
    """Accumulated time of one step over frames."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.frames = 0
        self._events: deque = deque()  # (start, end, frames): CUDA work not resolved yet

    def add(self, seconds: float, frames: int = 1) -> None:
        self.seconds += seconds
        self.frames += frames

    def add_cuda(self, start: "torch.cuda.Event", end: "torch.cuda.Event", frames: int = 1) -> None:
        """GPU time between two recorded events (read later; at most 128 wait unresolved)."""
        self._events.append((start, end, frames))
        if len(self._events) > 128:
            self._resolve(keep=64, block=True)

    def _resolve(self, *, keep: int = 0, block: bool = False) -> None:
        while len(self._events) > keep:
            start, end, frames = self._events[0]
            if block:
                end.synchronize()
            elif not end.query():
                break
            self._events.popleft()
            self.add(start.elapsed_time(end) / 1e3, frames)

    def ms_per_frame(self, *, final: bool = False) -> float | None:
        """Mean ms per frame so far (``final``, or nothing resolved yet: waits for the GPU)."""
        self._resolve(block=final or (not self.frames and bool(self._events)))
        return round(1e3 * self.seconds / self.frames, 4) if self.frames else None


class TimedStage:
    """``stage`` as is, plus its host ms per frame in its report (``ms_per_frame``)."""

    def __init__(self, stage: "Stage") -> None:
        self.stage = stage
        self.name = stage.name
        self.needs_frames = stage.needs_frames
        self.clock = StepClock()

    def process(self, results: "Sequence[FrameResult]") -> "Sequence[FrameResult]":
        t0 = time.perf_counter()
        out = self.stage.process(results)
        self.clock.add(time.perf_counter() - t0, len(results))
        return out

    def reset(self, stream_id: int) -> None:
        self.stage.reset(stream_id)

    def report(self) -> Mapping[str, Any]:
        rep = dict(self.stage.report())
        if self.clock.frames:
            rep["ms_per_frame"] = self.clock.ms_per_frame()
        return rep

    def close(self) -> None:
        self.stage.close()
