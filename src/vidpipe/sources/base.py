"""The :class:`Source` protocol: one input of a run (a video file, an image folder, a live stream).

A source runs in its own worker thread of :class:`vidpipe.pipeline.DetectionRun`. It opens its
input once, decodes and preprocesses frames on the worker's CUDA stream, and yields
``(ModelInput, ready_event)`` chunks; the pipeline puts them on the source's own bounded queue
(a file waits when it is full: every frame is kept; a live source's queue drops its oldest chunk:
latest wins, every drop counted in ``state.drops``).

A source updates its :class:`~vidpipe.pipeline_config.SourceState` as it goes (decoder name,
expected frames, live state and counters) and returns when its input ends or ``ctx.stop`` is set
(then it sets ``state.stopped``). It raises :class:`~vidpipe.errors.VidpipeError` subclasses for
inputs that cannot be read; the pipeline records them without stopping other sources.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from vidpipe.models.detector import Detector
    from vidpipe.pipeline_config import PipelineConfig, SourceState
    from vidpipe.sources.spec import SourceSpec
    from vidpipe.stats import PipelineStats
    from vidpipe.types import ModelInput

__all__ = ["Source", "SourceContext", "Chunk"]

#: What a source yields: a preprocessed model input of one or more frames, and the CUDA event
#: recorded after its preprocessing on the worker's stream (``None`` on the CPU).
Chunk = tuple["ModelInput", Any]


@dataclass(frozen=True)
class SourceContext:
    """What a source needs from the run: the detector (device, dtype, input size), the run's
    config, its stop flag and its statistics.

    ``gpu_submit``: one lock per run that the live sources hold while they queue a frame's GPU
    work (the copy out of the decoder, the preprocessing launches). Threads queuing CUDA work
    side by side contend for the GIL and the driver's locks in a convoy that grows with the
    number of streams; in turn they do not. Measured on an H100 with 32 live 1080p30 RTMP
    streams, decode + copy + preprocess in each stream's thread: 749 frames/s (20-24 per stream)
    in parallel, 959 (30 per stream, all of them) in turn (``tools/bench-probes/live_gpu_submit.py``).
    ``None``: no lock (a source used on its own).

    ``inputs``: how many inputs the run has (a file that is a run's only input may be read with
    PyAV when it is short; see :mod:`vidpipe.decode.auto_choice`).

    ``files_at_once``: video files the run decodes at the same time (its video files, at most
    ``max_open_sources``): they share the decoder processes (``DecodeOptions.files_at_once``).

    ``warm``: set once the run's GPU warm-up is over. A run of video files on a GPU starts their
    workers during its warm-up, once its CUDA graph is captured
    (:class:`~vidpipe.pipeline.DetectionRun`): a file source opens and decodes meanwhile, but
    preprocesses its first frames only once this is set (the warm-up compiles the same kernels).
    ``None``: nothing to wait for.

    ``gpu_free``: set once the run's CUDA graph is captured (or at once where no capture runs).
    Such a run starts its file workers before the capture: a source's ``prepare`` (host work
    only: the file's probe and packet scan) runs beside it, and ``produce`` (its CUDA work)
    only once this is set (:class:`~vidpipe.pipeline_workers.SourceWorker`). A CUDA call from
    another thread during the capture would invalidate it. ``None``: not started early.
    """

    detector: "Detector"
    config: "PipelineConfig"
    stop: threading.Event
    stats: "PipelineStats"
    gpu_submit: "threading.Lock | None" = None
    inputs: int = 1
    files_at_once: int = 1
    warm: "threading.Event | None" = None
    gpu_free: "threading.Event | None" = None


@runtime_checkable
class Source(Protocol):
    """One input of a run. ``live`` sources never end on their own, never hold one of the
    ``max_open_sources`` slots of finite inputs, and are read latest-wins.

    The run iterates :meth:`produce` in a thread of the source's own. A source whose chunks
    arrive on threads it already has (:class:`~vidpipe.sources.live_hub.ProcessLiveSource`) may
    also offer ``deliver(state, ctx, sink)``: the run then calls it instead, once, and it puts
    each chunk with ``sink.put(inp, ready, stop=...)`` (``False``: refused, the run is
    stopping) and returns when the source ends, raising what ended it.

    A source may also offer ``prepare(state, ctx)``: host work without any CUDA call (a file's
    probe and packet scan) that the run may call before :meth:`produce`, while its CUDA graph is
    being captured (``ctx.gpu_free`` not yet set). What it raises is logged at debug level and
    left to :meth:`produce`, which opens the input itself and reports what fails."""

    spec: "SourceSpec"

    @property
    def live(self) -> bool: ...

    def produce(self, state: "SourceState", ctx: SourceContext) -> Iterator[Chunk]: ...
