"""What a detection run is asked to do (:class:`PipelineConfig`) and where each of its inputs
stands (:class:`SourceState`); used by :mod:`vidpipe.pipeline` and the sources (:mod:`vidpipe.sources`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from vidpipe._validate import check_choice, check_range
from vidpipe.decode.base import DECODER_NAMES, DecodeOptions
from vidpipe.sources.options import LiveOptions

if TYPE_CHECKING:
    from vidpipe.sources.spec import SourceSpec

__all__ = ["PipelineConfig", "SourceState", "SOURCE_ERROR_LOG"]


@dataclass(frozen=True)
class PipelineConfig:
    """How frames move through the pipeline (the model's own options live in DetectorConfig).

    Attributes:
        decoder: video decoder backend, ``"auto"`` picks the fastest that works for each input
            (a backend added with :func:`vidpipe.decode.registry.register_backend` may be named).
        batch_size: frames per model call (across sources).
        frame_skip / max_frames / start / end: which frames of each video to process
            (see :class:`~vidpipe.decode.base.DecodeOptions`).
        strict_gpu: make any CPU fallback on a GPU device an error.
        max_open_sources: inputs decoded concurrently.
        queue_depth: chunks buffered per open source before its worker waits.
        results_on_host: move detections to the CPU (one transfer per batch) before yielding.
        letterbox: ``"square"`` feeds the model its nominal size (Darknet's letterbox, the
            default: detections match the original model's); ``"rect"`` trims the padding to
            the model's stride when the model accepts any input size (a 16:9 frame runs at
            416x256 instead of 416x416: less compute, slightly different detections near edges).
        accel: ``"auto"``: on a GPU, a PyTorch model's forward at ``(batch_size, 3, H, W)`` runs as
            a CUDA graph captured when the run starts (:func:`vidpipe.models.backends.accelerate`;
            same outputs, other shapes run eagerly). The consumer thread launches the model while
            the decoder threads contend for the GIL, and every kernel launch costs a GIL
            hand-over: one graph launch instead of one per layer (on an H200 with NVDEC decoding,
            YOLOv3-tiny at batch 32: 3,050 -> 3,730 frames/s end to end). ``"none"``: eager.
        decoder_processes: NVDEC sessions in this many decoder processes (``0``: threads here;
            ``None``: automatic, see :class:`~vidpipe.decode.nvdec.NvdecDecoder`).
        live: how live inputs are read (:class:`~vidpipe.sources.options.LiveOptions`).
        keep_frames: every :class:`~vidpipe.types.FrameResult` carries its decoded frame in
            ``image`` (``(3, H, W)`` uint8 RGB on the run's device, at the source's size), taken
            from the decode that feeds the model (no second decode). Set by the run itself when a
            stage has ``needs_frames``. A frame lives as long as something references it (its
            result, a view of it; frames decoded together share one allocation, freed with the
            last of them), then the CUDA caching allocator reuses it; memory grows with the
            frames queued and in flight:
            about ``(queue_depth + 2) x batch_size`` frames per open source (live:
            ``live.queue_frames``) plus those the caller keeps, 6.2 MB each at 1080p (a 1080p
            file at the defaults: up to ~6 x 32 x 6.2 MB = 1.2 GB per open source).
        max_gpu_memory: one bound on the GPU memory of the run (pools, rings, batches, the model
            together): bytes (``4 << 30``, ``"4GiB"``, ``"512MiB"``) or a fraction of the card
            (``0.5``); ``None``: no bound. On a GPU the run plans what each part gets
            (:mod:`vidpipe.gpu_memory`; ``summary().stats["gpu_memory"]``), lowers the batch if
            it must, and caps PyTorch's caching allocator at the budget for the run. Too small
            for batch 1: :class:`~vidpipe.errors.GpuMemoryError` naming the minimum. Ignored on
            the CPU.
        decode_buffer_bytes: each decoder's GPU frame window in bytes (``None``: the decoder's
            default); set by the run from ``max_gpu_memory``'s plan.
        batches_in_flight: batches launched on the GPU and not yet post-processed when the next
            one is launched (1 to 8): the consumer thread waits for the oldest one's results
            while the GPU works on the others. ``1`` (default): batch N+1's model is queued
            before batch N is post-processed. Measured on an H200 with 64 and 96 live 1080p
            streams: 1, 2 and 3 gave the same rates and latencies (``bench streams --in-flight``).
    """

    decoder: str = "auto"
    batch_size: int = 32
    frame_skip: int = 1
    max_frames: int | None = None
    start: float | None = None
    end: float | None = None
    strict_gpu: bool = False
    max_open_sources: int = 4
    queue_depth: int = 4
    results_on_host: bool = False
    letterbox: str = "square"
    accel: str = "auto"
    decoder_processes: int | None = None
    live: LiveOptions = field(default_factory=LiveOptions)
    keep_frames: bool = False
    max_gpu_memory: "int | float | str | None" = None
    decode_buffer_bytes: int | None = None
    batches_in_flight: int = 1

    def __post_init__(self) -> None:
        from vidpipe.gpu_memory import parse_gpu_memory

        from vidpipe.decode.registry import registered_backends

        check_choice("decoder", self.decoder, dict.fromkeys([*DECODER_NAMES, *registered_backends()]))
        check_choice("letterbox", self.letterbox, ("rect", "square"))
        check_choice("accel", self.accel, ("auto", "none"))
        check_range("batch_size", self.batch_size, low=1, high=4096, integer=True)
        check_range("max_open_sources", self.max_open_sources, low=1, high=256, integer=True)
        check_range("queue_depth", self.queue_depth, low=1, high=1024, integer=True)
        check_range("batches_in_flight", self.batches_in_flight, low=1, high=8, integer=True)
        if not isinstance(self.keep_frames, bool):
            from vidpipe.errors import ConfigError

            raise ConfigError(f"keep_frames={self.keep_frames!r}; expected True or False")
        parse_gpu_memory(self.max_gpu_memory)
        if self.decode_buffer_bytes is not None:
            check_range("decode_buffer_bytes", self.decode_buffer_bytes, low=1, integer=True)
        self.decode_options()  # validates frame_skip, max_frames, start, end, decoder_processes

    def decode_options(self, stream_id: int = 0, *, files_at_once: int = 1) -> DecodeOptions:
        """The decode options of stream ``stream_id``; ``files_at_once``: video files the run
        decodes at the same time (see :class:`~vidpipe.decode.base.DecodeOptions`)."""
        return DecodeOptions(
            frame_skip=self.frame_skip,
            max_frames=self.max_frames,
            start=self.start,
            end=self.end,
            stream_id=stream_id,
            reuse_buffers=True,  # each batch is preprocessed before the next is requested
            decoder_processes=self.decoder_processes,
            gpu_buffer_bytes=self.decode_buffer_bytes,
            files_at_once=files_at_once,
        )


@dataclass
class SourceState:
    """Mutable per-source progress, owned by the pipeline."""

    spec: "SourceSpec"
    stream_id: int
    status: str = "pending"  # pending | running | ok | partial | failed | skipped | removed
    frames: int = 0  # frames whose results were yielded
    produced: int = 0  # frames preprocessed and queued by the worker
    detections: int = 0
    decoder: str | None = None
    decoder_reason: str | None = None
    error: str | None = None
    expected_frames: int | None = None
    finished: bool = False  # the consumer saw the worker's end marker
    stopped: bool = False  # the worker stopped before the end of its input (run stopping)
    extra: dict = field(default_factory=dict)
    # live sources (None / 0 for files and images)
    live_state: str | None = None  # connecting | live | stalled | reconnecting | failed | stopped
    frames_in: int = 0  # frames decoded from the stream (before latest-wins drops)
    drops: int = 0  # decoded frames dropped (latest wins; by cause in drop_causes)
    drop_causes: dict = field(default_factory=dict)  # cause -> frames: see drop()
    reconnects: int = 0  # connections made after the first
    stalls: int = 0  # times the watchdog found no decoded frame for stall_timeout seconds
    decode_errors: int = 0  # packets or frames the decoder rejected (the stream went on)
    last_frame_at: float | None = None  # time.monotonic() of the last decoded frame

    def drop(self, cause: str, n: int = 1) -> None:
        """Count ``n`` decoded frames of a live source dropped, by ``cause``: ``"queue"`` (the
        model was behind: latest wins), ``"late"`` (the source was behind real time: a frame
        older than half a second while more waited), ``"slots"`` (a decoder process found every
        buffer it shares with the run still in use), ``"startup"`` (a decoder process's first
        frames, or the first after a change of frame size, before its buffers were shared)."""
        self.drops += n
        self.drop_causes[cause] = self.drop_causes.get(cause, 0) + n

    @property
    def drained(self) -> bool:
        """Every frame of this source has been yielded (its worker is done)."""
        return self.finished and self.frames >= self.produced


#: ``extra=`` of log records about a failed or partial source: the CLI reports those itself
#: (once, at the end), so it filters them from its log output.
SOURCE_ERROR_LOG = {"vidpipe_source_error": True}
