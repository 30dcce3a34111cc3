"""Milliseconds per frame of a step: host wall time, or GPU time through CUDA events (resolved
when read, never forcing a synchronisation per frame); :class:`TimedStage`, a stage wrapped to
report its own ms per frame (the tracker's); and :func:`pipeline_timings`, the follow pipeline's
per-stage ms per frame (decode, inference, tracking, camera, encode)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from vidpipe.follow.stage import FollowStage
    from vidpipe.pipeline import DetectionRun
    from vidpipe.stages.base import Stage
    from vidpipe.types import FrameResult

__all__ = ["StepClock", "TimedStage", "pipeline_timings", "format_timings"]


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

    def warm_up(self) -> None:
        warm = getattr(self.stage, "warm_up", None)
        if warm is not None:
            warm()

    def report(self) -> Mapping[str, Any]:
        rep = dict(self.stage.report())
        if self.clock.frames:
            rep["ms_per_frame"] = self.clock.ms_per_frame()
        return rep

    def close(self) -> None:
        self.stage.close()


def pipeline_timings(det_run: "DetectionRun", tracker: "TimedStage | None", follow: "FollowStage",
                     writer: Any = None) -> dict[str, float | None]:  # fmt: skip
    """ms per frame of each step of the follow pipeline: ``decode``, ``inference`` (preprocess,
    model and postprocess), ``tracking``, ``camera`` (plan + render), ``encode`` (the writer's
    ``encode_ms_per_frame``), from the run's stats and the stages' and writer's reports."""
    stages = det_run.get_stats().get("stages_ms_per_frame", {})

    def total(*keys: str) -> float | None:
        vals = [stages[k] for k in keys if stages.get(k) is not None]
        return round(sum(vals), 3) if vals else None

    plan, render = follow.plan.ms_per_frame(), follow.render.ms_per_frame()
    camera = None if plan is None and render is None else round((plan or 0.0) + (render or 0.0), 3)
    encode = None
    if writer is not None:
        try:
            encode = writer.report().get("encode_ms_per_frame")
        except Exception:  # noqa: BLE001 - timings never stop a run
            encode = None
    return {
        "decode": total("decode"),
        "inference": total("preprocess", "model", "postprocess"),
        "tracking": tracker.clock.ms_per_frame() if tracker is not None else None,
        "camera": camera,
        "encode": None if encode is None else round(float(encode), 3),
    }


def format_timings(t: "dict[str, float | None]") -> str:
    """``decode 1.20, inference 5.00, ...`` (``-``: not measured)."""
    return ", ".join(f"{k} {'-' if v is None else f'{v:.2f}'}" for k, v in t.items())
