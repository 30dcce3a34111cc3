"""Run statistics: per-stage latency, throughput, CPU %, GPU memory and utilisation.

:class:`PipelineStats` is filled by the pipeline's threads (thread-safe) and read with
:meth:`PipelineStats.snapshot` (what :meth:`vidpipe.pipeline.DetectionRun.get_stats` returns).

Stage times are host wall time per stage, except GPU stages timed with CUDA events (resolved
lazily, never forcing a synchronisation). NVDEC and GPU utilisation come from NVML when
``nvidia-ml-py`` is installed; without it those fields are ``None``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

__all__ = ["PipelineStats", "StageTimer", "nvml_utilisation"]


@dataclass
class StageTimer:
    """Accumulated time of one stage over ``frames`` frames."""

    seconds: float = 0.0
    frames: int = 0
    calls: int = 0

    def ms_per_frame(self) -> float | None:
        return 1e3 * self.seconds / self.frames if self.frames else None


class PipelineStats:
    """Counters shared by the pipeline's threads."""

    def __init__(self, device: Any = None) -> None:
        self.device = device
        self._lock = threading.Lock()
        self._stages: dict[str, StageTimer] = {}
        self._events: deque = deque()  # (stage, start_event, end_event, frames) awaiting resolution
        self.frames = 0
        self.detections = 0
        self.d2h_bytes = 0
        self.start()

    def start(self) -> None:
        """Start the wall-clock and CPU-time measurement (the run's start)."""
        self._t0 = time.perf_counter()
        self._cpu0 = time.process_time()

    def add(self, stage: str, seconds: float, frames: int) -> None:
        with self._lock:
            t = self._stages.setdefault(stage, StageTimer())
            t.seconds += seconds
            t.frames += frames
            t.calls += 1

    @contextlib.contextmanager
    def time(self, stage: str, frames: int) -> Iterator[None]:
        """Host wall time of the block, charged to ``stage``."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(stage, time.perf_counter() - t0, frames)

    @contextlib.contextmanager
    def time_gpu(self, stage: str, frames: int, stream: Any) -> Iterator[None]:
        """GPU time of the work the block queues on ``stream`` (CUDA events, resolved later)."""
        import torch

        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(stream)
        try:
            yield
        finally:
            end.record(stream)
            with self._lock:
                self._events.append((stage, start, end, frames))
                if len(self._events) > 256:
                    self._resolve_locked(block=True, keep=128)

    def _resolve_locked(self, *, block: bool = False, keep: int = 0) -> None:
        while len(self._events) > keep:
            stage, start, end, frames = self._events[0]
            if not block and not end.query():
                break
            if block:
                end.synchronize()
            self._events.popleft()
            t = self._stages.setdefault(stage, StageTimer())
            t.seconds += start.elapsed_time(end) / 1e3
            t.frames += frames
            t.calls += 1

    def snapshot(self) -> dict[str, Any]:
        """A JSON-safe dict: fps, per-stage ms/frame, CPU %, GPU memory and utilisation."""
        with self._lock:
            self._resolve_locked()
            wall = time.perf_counter() - self._t0
            cpu = time.process_time() - self._cpu0
            out: dict[str, Any] = {
                "frames": self.frames,
                "detections": self.detections,
                "seconds": wall,
                "fps": self.frames / wall if wall > 0 else 0.0,
                "cpu_percent": 100.0 * cpu / wall if wall > 0 else 0.0,
                "cpu_cores": os.cpu_count(),
                "d2h_bytes": self.d2h_bytes,
                "d2h_bytes_per_frame": self.d2h_bytes / self.frames if self.frames else 0.0,
                "stages_ms_per_frame": {k: v.ms_per_frame() for k, v in self._stages.items()},
            }
        out.update(_gpu_memory(self.device))
        out.update(nvml_utilisation(self.device))
        return out


def _gpu_memory(device: Any) -> dict[str, Any]:
    if device is None or getattr(device, "type", "cpu") != "cuda":
        return {"gpu_memory_mib": None, "gpu_peak_memory_mib": None}
    import torch

    return {
        "gpu_memory_mib": torch.cuda.memory_allocated(device) / 2**20,
        "gpu_peak_memory_mib": torch.cuda.max_memory_allocated(device) / 2**20,
    }


def nvml_utilisation(device: Any) -> dict[str, Any]:
    """GPU and NVDEC utilisation in percent from NVML (``None`` without nvidia-ml-py or a GPU)."""
    empty = {"gpu_util_percent": None, "nvdec_util_percent": None}
    if device is None or getattr(device, "type", "cpu") != "cuda":
        return empty
    try:
        import pynvml
    except Exception:  # noqa: BLE001 - optional
        return empty
    try:
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(device.index or 0)
        util = pynvml.nvmlDeviceGetUtilizationRates(handle)
        dec, _period = pynvml.nvmlDeviceGetDecoderUtilization(handle)
        return {"gpu_util_percent": float(util.gpu), "nvdec_util_percent": float(dec)}
    except Exception as exc:  # noqa: BLE001 - NVML errors must not break a run
        logger.debug("NVML query failed: %s", exc)
        return empty
