"""Segment-parallel decoding of one file: K decoder sessions at once, frames delivered in order.

How it runs (``workers > 1``)::

    K worker threads (one session each): take the next segment, read its packets
        │ (straight from the file by the scan's byte ranges, else an own PyAV demuxer),
        │ decode it, copy each kept frame into its batch row
        ▼
    consumer (the caller of batches()) ◄── ReorderBuffer (positions in order, bounded)

- The file is scanned once (:func:`~vidpipe.decode.segments.scan_stream`) and planned into
  keyframe-aligned segments (:func:`~vidpipe.decode.segments.plan_decode`); workers take
  segments in stream order, so the segments in flight are always a window of the file.
- A worker writes frame ``p`` only when ``p`` is less than ``window`` positions ahead of the
  consumer, so memory is bounded: a worker ahead of the consumer blocks.
- Frames nobody asked for (stride, time range) are never copied; GOPs without a kept frame are
  never decoded; a segment stops feeding its decoder once it has all its kept frames.
- Python work per frame is kept small and GIL hand-overs few (a dozen decoder threads share one
  GIL with the consumer): no reader thread or per-packet queue (see
  :mod:`vidpipe.decode.workers`), frames handed to the consumer a batch-run at a time.
- One session (``workers == 1``: short clips, seeks, streams without timestamps) is the same
  machinery with one worker thread.

Errors: a session that raises while decoding a segment is replaced by its fallback session
(``fallback_factory``; for NVDEC a PyAV session writing the same NV12 rows), which decodes the
segment again from its keyframe; frames already delivered are not written twice. If the fallback
fails too, the segment's missing frames are skipped, the stream is marked partial (``error``),
and the other segments go on. A failure of the orchestration itself fails the reorder buffer,
which wakes every thread, so nothing hangs.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from vidpipe._validate import check_range
from vidpipe.decode.assemble import BatchAssembler
from vidpipe.decode.base import MAX_DECODER_PROCESSES, DecodeOptions, Decoder, StreamInfo, damaged_file
from vidpipe.decode.segment_state import SegmentState
from vidpipe.decode.segments import (
    DecodePlan,
    Segment,
    StreamIndex,
    plan_decode,
    scan_stream,
)
from vidpipe.errors import DecodeError
from vidpipe.types import FrameBatch

if TYPE_CHECKING:
    import torch

    from vidpipe.decode.sessions import Session

__all__ = ["SegmentParallelDecoder", "PyAVParallelDecoder", "SessionFactory"]

logger = logging.getLogger(__name__)

#: seconds a decoder thread waits for a batch buffer to come back when allocating one runs out of
#: GPU memory mid-run, before the run fails with :class:`~vidpipe.errors.GpuMemoryError`
OOM_WAIT_S = 10.0
#: ``factory(worker_id) -> Session``
SessionFactory = Callable[[int], "Session"]


class SegmentParallelDecoder(SegmentState, Decoder):
    """Decode one file with ``workers`` concurrent sessions; see the module docstring.

    Args:
        info: the stream (:func:`~vidpipe.decode.probe.probe`).
        device: where batches are delivered.
        options: frame selection.
        session_factory: makes the session of worker ``i`` (called in that worker's thread).
        fallback_factory: makes the replacement session when one fails (``None``: no retry).
        layout: ``"yuv"`` (NV12/P016 rows, ``FrameBatch`` format ``nv12``/``p010``) or ``"rgb"``.
        buffer_device: where the batch buffers live (``None``: ``device``).
        annexb: demux H.264/HEVC as Annex-B (what NVDEC parses).
        workers: concurrent sessions (1: one session, segments one after another).
        segment_frames: decoded frames per segment (``None``: derived from ``window`` and
            ``workers``; at least one GOP).
        window: how many output positions workers may run ahead of the consumer (``None``: from
            ``buffer_bytes``).
        buffer_bytes: memory budget of frames held ahead of the consumer.
        bounded: ``buffer_bytes`` is a hard bound (``max_gpu_memory``): the decode batch is
            lowered until the window's buffers fit in it (:mod:`vidpipe.decode.gpu_buffers`).
        stream_id: written into every :class:`FrameMeta` (default: ``options.stream_id``).
        index: a scan to reuse (``None``: scanned on the first :meth:`batches`).

    Subclasses that can run their sessions in decoder processes
    (:mod:`vidpipe.decode.procrun`) override :meth:`_process_pool`.
    """

    name = "parallel"
    #: what decoder processes build for this backend (:mod:`vidpipe.decode.procworker`)
    process_kind: str | None = None

    def __init__(
        self,
        info: StreamInfo,
        *,
        device: "torch.device",
        options: DecodeOptions | None = None,
        session_factory: SessionFactory,
        fallback_factory: SessionFactory | None = None,
        layout: str = "rgb",
        buffer_device: "torch.device | None" = None,
        annexb: bool = False,
        workers: int = 1,
        segment_frames: int | None = None,
        window: int | None = None,
        buffer_bytes: int = 2 << 30,
        stream_id: int | None = None,
        index: StreamIndex | None = None,
        bounded: bool = False,
    ) -> None:
        import torch

        from vidpipe.decode.registry import BackendChoice

        SegmentState.__init__(
            self, info, options=options, session_factory=session_factory, fallback_factory=fallback_factory,
            annexb=annexb, workers=workers, stream_id=stream_id,
        )  # fmt: skip
        self.choice = BackendChoice(
            self.name, f"{type(self).__name__} was created directly"
        )  # the registry replaces it
        self.device = torch.device(device)
        self.layout = layout
        self.buffer_device = torch.device(buffer_device) if buffer_device is not None else self.device
        self.segment_frames = segment_frames
        self.window = window
        self.buffer_bytes = int(buffer_bytes)
        self.bounded = bool(bounded)
        self.index = index
        self._pool: Any = None

    def stats(self) -> dict[str, Any]:
        """Counters of the last :meth:`batches` run (JSON-friendly)."""
        pool = self._pool.stats if self._pool is not None else None
        plan = self.plan
        return {
            "decoder": self.name,
            "workers": self.workers_used,
            "processes": self.processes_used,
            "processes_lost": self.processes_lost,
            "frames_before_processes": self.frames_before_processes,
            "segments": len(plan.segments) if plan else 0,
            "packet_reader": self.packet_reader,
            "frames_decoded": self.frames_decoded,
            "frames_delivered": self.frames_delivered,
            "frames_missing": self.frames_missing,
            "timestamp_gaps": self.timestamp_gaps,
            "packets_decoded_planned": plan.decoded_packets if plan else 0,
            "packets_total": plan.index.packets if plan else 0,
            "bytes_host_to_device": self.bytes_host_to_device,
            "bytes_device_to_host": self.bytes_device_to_host,
            "fallback_segments": len(self.fallbacks),
            "buffer_peak_bytes": pool.peak_bytes if pool else self._ring_bytes,
            "buffer_allocations": pool.allocations if pool else 0,
            "buffer_reuses": pool.reuses if pool else 0,
            "partial": self.partial,
            "buffer_backoff": None if self.backoff is None else {"batch": self.backoff[0], "window": self.backoff[1]},
        }

    # ------------------------------------------------------------------------------ planning

    def row(self) -> tuple[tuple[int, ...], "torch.dtype", str]:
        """One decoded frame's ``(shape, dtype, format)`` in this decoder's layout."""
        import torch

        h, w = self.info.height, self.info.width
        if self.layout == "yuv":
            deep = self.info.bit_depth > 8
            return (h * 3 // 2, w), (torch.uint16 if deep else torch.uint8), ("p010" if deep else "nv12")
        return (3, h, w), torch.uint8, "rgb"

    def frame_bytes(self) -> int:
        """Bytes of one decoded frame (:meth:`row`)."""
        shape, dtype, _ = self.row()
        n = dtype.itemsize
        for s in shape:
            n *= s
        return n

    def _make_plan(self, batch_size: int) -> DecodePlan:
        from vidpipe.decode.probe import is_url

        if is_url(self.info.location):  # live / network: no scan, decode as it comes
            index = StreamIndex(self.info.source, self.info.time_base, 0, (), ())
            seg = Segment(0, 0, 0, None, None, None, (0, 0))
            return DecodePlan(index, False, (seg,))
        if self.index is None:
            self.index = scan_stream(self.info.location)
        window = self._window(batch_size)
        target = None
        if self.workers > 1:
            # small enough that every worker has a segment inside the window (in-order delivery
            # holds about two segments per worker), and at least ~3 segments per worker for balance
            k = self.workers
            target = self.segment_frames or max(1, min(window // (2 * k), -(-self.index.packets // (3 * k))))
        plan = plan_decode(self.index, self.options, target_frames=target)
        if not plan.exact and plan.segments:
            plan = DecodePlan(plan.index, False, plan.segments, decoded_packets=plan.decoded_packets)
        return plan

    def _check_timestamps(self, plan: DecodePlan) -> None:
        """Warn when a constant-rate stream's timestamps skip frames in the selected range (frames
        missing from the file; variable frame rate is never reported), see
        :func:`~vidpipe.decode.timing.timestamp_gaps`. Sets ``timestamp_gaps``."""
        from vidpipe.decode.timing import warn_timestamp_gaps

        start, end = self.options.start, self.options.end
        times = [t for t in map(plan.index.seconds, plan.frame_pts) if t is not None]
        times = [t for t in times if (start is None or t >= start) and (end is None or t < end)]
        self.timestamp_gaps = warn_timestamp_gaps(self.info.source, times)

    def _fit_batch(self, batch_size: int) -> int:
        """The decode batch under a memory bound (``bounded``: ``buffer_bytes`` came from
        ``max_gpu_memory``): lowered until the fewest buffers fit, else ``batch_size``."""
        if not self.bounded or self.buffer_device.type != "cuda":
            return batch_size
        from vidpipe.decode.gpu_buffers import fit_batch

        fitted = fit_batch(batch_size, self.buffer_bytes, self.frame_bytes(), source=self.info.source)
        if fitted < batch_size:
            logger.info("%s: decoding in batches of %d to fit %d MiB of frame buffers", self.info.source, fitted,
                        self.buffer_bytes >> 20)  # fmt: skip
        return fitted

    def _window(self, batch_size: int) -> int:
        if self.window is not None:
            w = self.window
        else:
            w = self.buffer_bytes // max(1, self.frame_bytes())
            if self.bounded:  # the window plus the two batches handed over and recycled
                w = (w - 2 * batch_size) // batch_size * batch_size
        w = max(2 * batch_size, w)
        return -(-w // batch_size) * batch_size

    def _sessions(self, plan: DecodePlan) -> int:
        """Sessions to decode an exact ``plan`` with in this process: one per segment, at most
        ``workers`` (a backend whose sessions cost to start may use fewer)."""
        return min(self.workers, len(plan.segments))

    # ------------------------------------------------------------------------------- running

    def batches(self, batch_size: int) -> Iterator[FrameBatch]:
        """Yield :class:`FrameBatch` objects of at most ``batch_size`` frames, in order.

        ``layout="yuv"``: ``(B, H*3/2, W)`` NV12 ``uint8`` (or P016 ``uint16``, format ``p010``)
        with the stream's :class:`~vidpipe.types.ColorSpec`; ``"rgb"``: ``(B, 3, H, W)`` uint8.
        Batches are complete except the last and where frames could not be decoded. See the
        CUDA stream contract in :mod:`vidpipe.decode.nvdec`.
        """
        from vidpipe.ops.pool import BufferPool

        batch_size = check_range("batch_size", batch_size, low=1, integer=True)
        self.error = None
        self.fallbacks = []
        self.backoff = None
        self._reset_counters()
        batch_size = self._fit_batch(batch_size)
        self.plan = plan = self._make_plan(batch_size)
        self._check_timestamps(plan)
        if self.index is not None and self.index.error is not None:
            self._errors.append(str(self.index.error))
        elif self.index is not None and (short := self._truncated(self.index)):
            self._errors.append(short)
        window = self._window(batch_size)
        if plan.exact and plan.total:  # never more buffers than the file's frames fill
            window = min(window, max(2 * batch_size, -(-plan.total // batch_size) * batch_size))
        procs = self._process_pool(plan) if plan.exact and len(plan.segments) > 1 else None
        if procs is not None:
            yield from self._run_in_processes(procs, plan, batch_size, window)
            return
        shape, dtype, fmt = self.row()
        pin = self.buffer_device.type == "cpu" and self.device.type == "cuda"
        cuda = self.buffer_device.type == "cuda"
        self._pool = BufferPool(self.buffer_device, pin_memory=pin, max_free=window // batch_size + 4)
        if cuda:  # the window's buffers now (a file of known length), fewer and smaller on out-of-memory errors
            from vidpipe.decode.gpu_buffers import reserve_buffers

            ahead = window if plan.exact else 2 * batch_size  # unknown length: the rest as it comes
            got = reserve_buffers(self._pool, shape, dtype, batch_size, ahead, source=self.info.source)
            if got != (batch_size, ahead):
                self.backoff = got
                batch_size, window = got
            self._pool.oom_wait = OOM_WAIT_S  # mid-run: wait for a buffer to come back, then fail clearly
        asm = BatchAssembler(
            self._pool,
            batch_size=batch_size,
            row_shape=shape,
            dtype=dtype,
            fmt=fmt,
            color=self.info.color if fmt != "rgb" else None,
            out_device=self.device,
        )
        k = self._sessions(plan) if plan.exact else 1
        self.workers_used = k
        logger.info(
            "%s: %s decoding %s frames in %d segments with %d session(s)",
            self.info.source,
            self.name,
            plan.total if plan.exact else "all",
            len(plan.segments),
            k,
        )
        try:
            if plan.segments:
                from vidpipe.decode.workers import run_workers

                yield from run_workers(self, plan, asm, k, window)
        finally:
            asm.close()
            self.bytes_host_to_device += asm.bytes_h2d
            self._finish_errors()

    def _process_pool(self, plan: DecodePlan) -> Any:
        """A :class:`~vidpipe.decode.proclease.Lease` of decoder processes to run this plan in, or
        ``None`` to use threads here (the default; see :class:`~vidpipe.decode.nvdec.NvdecDecoder`)."""
        return None

    def _process_settings(self) -> dict:
        """The backend's fields of :class:`~vidpipe.decode.procjob.ProcessJob` (the settings a
        decoder process needs besides the plan)."""
        return {}

    def _run_in_processes(self, lease: Any, plan: DecodePlan, batch_size: int, window: int) -> Iterator[FrameBatch]:
        from vidpipe.decode.procrun import run_processes

        self._pool = None
        self.processes_used = lease.size
        if lease.size:
            logger.info(
                "%s: %s decoding %s frames in %d segments with %d session(s) in %d processes",
                self.info.source, self.name, plan.total, len(plan.segments), self.workers, lease.size,
            )  # fmt: skip
        else:  # a LateLease: the processes are still starting
            logger.info("%s: %s decoding %s frames in %d segments with %d session(s) here until the decoder processes "
                        "are ready", self.info.source, self.name, plan.total, len(plan.segments), lease.here)  # fmt: skip
        try:
            yield from run_processes(self, plan, lease, self.process_kind, batch_size, window, self._process_settings())
        finally:
            lease.release()
            self._finish_errors()

    def _truncated(self, index: StreamIndex) -> str | None:
        """Why the scan looks cut short against what the container announced (a truncated
        file often demuxes to a clean end of file), else ``None``."""
        info, fps = self.info, self.info.fps
        known = [p for p in index.pts if p is not None]
        if not known or not fps or info.duration is None:
            return None
        last = index.seconds(max(known)) or 0.0
        shortfall = info.duration - (last + 1 / fps)
        tolerance = max(2 / fps, 0.02 * info.duration)
        if info.frame_count_exact and info.frame_count:
            short = info.frame_count - index.packets > max(2, 0.02 * info.frame_count)
        else:
            short, tolerance = True, max(tolerance, 0.5)
        if short and shortfall > tolerance:
            return (
                f"the stream ends at {last:.2f}s of {info.duration:.2f}s ({index.packets} packets"
                f"{f' of {info.frame_count}' if info.frame_count_exact else ''}); the file looks truncated"
            )
        return None

    def _finish_errors(self) -> None:
        if self._errors and self.error is None:
            first = self._errors[0]
            more = f" (and {len(self._errors) - 1} more)" if len(self._errors) > 1 else ""
            lost = f"{self.frames_missing} frame(s) could not be decoded: " if self.frames_missing else ""
            self.error = DecodeError(
                f"{self.info.source}: {lost}{first}{more}; the {self.frames_delivered} frames decoded were kept"
            )
            logger.warning("%s", self.error)
        elif self.frames_missing and self.error is None:
            # frames the scan planned that no decoder gave back (a damaged file: PyAVDecoder
            # reports its lost frames so too), not only a warning: the source is partial
            lost = f"{self.frames_missing} frame(s) could not be decoded and are lost"
            self.error = damaged_file(self.info.source, lost, self.frames_delivered)
            logger.warning("%s", self.error)

class PyAVParallelDecoder(SegmentParallelDecoder):
    """Segment-parallel PyAV decoding on the CPU: ``workers`` FFmpeg decoders over keyframe-aligned
    segments of one file, RGB ``(B, 3, H, W)`` uint8 batches in order, the same frames and colours
    as :class:`~vidpipe.decode.pyav.PyAVDecoder` (one converter per worker).

    Args:
        source: a :class:`StreamInfo` or a path.
        device: where batches go (CUDA: uploaded from pinned memory).
        options: frame selection.
        workers: concurrent decoders (default: one per 4 CPU cores, at least 2).
        threads: FFmpeg threads per decoder (default: the cores divided among the workers).
        segment_frames, buffer_bytes, stream_id, index: as for :class:`SegmentParallelDecoder`.
        processes: run the workers in this many decoder processes (0: threads here), batches
            in CPU shared memory (:mod:`vidpipe.decode.procrun`).
    """

    name = "pyav-parallel"
    process_kind = "pyav"

    def __init__(
        self,
        source: "StreamInfo | str | os.PathLike",
        *,
        device: "torch.device | str" = "cpu",
        options: DecodeOptions | None = None,
        workers: int | None = None,
        threads: int | None = None,
        segment_frames: int | None = None,
        buffer_bytes: int = 1 << 30,
        stream_id: int | None = None,
        processes: int = 0,
        index: "StreamIndex | None" = None,
    ) -> None:
        import torch

        from vidpipe.decode.probe import probe
        from vidpipe.device import resolve_device

        info = source if isinstance(source, StreamInfo) else probe(source)
        k, per, session = _pyav_sessions(info, workers, threads)
        self.processes = check_range("processes", processes, low=0, high=MAX_DECODER_PROCESSES, integer=True)
        self.threads = per

        super().__init__(
            info,
            device=resolve_device(device),
            options=options,
            session_factory=session,
            layout="rgb",
            buffer_device=torch.device("cpu"),
            workers=k,
            segment_frames=segment_frames,
            buffer_bytes=buffer_bytes,
            stream_id=stream_id,
            index=index,
        )

    def _process_pool(self, plan: DecodePlan) -> Any:
        if not self.processes or self.device.type != "cpu":
            return None
        from vidpipe.decode.procpool import get_pool, is_starting

        if is_starting(self.buffer_device):  # started in the background: they join the run when ready
            from vidpipe.decode.proclate import LateLease

            return LateLease(self.buffer_device, among=self.options.files_at_once, info=None,
                             sessions=self.workers, here=self._sessions(plan))  # fmt: skip
        pool = get_pool(self.buffer_device, self.processes, start=True)
        return pool.lease(among=self.options.files_at_once) if pool is not None else None

    def _process_settings(self) -> dict:
        return {"threads": self.threads}


def _pyav_sessions(info: StreamInfo, workers: int | None, threads: int | None) -> tuple[int, int, SessionFactory]:
    """``(sessions, FFmpeg threads per session, factory)`` of a PyAV segment decode of ``info``
    (RGB rows): by default a quarter of the cores' sessions (at least two), sharing the cores."""
    from vidpipe.decode.demux import Demuxer
    from vidpipe.decode.sessions import PyAVSession

    cores = os.cpu_count() or 2
    k = workers if workers is not None else max(2, cores // 4)
    per = threads if threads is not None else max(1, cores // k)
    with Demuxer(info.location) as dmx:
        extradata = dmx.extradata

    def session(worker: int) -> PyAVSession:
        return PyAVSession(info, layout="rgb", extradata=extradata, threads=per)

    return k, per, session


def pyav_process_pass(info: StreamInfo, *, options: DecodeOptions, workers: int, threads: int,
                      stream_id: int) -> SegmentState:  # fmt: skip
    """What a decoder process decodes one PyAV job with, without PyTorch: the pass's state and
    its PyAV sessions, writing RGB rows into the parent's CPU ring (NumPy views of it)."""
    _, _, session = _pyav_sessions(info, workers, threads)
    return SegmentState(info, options=options, session_factory=session, workers=workers, stream_id=stream_id)
