"""Source workers' bodies: turn one input into preprocessed :class:`ModelInput` chunks.

Runs in a worker thread of :class:`vidpipe.pipeline.DetectionRun`. On a CUDA device the work is
issued on the worker's own CUDA stream and each chunk carries an event the consumer waits on, so
decoding and preprocessing overlap with inference.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from vidpipe.pipeline_config import SOURCE_ERROR_LOG
from vidpipe.types import ModelInput

if TYPE_CHECKING:
    from vidpipe.models.detector import Detector
    from vidpipe.pipeline_config import PipelineConfig, SourceState
    from vidpipe.stats import PipelineStats

logger = logging.getLogger(__name__)


def _stream_scope(device: Any) -> tuple[Any, Any]:
    """A fresh CUDA stream and its context for ``device`` (no-ops on the CPU)."""
    import torch

    if device.type != "cuda":
        return None, contextlib.nullcontext()
    stream = torch.cuda.Stream(device)
    return stream, torch.cuda.stream(stream)


def _ready_event(stream: Any) -> Any:
    if stream is None:
        return None
    import torch

    ev = torch.cuda.Event()
    ev.record(stream)
    return ev


def produce_chunks(
    state: "SourceState",
    *,
    detector: "Detector",
    config: "PipelineConfig",
    stop: threading.Event,
    stats: "PipelineStats",
) -> Iterator[tuple[ModelInput, Any]]:
    """Yield ``(ModelInput, ready_event)`` chunks for ``state.spec`` until done or ``stop``."""
    kind = state.spec.kind
    if kind in ("file", "live"):
        yield from _video_chunks(state, detector=detector, config=config, stop=stop, stats=stats)
    elif kind == "images":
        yield from _image_chunks(state, detector=detector, config=config, stop=stop, stats=stats)
    else:  # pragma: no cover - SourceSpec validates kind
        raise ValueError(f"unknown source kind {kind!r}")


def _drive(
    batches: Iterator[Any],
    to_input: Any,
    *,
    device: Any,
    stop: threading.Event,
    stats: "PipelineStats",
    state: "SourceState",
) -> Iterator[tuple[ModelInput, Any]]:
    """Pull decoded batches and turn them into model inputs on the worker's own CUDA stream.

    Sets ``state.stopped`` when ``stop`` ends it before the input's end.

    The decode step (``next(batches)``) runs inside the stream scope too: a decoder that uploads
    (PyAV -> CUDA) or copies (NVDEC) queues that work on the current stream, which must be the
    worker's, so the ready event recorded after ``to_input`` covers it.
    """
    stream, scope = _stream_scope(device)
    while True:
        if stop.is_set():
            state.stopped = True
            return
        with scope:
            t0 = time.perf_counter()
            batch = next(batches, None)
            if batch is None:
                return
            t1 = time.perf_counter()
            inp = to_input(batch)
            ready = _ready_event(stream)
        stats.add("decode", t1 - t0, len(batch))
        stats.add("preprocess", time.perf_counter() - t1, len(batch))
        yield inp, ready


def _video_chunks(
    state: "SourceState",
    *,
    detector: "Detector",
    config: "PipelineConfig",
    stop: threading.Event,
    stats: "PipelineStats",
) -> Iterator[tuple[ModelInput, Any]]:
    from vidpipe.decode.registry import open_decoder
    from vidpipe.ops.letterbox import canvas_size
    from vidpipe.ops.preprocess import preprocess

    device = detector.device
    info = detector.model.info
    mode = config.letterbox if info.dynamic_shape else "square"

    def to_input(fb: Any) -> ModelInput:
        size = canvas_size(fb.height, fb.width, detector.input_size, stride=info.stride, mode=mode)
        return preprocess(fb, size=size, dtype=detector.dtype, device=device)

    with open_decoder(
        state.spec.location,
        device=device,
        decoder=config.decoder,
        options=config.decode_options(state.stream_id),
        strict_gpu=config.strict_gpu,
    ) as dec:
        state.decoder = dec.choice.name
        state.decoder_reason = dec.choice.reason
        state.expected_frames = _expected_frames(dec.info, config)
        yield from _drive(
            dec.batches(config.batch_size), to_input, device=device, stop=stop, stats=stats, state=state
        )
        procs = getattr(dec, "processes_used", 0)
        if procs:
            state.decoder_reason = f"{state.decoder_reason}; sessions in {procs} decoder processes"
        if dec.error is not None:
            state.status = "partial"
            state.error = str(dec.error)
            logger.warning("%s", dec.error, extra=SOURCE_ERROR_LOG)
        elif state.produced == 0 and not state.stopped:
            state.extra["note"] = _empty_selection_note(dec.info, config)
            logger.warning("%s: no frames: %s", state.spec.location, state.extra["note"])


def _empty_selection_note(info: Any, config: "PipelineConfig") -> str:
    """Why a video that decoded without error gave no frame (a selection past its end)."""
    duration = info.duration
    length = f"the video lasts {duration:.3f} s" if duration else "the video has no frame there"
    if config.start is not None and (duration is None or config.start >= duration):
        return f"start={config.start:g} s is at or past its end ({length})"
    if config.start is not None or config.end is not None:
        return f"no frame between start={config.start or 0:g} s and end={config.end} s ({length})"
    return "the video has no decodable frame"


def _expected_frames(info: Any, config: "PipelineConfig") -> int | None:
    """Frames the run will deliver for this stream, for progress bars (an estimate)."""
    n = info.frame_count
    if n is None:
        return None
    fps = info.fps or 0
    lo = int((config.start or 0) * fps) if fps else 0
    hi = min(n, int(config.end * fps)) if (config.end is not None and fps) else n
    kept = max(0, -(-(hi - lo) // config.frame_skip))
    return min(kept, config.max_frames) if config.max_frames else kept


def _image_chunks(
    state: "SourceState",
    *,
    detector: "Detector",
    config: "PipelineConfig",
    stop: threading.Event,
    stats: "PipelineStats",
) -> Iterator[tuple[ModelInput, Any]]:
    """Images of a folder, glob or file: batched (nvJPEG on CUDA), letterboxed on the device.

    Unreadable files are skipped and listed in ``state.extra["skipped"]`` (the run summary and
    the output metadata carry them); they never stop the source.
    """
    import vidpipe.images as vi

    loader = vi.load(
        state.spec.location,
        device=detector.device,
        batch_size=config.batch_size,
        size=detector.input_size,
        mode="letterbox",
        dtype=detector.dtype,
        stream_id=state.stream_id,
    )
    state.decoder, state.decoder_reason = loader.decoder_name, loader.decoder
    state.expected_frames = loader.total
    try:
        yield from _drive(
            iter(loader), lambda b: b.to_model_input(), device=detector.device, stop=stop, stats=stats, state=state
        )
        failure = None if stop.is_set() else loader.failure(state.spec.location)
        if failure is not None:  # every file skipped: the source failed (a clear error, exit 2)
            raise failure
    finally:
        state.extra["skipped"] = [s.to_dict() for s in loader.skipped]
        state.extra["loader"] = dataclasses.asdict(loader.stats)
        if loader.skipped:
            logger.warning("%s: skipped %d unreadable file(s)", state.spec.location, len(loader.skipped))
