"""The GPU memory of one :class:`~vidpipe.pipeline.DetectionRun`: its ``max_gpu_memory`` plan
(:mod:`vidpipe.gpu_memory`), the allocator cap while it runs, and what it held (for the summary)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from vidpipe.gpu_memory import NOMINAL_FRAME, GpuMemoryPlan, mib

if TYPE_CHECKING:
    from vidpipe.models.detector import Detector
    from vidpipe.pipeline_config import PipelineConfig

logger = logging.getLogger("vidpipe.pipeline")

__all__ = ["RunMemory"]


def _frame_sizes(specs: Sequence[Any], size: tuple[int, int]) -> tuple[int, int, int]:
    """``(nv12_bytes, rgb_bytes, scratch_bytes)`` of the largest frame among the inputs (the last:
    the NV12 letterbox's float32 work buffer per frame, source height x width resized into
    ``size``): files are probed (their header only); other inputs count as
    :data:`~vidpipe.gpu_memory.NOMINAL_FRAME`."""
    from vidpipe.decode.probe import probe
    from vidpipe.ops.letterbox import letterbox_geometry

    nv12, rgb, scratch = 0, 0, 0
    for item in specs:
        spec = getattr(item, "spec", item)
        h, w, deep = *NOMINAL_FRAME, False
        if getattr(spec, "kind", None) == "file":
            try:
                info = probe(spec.location)
                h, w, deep = info.height, info.width, info.bit_depth > 8
            except Exception:  # noqa: BLE001 - the source reports its own error when it opens
                pass
        nv12 = max(nv12, (h * 3 // 2) * w * (2 if deep else 1))
        rgb = max(rgb, 3 * h * w)
        scratch = max(scratch, 3 * h * letterbox_geometry(h, w, *size).new_w * 4)
    if not nv12:  # no inputs
        return _frame_sizes([None], size)  # a nominal frame
    return nv12, rgb, scratch


class RunMemory:
    """``max_gpu_memory`` for one run on one device.

    Made before the run's batcher (the plan may lower the batch): :meth:`adjust` gives the
    config the run uses; :meth:`start` caps PyTorch's allocator at the budget (and restarts its
    peak counters), :meth:`stop` lifts the cap; :meth:`report` is the summary's ``gpu_memory``.
    Without a budget, or off the GPU, it only reports what the run held.
    """

    def __init__(self, detector: "Detector", config: "PipelineConfig", specs: Sequence[Any]) -> None:
        from vidpipe.gpu_memory import parse_gpu_memory

        self.device = detector.device
        self.plan: GpuMemoryPlan | None = None
        self._before: Any = None
        self._capped = False
        self._peaks: dict[str, int] = {}
        limit = parse_gpu_memory(config.max_gpu_memory)
        if self.device.type != "cuda":
            if limit is not None:
                logger.info("max_gpu_memory is ignored on %s", self.device)
            return
        if limit is not None:
            self.plan = self._make_plan(limit, detector, config, specs)
            logger.info("gpu memory: %s", self.plan.describe())

    def _make_plan(self, limit: "int | float", detector: "Detector", config: "PipelineConfig",
                   specs: Sequence[Any]) -> GpuMemoryPlan:  # fmt: skip
        import torch

        from vidpipe.decode.nvdec import default_buffer_bytes
        from vidpipe.gpu_memory import measure_model, plan_gpu_memory, resolve_budget

        index = self.device.index if self.device.index is not None else torch.cuda.current_device()
        total = torch.cuda.get_device_properties(index).total_memory
        budget = resolve_budget(limit, total)
        held, fixed, per_frame = measure_model(detector, self.device)
        h, w = detector.input_size
        nv12, rgb, scratch = _frame_sizes(specs, (h, w))
        if config.decoder == "pyav" or detector.scratch.nbytes >= config.batch_size * scratch:
            scratch = 0  # RGB frames (no NV12 letterbox), or an earlier run's work buffer, in ``held``
        return plan_gpu_memory(
            budget, total=total, batch_size=config.batch_size, held=held, act_fixed=fixed, act_per_frame=per_frame,
            cuda_graph=config.accel == "auto", input_frame_bytes=3 * h * w * detector.dtype.itemsize,
            decode_frame_bytes=nv12, source_frame_bytes=rgb,
            open_sources=min(max(1, len(specs)), config.max_open_sources), queue_depth=config.queue_depth,
            keep_frames=config.keep_frames,
            decode_cap=default_buffer_bytes(self.device), in_flight=config.batches_in_flight,
            scratch_frame_bytes=scratch,
        )  # fmt: skip

    def adjust(self, config: "PipelineConfig") -> "PipelineConfig":
        """``config`` with the plan's batch and decode window (unchanged without a plan)."""
        if self.plan is None:
            return config
        return dataclasses.replace(config, batch_size=self.plan.batch_size, decode_buffer_bytes=self.plan.decode_bytes)

    def start(self) -> None:
        """With a plan: cap the allocator at the budget and restart its peak counters."""
        if self.device.type != "cuda":
            return
        import torch

        from vidpipe.gpu_memory import cap_allocator

        if self.plan is not None:
            self._before = cap_allocator(self.plan.budget, self.device)
            self._capped = True
            torch.cuda.reset_peak_memory_stats(self.device)  # the run's peaks (only when bounded)

    def stop(self) -> None:
        """Record the peaks and lift the cap (idempotent)."""
        if self.device.type != "cuda":
            return
        from vidpipe.gpu_memory import restore_allocator

        if not self._peaks:
            self._peaks = self._measure()
        if self._capped:
            self._capped = False
            restore_allocator(self._before, self.device)

    def _measure(self) -> dict[str, int]:
        """With a budget: the allocator's peaks since the run started; without one (the peak
        counters belong to the caller then): what it holds now. With both, the decoder processes'
        rings held now (driver memory outside the allocator, :mod:`vidpipe.decode.ipc_memory`)."""
        import torch

        from vidpipe.decode.ipc_memory import exported_bytes

        gpu = self.device.index if self.device.index is not None else torch.cuda.current_device()
        if self.plan is not None:
            out = {"peak_reserved": torch.cuda.max_memory_reserved(self.device),
                   "peak_allocated": torch.cuda.max_memory_allocated(self.device)}  # fmt: skip
        else:
            out = {"reserved": torch.cuda.memory_reserved(self.device),
                   "allocated": torch.cuda.memory_allocated(self.device)}  # fmt: skip
        return out | {"decode_rings": exported_bytes(gpu)}

    def report(self) -> dict[str, Any] | None:
        """The summary's ``gpu_memory`` (``None`` off the GPU): the budget, the plan's parts (MiB
        and why) and the allocator's peaks since the run started; without a budget, what the
        allocator held at the end."""
        if self.device.type != "cuda":
            return None
        peaks = self._peaks or self._measure()
        out: dict[str, Any] = self.plan.to_dict() if self.plan is not None else {"budget_mib": None}
        out.update({f"{k}_mib": mib(v) for k, v in peaks.items()})
        out["not_counted"] = "the CUDA context and NVDEC's decoder surfaces (driver memory, outside PyTorch)"
        return out
