"""Segment-parallel decoding of one file: K decoder sessions at once, frames delivered in order.

How it runs (``workers > 1``)::

    reader thread ──packets──► per-segment queues ──► K worker threads (one session each)
        (demux once,                                     │ decode a segment, copy each kept
         route_packets)                                  │ frame into its batch row
                                                         ▼
    consumer (the caller of batches()) ◄── ReorderBuffer (positions in order, bounded)

- The file is scanned once (:func:`~vidpipe.decode.segments.scan_stream`) and planned into
  keyframe-aligned segments (:func:`~vidpipe.decode.segments.plan_decode`); workers take
  segments in stream order, so the segments in flight are always a window of the file.
- A worker writes frame ``p`` only when ``p`` is less than ``window`` positions ahead of the
  consumer, so memory is bounded: a worker ahead of the consumer blocks.
- Frames nobody asked for (stride, time range) are never copied; GOPs without a kept frame are
  never decoded; a segment stops feeding its decoder once it has all its kept frames.
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
import queue
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from vidpipe._validate import check_range
from vidpipe.decode.assemble import BatchAssembler
from vidpipe.decode.base import DecodeOptions, Decoder, StreamInfo
from vidpipe.decode.reorder import MISSING, Cancelled, ReorderBuffer
from vidpipe.decode.routing import Routed, route_packets
from vidpipe.decode.segments import DecodePlan, Segment, StreamIndex, plan_decode, scan_stream
from vidpipe.errors import DecodeError
from vidpipe.types import FrameBatch, FrameMeta

if TYPE_CHECKING:
    import torch

    from vidpipe.decode.sessions import FrameRef, Session

__all__ = ["SegmentParallelDecoder", "PyAVParallelDecoder", "SessionFactory"]

logger = logging.getLogger(__name__)

#: ``factory(worker_id) -> Session``
SessionFactory = Callable[[int], "Session"]


class _Stop(Exception):
    """Internal: the segment has all its frames / the stream is past ``end``."""


class SegmentParallelDecoder(Decoder):
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
        stream_id: written into every :class:`FrameMeta`.
        index: a scan to reuse (``None``: scanned on the first :meth:`batches`).
    """

    name = "parallel"

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
        stream_id: int = 0,
        index: StreamIndex | None = None,
    ) -> None:
        import torch

        from vidpipe.decode.registry import BackendChoice

        self.choice = BackendChoice(self.name, f"{type(self).__name__} was created directly")  # the registry replaces it
        self.info = info
        self.device = torch.device(device)
        self.options = options if options is not None else DecodeOptions()
        self.session_factory = session_factory
        self.fallback_factory = fallback_factory
        self.layout = layout
        self.buffer_device = torch.device(buffer_device) if buffer_device is not None else self.device
        self.annexb = annexb
        self.workers = check_range("workers", workers, low=1, integer=True)
        self.segment_frames = segment_frames
        self.window = window
        self.buffer_bytes = int(buffer_bytes)
        self.stream_id = stream_id
        self.index = index
        self.plan: DecodePlan | None = None
        self.error: Exception | None = None
        self.fallbacks: list[str] = []  # segments retried on the fallback session, with the reason
        self._reset_counters()
        self._pool: Any = None

    # ----------------------------------------------------------------------------- counters

    def _reset_counters(self) -> None:
        self.frames_decoded = 0
        self.frames_delivered = 0
        self.frames_missing = 0
        self.bytes_host_to_device = 0
        self.bytes_device_to_host = 0  # decoded frames never go to the host on the GPU path
        self.workers_used = 0
        self._positions_before = 0  # inexact streams: positions are numbered from here
        self._errors: list[str] = []
        self._lock = threading.Lock()

    def stats(self) -> dict[str, Any]:
        """Counters of the last :meth:`batches` run (JSON-friendly)."""
        pool = self._pool.stats if self._pool is not None else None
        plan = self.plan
        return {
            "decoder": self.name,
            "workers": self.workers_used,
            "segments": len(plan.segments) if plan else 0,
            "frames_decoded": self.frames_decoded,
            "frames_delivered": self.frames_delivered,
            "frames_missing": self.frames_missing,
            "packets_decoded_planned": plan.decoded_packets if plan else 0,
            "packets_total": plan.index.packets if plan else 0,
            "bytes_host_to_device": self.bytes_host_to_device,
            "bytes_device_to_host": self.bytes_device_to_host,
            "fallback_segments": len(self.fallbacks),
            "buffer_peak_bytes": pool.peak_bytes if pool else 0,
            "buffer_allocations": pool.allocations if pool else 0,
            "buffer_reuses": pool.reuses if pool else 0,
            "partial": self.partial,
        }

    # ------------------------------------------------------------------------------ planning

    def _row(self) -> tuple[tuple[int, ...], "torch.dtype", str]:
        import torch

        h, w = self.info.height, self.info.width
        if self.layout == "yuv":
            deep = self.info.bit_depth > 8
            return (h * 3 // 2, w), (torch.uint16 if deep else torch.uint8), ("p010" if deep else "nv12")
        return (3, h, w), torch.uint8, "rgb"

    def _frame_bytes(self) -> int:
        shape, dtype, _ = self._row()
        n = 1
        for s in shape:
            n *= s
        return n * (2 if self.info.bit_depth > 8 and self.layout == "yuv" else 1)

    def _make_plan(self, batch_size: int) -> DecodePlan:
        from vidpipe.decode.probe import is_url

        if is_url(self.info.source):  # live / network: no scan, decode as it comes
            index = StreamIndex(self.info.source, self.info.time_base, 0, (), ())
            seg = Segment(0, 0, 0, None, None, None, (0, 0))
            return DecodePlan(index, False, (seg,))
        if self.index is None:
            self.index = scan_stream(self.info.source)
        window = self._window(batch_size)
        target = None
        if self.workers > 1:
            target = self.segment_frames or max(1, window // (self.workers + 1))
        plan = plan_decode(self.index, self.options, target_frames=target)
        if not plan.exact and plan.segments:
            plan = DecodePlan(plan.index, False, plan.segments, decoded_packets=plan.decoded_packets)
        return plan

    def _window(self, batch_size: int) -> int:
        if self.window is not None:
            w = self.window
        else:
            w = self.buffer_bytes // max(1, self._frame_bytes())
        w = max(2 * batch_size, w)
        return -(-w // batch_size) * batch_size

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
        self._reset_counters()
        self.plan = plan = self._make_plan(batch_size)
        if self.index is not None and self.index.error is not None:
            self._errors.append(str(self.index.error))
        shape, dtype, fmt = self._row()
        window = self._window(batch_size)
        pin = self.buffer_device.type == "cpu" and self.device.type == "cuda"
        self._pool = BufferPool(self.buffer_device, pin_memory=pin, max_free=window // batch_size + 4)
        asm = BatchAssembler(
            self._pool,
            batch_size=batch_size,
            row_shape=shape,
            dtype=dtype,
            fmt=fmt,
            color=self.info.color if fmt != "rgb" else None,
            out_device=self.device,
        )
        k = min(self.workers, len(plan.segments)) if plan.exact else 1
        self.workers_used = k
        logger.info(
            "%s: %s decoding %s frames in %d segments with %d session(s)",
            self.info.source, self.name, plan.total if plan.exact else "all", len(plan.segments), k,
        )
        try:
            if plan.segments:
                yield from self._run(plan, asm, k, window)
        finally:
            asm.close()
            self.bytes_host_to_device += asm.bytes_h2d
            self._finish_errors()

    def _finish_errors(self) -> None:
        if self._errors and self.error is None:
            first = self._errors[0]
            more = f" (and {len(self._errors) - 1} more)" if len(self._errors) > 1 else ""
            self.error = DecodeError(
                f"{self.info.source}: {self.frames_missing} frame(s) could not be decoded: {first}{more}; "
                f"the {self.frames_delivered} frames decoded were kept"
            )
            logger.warning("%s", self.error)
        elif self.frames_missing and logger.isEnabledFor(logging.INFO):
            logger.info("%s: %d planned frame(s) did not come out of the decoder", self.info.source, self.frames_missing)

    # ---------------------------------------------------------------------- segment decoding

    def _meta(self, index: int, pts: int | None) -> FrameMeta:
        sec = self.plan.index.seconds(pts) if (self.plan and pts is not None and pts >= 0) else None
        return FrameMeta(self.info.source, self.stream_id, index, sec, self.info.height, self.info.width)

    def _decode_segment(
        self,
        seg: Segment,
        steps: Iterator[Routed],
        sessions: list[Any],
        worker: int,
        emit: Callable[[int, FrameMeta, "FrameRef", Any], None],
    ) -> None:
        """Feed ``seg``'s packets (from ``steps``, up to its end marker) to ``sessions[0]`` and
        ``emit(position, meta, frame, stream)`` the kept frames. On a failure, replace
        ``sessions[0]`` by the fallback session and decode the segment again (frames already
        emitted are not emitted twice). Raises :class:`_Stop` when an inexact stream is done."""
        plan = self.plan
        exact = plan.exact
        opts = self.options
        emitted: dict[int, int] = {}  # frame index -> output position
        seen: list[Any] = []
        state = {"index": -1, "stop": False}

        def take(ref: "FrameRef") -> None:
            with self._lock:
                self.frames_decoded += 1
            pts = ref.pts
            if exact:
                if pts is None or not seg.owns(pts):
                    return
                pos = plan.position_of.get(pts)
                if pos is None:
                    return
                index = plan.index_of[pts]
                if index in emitted:
                    return
            else:  # numbered in output order; a replay counts from the start again
                state["index"] += 1
                index = state["index"]
                if index in emitted:
                    return
                want = opts.wants(index, self._meta(index, pts).pts)
                if want is None:
                    state["stop"] = True
                    raise _Stop
                if not want:
                    return
                pos = len(emitted) + self._positions_before
            emit(pos, self._meta(index, pts), ref, sessions[0].stream)
            emitted[index] = pos
            if exact and len(emitted) >= seg.count:
                raise _Stop
            if not exact and opts.max_frames is not None and len(emitted) >= opts.max_frames:
                state["stop"] = True
                raise _Stop

        def run(replay: list[Any]) -> None:
            sess = sessions[0]
            sess.start(seg)
            state["index"] = -1
            try:
                for pkt in replay:
                    for ref in sess.feed(pkt):
                        take(ref)
                for step in steps:
                    if step.packet is None:
                        if step.error is not None:
                            self._note_error(seg, step.error)
                        break
                    seen.append(step.packet)
                    for ref in sess.feed(step.packet):
                        take(ref)
            except _Stop:
                if exact:
                    for _ in steps:  # the rest of this segment's packets are not needed
                        pass
            if state["stop"]:
                return  # inexact stream finished (past ``end`` / ``max_frames``)
            for ref in sess.finish():
                try:
                    take(ref)
                except _Stop:
                    if state["stop"]:
                        break

        try:
            run([])
        except Cancelled:
            raise
        except Exception as exc:  # noqa: BLE001 - a session failure is handled per segment
            reason = f"{sessions[0].kind} failed on segment {seg.number} ({type(exc).__name__}: {exc})"
            if self.fallback_factory is None:
                self._note_error(seg, reason)
            else:
                logger.warning("%s: %s; decoding the segment again on the fallback", self.info.source, reason)
                with self._lock:
                    self.fallbacks.append(reason)
                try:
                    sessions[0].close()
                except Exception:  # noqa: BLE001
                    logger.debug("closing the failed session failed", exc_info=True)
                try:
                    sessions[0] = self.fallback_factory(worker)
                    run(list(seen))
                except Cancelled:
                    raise
                except Exception as exc2:  # noqa: BLE001
                    self._note_error(seg, f"{reason}; the fallback failed too ({type(exc2).__name__}: {exc2})")
            if exact:
                for _ in steps:
                    pass
        if exact and seg.count > len(emitted):
            with self._lock:
                self.frames_missing += seg.count - len(emitted)
        if state["stop"]:
            raise _Stop

    def _note_error(self, seg: Segment, error: Any) -> None:
        with self._lock:
            self._errors.append(f"segment {seg.number}: {error}")

    # ------------------------------------------------------------------------------ threads

    def _run(self, plan: DecodePlan, asm: BatchAssembler, k: int, window: int) -> Iterator[FrameBatch]:
        """Reader thread + ``k`` worker threads + the consumer (this generator)."""
        from vidpipe.decode.demux import Demuxer

        segs = plan.segments
        reorder: ReorderBuffer[Any] = ReorderBuffer(window, plan.total)
        cond = threading.Condition()
        queues: dict[int, queue.Queue] = {}
        state = {"taken": -1, "next": 0, "stop": False}
        prefetch = k
        # exact plans bound the packets read ahead by segments (prefetch); a stream without an
        # index is one segment, bounded by its queue
        maxsize = 0 if plan.exact else 256

        def q(s: int) -> queue.Queue:
            with cond:
                got = queues.get(s)
                if got is None:
                    got = queues[s] = queue.Queue(maxsize)
                return got

        def put(s: int, step: Routed) -> bool:
            qs = q(s)
            while True:
                try:
                    qs.put(step, timeout=0.2)
                    return True
                except queue.Full:
                    if state["stop"]:
                        return False

        def reader() -> None:
            try:
                with Demuxer(self.info.source, annexb=self.annexb, stream_id=self.stream_id) as dmx:
                    for step in route_packets(dmx, plan):
                        for s in step.segments:
                            with cond:
                                cond.wait_for(lambda s=s: state["stop"] or s <= state["taken"] + prefetch)
                                if state["stop"]:
                                    return
                            if not put(s, step):
                                return
            except BaseException as exc:  # noqa: BLE001 - every segment must still end
                logger.warning("%s: reading stopped (%s: %s)", self.info.source, type(exc).__name__, exc)
                for s in range(len(segs)):
                    if not put(s, Routed((s,), None, exc)):
                        return

        def steps(s: int) -> Iterator[Routed]:
            qs = q(s)
            while True:
                step = qs.get()
                yield step
                if step.packet is None:
                    return

        def worker(wid: int) -> None:
            sessions: list[Any] = []
            last = [-1]

            def emit(pos: int, meta: FrameMeta, ref: "FrameRef", stream: Any) -> None:
                reorder.reserve(pos)
                reorder.put(pos, asm.write(pos, meta, ref, writer=wid, stream=stream))
                last[0] = pos

            try:
                sessions.append(self._new_session(wid))
                while True:
                    with cond:
                        if state["stop"] or state["next"] >= len(segs):
                            break
                        s = state["next"]
                        state["next"] += 1
                        state["taken"] = max(state["taken"], s)
                        cond.notify_all()
                    seg = segs[s]
                    try:
                        self._decode_segment(seg, steps(s), sessions, wid, emit)
                    except _Stop:
                        break
                    finally:
                        if plan.exact:
                            reorder.skip(*seg.positions)
                if not plan.exact:
                    reorder.close(last[0] + 1)
            except Cancelled:
                pass
            except BaseException as exc:  # noqa: BLE001 - wake the consumer with the failure
                reorder.fail(exc)
            finally:
                for sess in sessions:
                    try:
                        sess.close()
                    except Exception:  # noqa: BLE001
                        logger.debug("session close failed", exc_info=True)

        threads = [threading.Thread(target=reader, name="vidpipe-demux", daemon=True)]
        threads += [threading.Thread(target=worker, args=(i,), name=f"vidpipe-dec{i}", daemon=True) for i in range(k)]
        for t in threads:
            t.start()
        try:
            while True:
                asm.recycle()
                got = reorder.get()
                if got is None:
                    break
                out = asm.add(*got)
                if out is not None:
                    self.frames_delivered += len(out)
                    yield out
            out = asm.flush()
            if out is not None:
                self.frames_delivered += len(out)
                yield out
                asm.recycle()
            self.frames_missing = max(self.frames_missing, reorder.missing)
        finally:
            with cond:
                state["stop"] = True
                cond.notify_all()
                for s, qs in queues.items():
                    try:
                        qs.put_nowait(Routed((s,), None, None))  # wake a worker waiting for packets
                    except queue.Full:
                        pass  # it has packets to chew on; the cancelled buffer stops it
            reorder.cancel()
            for t in threads:
                t.join(timeout=5 if t is threads[0] else 30)
                if t.is_alive():
                    logger.warning("%s: thread %s did not stop", self.info.source, t.name)

    def _new_session(self, wid: int) -> Any:
        try:
            return self.session_factory(wid)
        except Exception as exc:  # noqa: BLE001
            if self.fallback_factory is None:
                raise
            reason = f"worker {wid} could not start its decoder ({type(exc).__name__}: {exc})"
            logger.warning("%s: %s; using the fallback decoder", self.info.source, reason)
            with self._lock:
                self.fallbacks.append(reason)
            return self.fallback_factory(wid)


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
        segment_frames, buffer_bytes, stream_id: as for :class:`SegmentParallelDecoder`.
    """

    name = "pyav-parallel"

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
        stream_id: int = 0,
    ) -> None:
        import torch

        from vidpipe.decode.demux import Demuxer
        from vidpipe.decode.probe import probe
        from vidpipe.decode.sessions import PyAVSession
        from vidpipe.device import resolve_device

        info = source if isinstance(source, StreamInfo) else probe(source)
        cores = os.cpu_count() or 2
        k = workers if workers is not None else max(2, cores // 4)
        per = threads if threads is not None else max(1, cores // k)
        with Demuxer(info.source) as dmx:
            extradata = dmx.extradata

        def session(worker: int) -> PyAVSession:
            return PyAVSession(info, layout="rgb", extradata=extradata, threads=per)

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
        )
