"""What one segment-parallel pass over a file knows and counts, without PyTorch.

:class:`SegmentState` is the part of a decoder that the segment code
(:mod:`vidpipe.decode.workers`) and decoder processes (:mod:`vidpipe.decode.procrun`) use
through :class:`~vidpipe.decode.segment_job.SegmentJob`: the stream, the frame selection, the
session factories, the plan, the frame metadata it makes and the counters and errors the pass
reports. :class:`~vidpipe.decode.parallel.SegmentParallelDecoder` is one, with the batch buffers,
the planning and the iteration on top; a decoder process (:mod:`vidpipe.decode.procworker`)
makes a bare one for its NVDEC or PyAV sessions, so it decodes without importing PyTorch.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from vidpipe._validate import check_range
from vidpipe.decode.base import DecodeOptions, StreamInfo
from vidpipe.types import FrameMeta

if TYPE_CHECKING:
    from vidpipe.decode.segments import DecodePlan, Segment

__all__ = ["SegmentState"]


class SegmentState:
    """A pass's settings, plan and counters (see the module docstring).

    Args:
        info: the stream.
        options: frame selection (``None``: every frame).
        session_factory: makes the session of worker ``i`` (called in that worker's thread).
        fallback_factory: makes the replacement session when one fails (``None``: no retry).
        annexb: H.264/HEVC packets go to the sessions as Annex-B (what NVDEC parses).
        workers: concurrent sessions.
        stream_id: written into every :class:`FrameMeta` (default: ``options.stream_id``).
    """

    def __init__(
        self,
        info: StreamInfo,
        *,
        options: DecodeOptions | None = None,
        session_factory: Callable[[int], Any],
        fallback_factory: Callable[[int], Any] | None = None,
        annexb: bool = False,
        workers: int = 1,
        stream_id: int | None = None,
    ) -> None:
        self.info = info
        self.options = options if options is not None else DecodeOptions()
        self.session_factory = session_factory
        self.fallback_factory = fallback_factory
        self.annexb = annexb
        self.workers = check_range("workers", workers, low=1, integer=True)
        self.stream_id = self.options.stream_id if stream_id is None else stream_id
        self.backoff: tuple[int, int] | None = None  # (batch, window) after an out-of-memory back-off
        self.plan: DecodePlan | None = None
        self.error: Exception | None = None
        self.fallbacks: list[str] = []  # segments retried on the fallback session, with the reason
        self._reset_counters()

    def prepare(self, plan: DecodePlan) -> None:
        """Decode ``plan``'s segments through the segment code without iterating this decoder
        (a decoder process's side of :mod:`vidpipe.decode.procworker`): the plan set, the
        counters at zero."""
        self.plan = plan
        self._reset_counters()

    def _reset_counters(self) -> None:
        self.frames_decoded = 0
        self.frames_delivered = 0
        self.frames_missing = 0
        self.timestamp_gaps = 0  # frames a constant-rate stream's timestamps say the file lacks
        self.bytes_host_to_device = 0
        self.bytes_device_to_host = 0  # decoded frames never go to the host on the GPU path
        self.workers_used = 0
        self.processes_used = 0  # decoder processes of the last run (0: threads in this process)
        self.processes_lost = 0  # decoder processes that died during the last run (their segments redone)
        # the last run started before its decoder processes were ready: frames delivered by threads
        # here before they joined (all of them if they never did); None: they were ready
        self.frames_before_processes: int | None = None
        self._ring_bytes = 0
        self.packet_reader = "none"  # how workers read packets: "file" (byte ranges) or "pyav"
        self._positions_before = 0  # inexact streams: positions are numbered from here
        self._errors: list[str] = []
        self._lock = threading.Lock()

    def meta(self, index: int, pts: int | None) -> FrameMeta:
        """The :class:`FrameMeta` of frame ``index`` with timestamp ``pts`` (in the stream's time
        base; ``None`` or negative: unknown)."""
        sec = self.plan.index.seconds(pts) if (self.plan and pts is not None and pts >= 0) else None
        return FrameMeta(self.info.source, self.stream_id, index, sec, self.info.height, self.info.width)

    def close(self) -> None:
        """Stop a run in progress (its threads end and its sessions are released when the
        consumer next resumes or drops the generator). Safe to call twice."""
        cancel = getattr(self, "_cancel", None)
        if cancel is not None:
            self._cancel = None
            cancel()

    # ------------------------------------------------------- what a pass reports (any thread)

    def on_close(self, cancel: Callable[[], None]) -> None:
        """Have :meth:`close` call ``cancel`` (the pass in progress stops its threads)."""
        self._cancel = cancel

    def note_error(self, seg: Segment, error: Any) -> None:
        """Segment ``seg`` lost frames to ``error`` (reported with the run, see :meth:`batches`)."""
        self.note_errors([f"segment {seg.number}: {error}"])

    def note_errors(self, texts: "Iterable[str]") -> None:
        """Errors of the pass (a decoder process's, or a whole process that failed)."""
        with self._lock:
            self._errors.extend(texts)

    @property
    def errors(self) -> list[str]:
        """The errors of the last pass, so far (a copy)."""
        with self._lock:
            return list(self._errors)

    def note_fallback(self, reason: str) -> None:
        """A segment or worker moved to the fallback decoder, for ``reason``."""
        with self._lock:
            self.fallbacks.append(reason)

    def count(self, *, decoded: int = 0, missing: int = 0) -> None:
        """Add a segment's decoded frames and those it should have had but did not."""
        with self._lock:
            self.frames_decoded += decoded
            self.frames_missing += missing

    def note_ring_bytes(self, n: int) -> None:
        """The decoder processes' shared ring held ``n`` bytes (``stats()["buffer_peak_bytes"]``)."""
        self._ring_bytes = n

    def note_delivered(self, n: int) -> None:
        """``n`` more frames were handed to the consumer."""
        with self._lock:
            self.frames_delivered += n

    def note_missing(self, n: int) -> None:
        """At least ``n`` planned frames never came (the reorder buffer's count at the pass's end)."""
        with self._lock:
            self.frames_missing = max(self.frames_missing, n)

    def note_fallbacks(self, reasons: "Iterable[str]") -> None:
        """Segments a decoder process moved to its fallback decoder, with the reasons."""
        with self._lock:
            self.fallbacks.extend(reasons)

    def note_packet_reader(self, name: str) -> None:
        """How the workers read packets: ``"file"`` (byte ranges) or ``"pyav"``."""
        self.packet_reader = name

    def note_workers(self, sessions: int) -> None:
        """The pass runs ``sessions`` decoding sessions (threads, or spread over processes)."""
        self.workers_used = sessions

    def note_processes(self, n: int) -> None:
        """The pass now runs in ``n`` decoder processes (more joined it: the most is kept)."""
        self.processes_used = max(self.processes_used, n)

    def note_frames_before_processes(self, n: int) -> None:
        """The pass started before its decoder processes were ready; threads here delivered ``n``
        frames before they joined (all of the pass's, if they never did)."""
        self.frames_before_processes = n

    def note_process_lost(self) -> None:
        """A decoder process died during the pass (its segments are redone)."""
        with self._lock:
            self.processes_lost += 1

    def note_backoff(self, batch: int, window: int) -> None:
        """An out-of-memory back-off left the pass at ``batch`` frames a batch, ``window`` ahead."""
        self.backoff = (batch, window)

    @property
    def positions_before(self) -> int:
        """Streams without exact frame numbers: the position the pass numbers its frames from."""
        return self._positions_before
