"""Shared worker-side plumbing of sources: a worker's own CUDA stream, and the loop that pulls
decoded batches and turns them into :class:`~vidpipe.types.ModelInput` chunks on that stream.

On a CUDA device each chunk carries an event recorded after its preprocessing, which the
consumer waits on before the model reads the chunk; on the CPU the event is ``None``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vidpipe.models.twins import GraphTwins
    from vidpipe.pipeline_config import SourceState
    from vidpipe.stats import PipelineStats
    from vidpipe.types import ModelInput

__all__ = ["stream_scope", "ready_event", "drive"]


def stream_scope(device: Any, lender: "GraphTwins[Any] | None" = None) -> tuple[Any, Any]:
    """A CUDA stream and its context for ``device`` (``None`` and a no-op on the CPU): borrowed
    from ``lender`` (a detector's :attr:`~vidpipe.models.detector.Detector.cuda_streams`, in the
    role ``(device, "source")``; give it back with ``lender.give((device, "source"), stream)``), or
    a fresh one."""
    import torch

    if device.type != "cuda":
        return None, contextlib.nullcontext()
    stream = (lender.take((device, "source"), lambda: torch.cuda.Stream(device)) if lender is not None
              else torch.cuda.Stream(device))  # fmt: skip
    return stream, torch.cuda.stream(stream)


def ready_event(stream: Any) -> Any:
    """A CUDA event recorded on ``stream`` now (``None`` when ``stream`` is ``None``)."""
    if stream is None:
        return None
    import torch

    ev = torch.cuda.Event()
    ev.record(stream)
    return ev


def drive(
    batches: Iterator[Any],
    to_input: Callable[[Any], "ModelInput"],
    *,
    device: Any,
    stop: threading.Event,
    stats: "PipelineStats",
    state: "SourceState",
    streams: "GraphTwins[Any] | None" = None,
    warm: threading.Event | None = None,
) -> Iterator[tuple["ModelInput", Any]]:
    """Pull decoded batches and turn them into model inputs on the worker's own CUDA stream.

    Sets ``state.stopped`` when ``stop`` ends it before the input's end.

    The decode step (``next(batches)``) runs inside the stream scope too: a decoder that uploads
    (PyAV -> CUDA) or copies (NVDEC) queues that work on the current stream, which must be the
    worker's, so the ready event recorded after ``to_input`` covers it. ``streams``: where that
    stream is borrowed from (and given back to at the end), see :func:`stream_scope`.

    ``warm``: the first batch is decoded at once (the decoder's sessions start, its threads go on
    decoding ahead), but preprocessed only once this is set
    (:class:`~vidpipe.sources.base.SourceContext`'s ``warm``); the wait counts as neither stage.
    """
    stream, scope = stream_scope(device, streams)
    try:
        while True:
            if stop.is_set():
                state.stopped = True
                return
            with scope:
                t0 = time.perf_counter()
                batch = next(batches, None)
                if batch is None:
                    return
                decoded = time.perf_counter() - t0
                if warm is not None and not warm.is_set() and not _wait(warm, stop):
                    state.stopped = True
                    return
                t1 = time.perf_counter()
                inp = to_input(batch)
                ready = ready_event(stream)
            stats.add("decode", decoded, len(batch))
            stats.add("preprocess", time.perf_counter() - t1, len(batch))
            yield inp, ready
    finally:
        if streams is not None and stream is not None:
            streams.give((device, "source"), stream)  # queued work stays ordered on it; the next user comes after


def _wait(event: threading.Event, stop: threading.Event, poll_s: float = 0.05) -> bool:
    """Wait for ``event``; ``False`` when ``stop`` is set first."""
    while not event.wait(poll_s):
        if stop.is_set():
            return False
    return True
