"""What a :class:`~vidpipe.pipeline.DetectionRun` reports: its live :meth:`status` (JSON-able,
for ``/status``, metrics and terminal tables) and its :class:`~vidpipe.summary.RunSummary`.

Sources are shown by :attr:`SourceSpec.name` (credentials in URLs masked), never by location.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

    from vidpipe.pipeline import DetectionRun
    from vidpipe.pipeline_config import SourceState
    from vidpipe.summary import RunSummary

__all__ = ["stream_status", "run_status", "run_summary", "LIVE_COUNTERS"]

#: the per-stream counters of live sources (also in each live source's summary ``extra``)
LIVE_COUNTERS = ("frames_in", "drops", "reconnects", "stalls", "decode_errors")


def stream_status(run: "DetectionRun", st: "SourceState", now: float) -> dict[str, Any]:
    """One entry of ``status()["streams"]``."""
    meter = run.meters.meter(st.stream_id)
    return {
        "stream_id": st.stream_id,
        "source": st.spec.name,
        "kind": run.kind_of(st.stream_id),
        "status": st.status,
        "state": st.live_state,
        "decoder": st.decoder,
        "frames_in": int(st.frames_in),
        "frames": int(st.frames),
        "drops": int(st.drops),
        "drop_causes": dict(st.drop_causes),
        "reconnects": int(st.reconnects),
        "stalls": int(st.stalls),
        "decode_errors": int(st.decode_errors),
        "detections": int(st.detections),
        "fps": meter.fps(now),
        "latency_ms": meter.latency(),
    }


def run_status(run: "DetectionRun") -> dict[str, Any]:
    """``run.status()``: see :meth:`vidpipe.pipeline.DetectionRun.status`."""
    now = time.monotonic()
    states = list(run.states)
    return {
        "time": time.time(),
        "uptime_s": now - run.created_mono,
        "streams": [stream_status(run, st, now) for st in states],
        "stats": run.get_stats(),
    }


def _extra(run: "DetectionRun", st: "SourceState") -> dict[str, Any]:
    extra = dict(st.extra)
    if run.kind_of(st.stream_id) == "live":
        extra.update({k: int(getattr(st, k)) for k in LIVE_COUNTERS})
        if st.drop_causes:
            extra["drop_causes"] = dict(st.drop_causes)
        extra["latency_ms"] = run.meters.meter(st.stream_id).latency()
    if st.status == "removed":
        extra["removed"] = True
    return extra


def run_summary(run: "DetectionRun", *, outputs: "Sequence[str]" = ()) -> "RunSummary":
    """``run.summary()``: see :meth:`vidpipe.pipeline.DetectionRun.summary`."""
    from vidpipe.summary import RunSummary, SourceSummary

    sources = [
        SourceSummary(source=src, kind="unknown", status="failed", error=reason) for src, reason in run.failed_inputs
    ]
    states = list(run.states)
    for st in states:
        status = st.status if st.status in ("ok", "partial", "failed", "skipped") else "partial"
        sources.append(
            SourceSummary(
                source=st.spec.name,
                kind=run.kind_of(st.stream_id),
                status=status,
                frames=st.frames,
                detections=st.detections,
                decoder=st.decoder,
                decoder_reason=st.decoder_reason,
                error=st.error,
                extra=_extra(run, st),
            )
        )
    info = run.detector.model.info
    decoders = sorted({st.decoder for st in states if st.decoder})
    backends = {
        "decode": ",".join(decoders) or "none",
        "model": f"{info.format}-{str(run.detector.dtype).removeprefix('torch.')}",
        "postprocess": run.device.type,
    }
    seconds = run.seconds
    frames = run.stats.frames
    stats = {
        **run.get_stats(),
        "batch_size": run.batch_size,
        "batch_timeout_s": run.batch_timeout,
        "model_batch_limit": run.model_batch_limit,  # set after an out-of-memory back-off
        "warmup_s": run.warmup_s,
        "first_result_s": None if run.first_result_s is None else round(run.first_result_s, 3),
    }
    memory = run.memory.report()  # max_gpu_memory's plan and the allocator's peaks (GPU only)
    if memory is not None:
        stats["gpu_memory"] = memory
    return RunSummary(
        sources=tuple(sources),
        frames=frames,
        detections=run.stats.detections,
        seconds=seconds,
        fps=frames / seconds if seconds > 0 else 0.0,
        device=str(run.device),
        model=info.name,
        backends=backends,
        outputs=tuple(outputs),
        skipped=tuple({"source": st.spec.name, **item} for st in states for item in st.extra.get("skipped", ())),
        stats=stats,
        stages=run.stages.reports(),
    )
