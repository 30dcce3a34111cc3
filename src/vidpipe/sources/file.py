"""Video files: :class:`FileSource`, a finite :class:`~vidpipe.sources.base.Source` that decodes
one file (NVDEC on a GPU where it can, else PyAV, or a registered backend) in chunks of
``batch_size`` frames and letterboxes them on the run's device. Every frame is kept."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from vidpipe.pipeline_config import SOURCE_ERROR_LOG
from vidpipe.sources.drive import drive

if TYPE_CHECKING:
    from vidpipe.decode.base import StreamInfo
    from vidpipe.decode.segments import StreamIndex
    from vidpipe.pipeline_config import PipelineConfig, SourceState
    from vidpipe.sources.base import Chunk, SourceContext
    from vidpipe.sources.spec import SourceSpec

logger = logging.getLogger(__name__)

__all__ = ["FileSource", "expected_frames", "empty_selection_note"]


class FileSource:
    """A video file read to its end (frame selection from the run's config)."""

    live = False

    def __init__(self, spec: "SourceSpec") -> None:
        self.spec = spec
        self._prepared: "tuple[StreamInfo, StreamIndex | None] | None" = None  # prepare's, for produce

    def __repr__(self) -> str:
        return f"FileSource({self.spec.name!r})"

    def prepare(self, state: "SourceState", ctx: "SourceContext") -> None:
        """The file's probe and, where NVDEC may read it (a GPU run, a codec NVDEC knows), its
        packet scan (the plan of its segments): host work that a run of files on a GPU does while
        its CUDA graph is captured (:class:`~vidpipe.sources.base.SourceContext`'s ``gpu_free``),
        kept for :meth:`produce`.
        Reading the packets of a 4,800-frame 1080p file takes 40-80 ms. A file that cannot be
        probed or scanned raises here: the run leaves it to :meth:`produce`, which reports it."""
        from vidpipe.decode.nvdec_caps import NVDEC_CODECS, canonical_codec
        from vidpipe.decode.probe import is_url, probe
        from vidpipe.decode.segments import scan_stream

        info = probe(self.spec.location)
        nvdec = (ctx.config.decoder in ("auto", "nvdec") and ctx.detector.device.type == "cuda"
                 and canonical_codec(info.codec) in NVDEC_CODECS and not is_url(info.location))  # fmt: skip
        self._prepared = (info, scan_stream(info.location) if nvdec else None)

    def produce(self, state: "SourceState", ctx: "SourceContext") -> Iterator["Chunk"]:
        """``(ModelInput, ready_event)`` chunks of ``batch_size`` frames (the last may be short)."""
        from vidpipe.decode.registry import open_decoder
        from vidpipe.ops.preprocess import Preprocessor

        detector, config = ctx.detector, ctx.config
        device = detector.device
        to_input = Preprocessor(detector, config)
        prepared, self._prepared = self._prepared, None

        with open_decoder(
            prepared[0] if prepared is not None else self.spec.location,
            device=device,
            decoder=config.decoder,
            options=config.decode_options(state.stream_id, files_at_once=ctx.files_at_once),
            strict_gpu=config.strict_gpu,
            auto_short_files=ctx.inputs == 1,
            index=prepared[1] if prepared is not None else None,
        ) as dec:
            state.decoder = dec.choice.name
            state.decoder_reason = dec.choice.reason
            state.expected_frames = expected_frames(dec.info, config)
            yield from drive(
                dec.batches(config.batch_size), to_input, device=device, stop=ctx.stop, stats=ctx.stats, state=state,
                streams=detector.cuda_streams, warm=ctx.warm,
            )
            _note_gpu_decoder(dec, state)
            procs = getattr(dec, "processes_used", 0)
            if procs:
                state.decoder_reason = f"{state.decoder_reason}; sessions in {procs} decoder processes"
                state.extra["decoder_processes"] = procs
            late = getattr(dec, "frames_before_processes", None)
            if late is not None:  # the decoder processes were not ready when the decode started
                state.extra["frames_before_processes"] = late
            if dec.error is not None:
                state.status = "partial"
                state.error = str(dec.error)
                logger.warning("%s", dec.error, extra=SOURCE_ERROR_LOG)
            elif state.produced == 0 and not state.stopped:
                state.extra["note"] = empty_selection_note(dec.info, config)
                logger.warning("%s: no frames: %s", self.spec.name, state.extra["note"])


def _note_gpu_decoder(dec: Any, state: "SourceState") -> None:
    """The GPU decoder's sessions (``decode_sessions``, in decoder processes too) and frame
    buffers (``gpu_buffers_mib``) in the source's summary, and its out-of-memory back-off
    (``gpu_buffer_backoff``) if one happened."""
    stats = getattr(dec, "stats", None)
    if not callable(stats) or getattr(dec, "buffer_device", None) is None or dec.buffer_device.type != "cuda":
        return
    s = stats()
    if s.get("workers"):
        state.extra["decode_sessions"] = s["workers"]
    state.extra["gpu_buffers_mib"] = round(s.get("buffer_peak_bytes", 0) / (1 << 20), 1)
    if s.get("buffer_backoff"):
        state.extra["gpu_buffer_backoff"] = s["buffer_backoff"]


def empty_selection_note(info: Any, config: "PipelineConfig") -> str:
    """Why a video that decoded without error gave no frame (a selection past its end)."""
    duration = info.duration
    length = f"the video lasts {duration:.3f} s" if duration else "the video has no frame there"
    if config.start is not None and (duration is None or config.start >= duration):
        return f"start={config.start:g} s is at or past its end ({length})"
    if config.start is not None or config.end is not None:
        return f"no frame between start={config.start or 0:g} s and end={config.end} s ({length})"
    return "the video has no decodable frame"


def expected_frames(info: Any, config: "PipelineConfig") -> int | None:
    """Frames the run will deliver for this stream, for progress bars (an estimate)."""
    n = info.frame_count
    if n is None:
        return None
    fps = info.fps or 0
    lo = int((config.start or 0) * fps) if fps else 0
    hi = min(n, int(config.end * fps)) if (config.end is not None and fps) else n
    kept = max(0, -(-(hi - lo) // config.frame_skip))
    return min(kept, config.max_frames) if config.max_frames else kept
