""":class:`SegmentJob`: what the threads and decoder processes of one segment-parallel pass take
from their decoder, and how they report back.

:func:`~vidpipe.decode.workers.run_workers` (sessions on threads of this process) and
:func:`~vidpipe.decode.procrun.run_processes` (sessions in decoder processes) decode a
:class:`~vidpipe.decode.segments.DecodePlan` for a
:class:`~vidpipe.decode.parallel.SegmentParallelDecoder`. They read its settings and the frame
metadata it makes, start sessions with its factories, and report what happened only through the
``note_*`` / ``count`` methods (each safe from any thread): they set none of its attributes. This
protocol is that boundary, so either side can change without the other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch

    from vidpipe.decode.base import DecodeOptions, StreamInfo
    from vidpipe.decode.segments import DecodePlan, Segment
    from vidpipe.types import FrameMeta

__all__ = ["SegmentJob"]


class SegmentJob(Protocol):
    """The decoder as a pass sees it.

    Attributes:
        info, options, stream_id: the stream, the frame selection, the id its frames carry.
        plan: the pass's plan (set before the pass starts).
        annexb: whether H.264/HEVC packets go to the sessions as Annex-B.
        workers: sessions the pass may run.
        buffer_device: where the batch buffers live.
        session_factory, fallback_factory: ``(worker id) -> session``; the fallback's may be ``None``.
    """

    info: "StreamInfo"
    options: "DecodeOptions"
    stream_id: int
    plan: "DecodePlan | None"
    annexb: bool
    workers: int
    buffer_device: "torch.device"
    session_factory: Callable[[int], Any]
    fallback_factory: Callable[[int], Any] | None

    @property
    def positions_before(self) -> int: ...

    def meta(self, index: int, pts: int | None) -> "FrameMeta": ...

    def row(self) -> "tuple[tuple[int, ...], torch.dtype, str]": ...

    def frame_bytes(self) -> int: ...

    def on_close(self, cancel: Callable[[], None]) -> None: ...

    # what the pass reports
    def count(self, *, decoded: int = 0, missing: int = 0) -> None: ...

    def note_error(self, seg: "Segment", error: Any) -> None: ...

    def note_errors(self, texts: Iterable[str]) -> None: ...

    def note_fallback(self, reason: str) -> None: ...

    def note_fallbacks(self, reasons: Iterable[str]) -> None: ...

    def note_delivered(self, n: int) -> None: ...

    def note_missing(self, n: int) -> None: ...

    def note_packet_reader(self, name: str) -> None: ...

    def note_workers(self, sessions: int) -> None: ...

    def note_processes(self, n: int) -> None: ...

    def note_process_lost(self) -> None: ...

    def note_frames_before_processes(self, n: int) -> None: ...

    def note_backoff(self, batch: int, window: int) -> None: ...

    def note_ring_bytes(self, n: int) -> None: ...

    @property
    def errors(self) -> list[str]: ...
