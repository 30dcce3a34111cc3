"""The threads of segment-parallel decoding: ``k`` workers and the consumer loop.

:func:`run_workers` runs one :class:`~vidpipe.decode.parallel.SegmentParallelDecoder` pass, which
it sees as a :class:`~vidpipe.decode.segment_job.SegmentJob` (its settings, its factories, and
``note_*`` methods to report through):

- each **worker** takes the next segment in stream order, reads that segment's packets itself
  (:func:`make_reader`: straight from the file by the scan's byte ranges, else its own PyAV
  demuxer, see :mod:`vidpipe.decode.routing`) and runs :func:`decode_segment` with its session,
  copying each kept frame into its batch row once the reorder buffer lets it (a worker ahead of
  the consumer by ``window`` positions waits). Records are handed over a batch-run at a time:
  the copies of a run of positions in one batch share one CUDA event and one
  :meth:`~vidpipe.decode.reorder.ReorderBuffer.put_many`;
- the **consumer** (the generator itself) takes runs of positions in order from the
  :class:`~vidpipe.decode.reorder.ReorderBuffer` and yields complete batches.

Why no reader thread: demuxing and the Annex-B filter take and release the GIL several times a
packet; one thread doing it for a dozen decoder threads, all contending for the GIL, was the
bottleneck (NVDEC sessions starved of packets). Reading per worker spreads it, and the file
reader needs no FFmpeg call per packet at all.

Every exit path (end, error, the caller closing the generator) cancels the reorder buffer,
wakes waiting workers and joins the threads.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from vidpipe.decode.assemble import Written
from vidpipe.decode.cuda_driver import DriverStream
from vidpipe.decode.reorder import Cancelled, ReorderBuffer
from vidpipe.decode.routing import DemuxReader, PacketReader, Routed, packet_numbers
from vidpipe.errors import GpuMemoryError

if TYPE_CHECKING:
    from vidpipe.decode.assemble import BatchAssembler
    from vidpipe.decode.segment_job import SegmentJob
    from vidpipe.decode.segments import DecodePlan, Segment
    from vidpipe.decode.sessions import FrameRef
    from vidpipe.types import FrameBatch, FrameMeta

__all__ = [
    "run_workers", "decode_segment", "new_session", "make_reader", "Emitter", "SharedIndex", "MAX_FAILURES", "Stop",
]  # fmt: skip

logger = logging.getLogger(__name__)

#: a worker whose primary session failed this often decodes its remaining segments on the fallback
MAX_FAILURES = 3


class Stop(Exception):
    """Internal: the segment has all its frames / an unindexed stream is past ``end``."""


def decode_segment(
    dec: "SegmentJob",
    seg: "Segment",
    steps: Iterator[Routed],
    sessions: list[Any],
    worker: int,
    emit: Callable[[int, "FrameMeta", "FrameRef", Any], None],
) -> int:
    """Feed ``seg``'s packets (from ``steps``, up to its end marker) to ``sessions[0]`` and
    ``emit(position, meta, frame, stream)`` the kept frames. On a failure, decode the
    segment again on a fallback session (frames already emitted are not emitted twice);
    ``sessions[0]`` is then ``None`` (the worker makes a new one for its next segment).
    Returns 1 if the session failed, else 0. Raises :class:`Stop` when an inexact stream
    is done."""
    plan = dec.plan
    exact = plan.exact
    opts = dec.options
    emitted: dict[int, int] = {}  # frame index -> output position
    given_up: set[int] = set()  # positions of this segment marked missing before its end
    seen: list[Any] = []
    state = {"index": -1, "stop": False, "decoded": 0}

    def give_up_before(pos: int) -> None:
        """The consumer may be waiting for a position of this segment before ``pos`` that never
        came (a damaged stream's lost frames: a decoder gives its frames in order), while this
        worker waits for the consumer to make room for ``pos``: a segment longer than the window
        would never reach its end, where its missing positions are marked. They are marked now."""
        done = set(emitted.values())
        gap = [q for q in range(seg.positions[0], pos) if q not in done and q not in given_up]
        if gap:
            emit.give_up(gap[0], pos)  # type: ignore[attr-defined]
            given_up.update(gap)

    def take(ref: "FrameRef") -> None:
        state["decoded"] += 1
        pts = ref.pts
        if exact:
            if pts is None or not seg.owns(pts):
                return
            pos = plan.position_of.get(pts)
            if pos is None:
                return
            index = plan.index_of[pts]
            if index in emitted or pos in given_up:
                return
            if not emit.writable(pos):  # type: ignore[attr-defined]
                give_up_before(pos)
        else:  # numbered in output order from ``start``; a replay counts from the start again
            sec = dec.meta(0, pts).pts
            if opts.start is not None and sec is not None and sec < opts.start:
                return
            state["index"] += 1
            index = state["index"]
            if index in emitted:
                return
            want = opts.wants(index, sec)
            if want is None:
                state["stop"] = True
                raise Stop
            if not want:
                return
            pos = len(emitted) + dec.positions_before
        emit(pos, dec.meta(index, pts), ref, sessions[0].stream)
        emitted[index] = pos
        if exact and len(emitted) >= seg.count:
            raise Stop
        if not exact and opts.max_frames is not None and len(emitted) >= opts.max_frames:
            state["stop"] = True
            raise Stop

    def run(replay: list[Any]) -> None:
        sess = sessions[0]
        sess.start(seg)
        state["index"] = -1
        with on_stream(sess.stream):
            run_on(sess, replay)

    def run_on(sess: Any, replay: list[Any]) -> None:
        try:
            for pkt in replay:
                for ref in sess.feed(pkt):
                    take(ref)
            for step in steps:
                if step.packet is None:
                    if step.error is not None:
                        dec.note_error(seg, step.error)
                    break
                seen.append(step.packet)
                for ref in sess.feed(step.packet):
                    take(ref)
        except Stop:
            if exact:
                for _ in steps:  # the rest of this segment's packets are not needed
                    pass
        if state["stop"]:
            return  # inexact stream finished (past ``end`` / ``max_frames``)
        for ref in sess.finish():
            try:
                take(ref)
            except Stop:
                if state["stop"]:
                    break

    failed = 0
    try:
        run([])
    except (Cancelled, GpuMemoryError):  # no buffer for the frames: no fallback can help
        raise
    except Exception as exc:  # noqa: BLE001 - a session failure is handled per segment
        failed = 1
        reason = f"{sessions[0].kind} failed on segment {seg.number} ({type(exc).__name__}: {exc})"
        try:  # keep the frames the failed session had already decoded
            with on_stream(sessions[0].stream):
                for ref in sessions[0].finish():
                    take(ref)
        except Cancelled:
            raise
        except Exception:  # noqa: BLE001 - Stop, or the session is unusable
            pass
        if dec.fallback_factory is None:
            dec.note_error(seg, reason)
        else:
            logger.warning("%s: %s; decoding the segment again on the fallback", dec.info.source, reason)
            dec.note_fallback(reason)
            try:
                sessions[0].close()
            except Exception:  # noqa: BLE001
                logger.debug("closing the failed session failed", exc_info=True)
            try:
                sessions[0] = dec.fallback_factory(worker)
                run(list(seen))
            except (Cancelled, GpuMemoryError):
                raise
            except Exception as exc2:  # noqa: BLE001
                dec.note_error(seg, f"{reason}; the fallback failed too ({type(exc2).__name__}: {exc2})")
        try:
            if sessions[0] is not None:
                sessions[0].close()
        except Exception:  # noqa: BLE001
            logger.debug("closing a session failed", exc_info=True)
        sessions[0] = None
        if exact:
            for _ in steps:
                pass
    dec.count(decoded=state["decoded"], missing=seg.count - len(emitted) if exact and seg.count > len(emitted) else 0)
    if state["stop"]:
        raise Stop
    return failed


def on_stream(stream: Any) -> Any:
    """``torch.cuda.stream(stream)`` (``stream`` current for the block), or a no-op for ``None``
    and for a decoder process's :class:`~vidpipe.decode.cuda_driver.DriverStream` (its copies
    name their stream)."""
    if stream is None or isinstance(stream, DriverStream):
        return contextlib.nullcontext()
    import torch

    return torch.cuda.stream(stream)


class Emitter:
    """A worker's hand-over of decoded frames: reserve the position, copy the frame into its
    row, and pass the records to the consumer a run at a time (one event per run). A run ends
    at a batch boundary, a change of CUDA stream (fallback session), before waiting for the
    consumer, and at the end of each segment (:meth:`flush`).

    ``reorder`` and ``asm`` are a :class:`ReorderBuffer` and a :class:`BatchAssembler` here; a
    decoder process passes its :class:`~vidpipe.decode.procworker.ChildJob`, which does the
    same through a shared ring and messages to the parent."""

    __slots__ = ("reorder", "asm", "writer", "batch_size", "items", "batch", "stream", "last")

    def __init__(self, reorder: ReorderBuffer, asm: "BatchAssembler", writer: int) -> None:
        self.reorder = reorder
        self.asm = asm
        self.writer = writer
        self.batch_size = asm.batch_size
        self.items: list[tuple[int, Any]] = []
        self.batch = -1
        self.stream: Any = None
        self.last = -1  # highest position handed over

    def __call__(self, pos: int, meta: "FrameMeta", ref: "FrameRef", stream: Any) -> None:
        batch = pos // self.batch_size
        if self.items and (batch != self.batch or stream is not self.stream or not self.reorder.writable(pos)):
            self.flush()
        self.reorder.reserve(pos)
        self.asm.write(pos, ref, writer=self.writer, stream=stream)
        self.items.append((pos, meta))
        self.batch, self.stream = batch, stream

    def writable(self, pos: int) -> bool:
        """Whether ``pos`` can be written without waiting for the consumer."""
        return self.reorder.writable(pos)

    def give_up(self, start: int, end: int) -> None:
        """Positions in ``[start, end)`` not handed over will not come: the consumer skips them."""
        self.flush()
        self.reorder.skip(start, end)

    def flush(self) -> None:
        if not self.items:
            return
        event = self.asm.seal(self.stream)
        w = self.writer
        records = [(p, Written(m, w, event)) for p, m in self.items]
        self.items = []
        self.reorder.put_many(records)
        self.last = max(self.last, records[-1][0])


class SharedIndex:
    """What the workers' readers share: built once per run, on first use."""

    def __init__(self, dec: "SegmentJob", plan: "DecodePlan") -> None:
        self.dec = dec
        self.plan = plan
        self._lock = threading.Lock()
        self._packet_of: dict[int, int] | None = None
        self._keys: frozenset[int] | None = None

    def packet_of(self) -> dict[int, int]:
        with self._lock:
            if self._packet_of is None:
                self._packet_of = packet_numbers(self.plan)
            return self._packet_of

    def keyframes(self) -> frozenset[int]:
        with self._lock:
            if self._keys is None:
                self._keys = frozenset(self.plan.index.keyframes)
            return self._keys


#: read packets straight from the file when the scan verified their byte ranges (else PyAV)
FILE_READS = True


def make_reader(dec: "SegmentJob", plan: "DecodePlan", shared: SharedIndex | None = None) -> PacketReader:
    """A worker's packet reader: a :class:`~vidpipe.decode.fileread.FileReader` when the plan is
    exact and the scan verified the packets' byte ranges (and, for Annex-B, the codec header
    converts), else a :class:`~vidpipe.decode.routing.DemuxReader`."""
    shared = shared or SharedIndex(dec, plan)
    index = plan.index
    if FILE_READS and plan.exact and index.byte_ranges:
        from vidpipe.decode.annexb import AnnexB
        from vidpipe.decode.fileread import FileReader
        from vidpipe.errors import UnsupportedError

        conv = None
        try:
            if dec.annexb and index.codec in ("h264", "hevc"):
                conv = AnnexB(index.codec, index.extradata)
            dec.note_packet_reader("file")
            return FileReader(
                plan, converter=conv, stream_id=dec.stream_id, keyframes=shared.keyframes(),
                fallback=lambda: _demux_reader(dec, plan, shared),
            )  # fmt: skip
        except (UnsupportedError, OSError) as exc:
            logger.debug("%s: reading with PyAV (%s)", dec.info.source, exc)
    return _demux_reader(dec, plan, shared)


def _demux_reader(dec: "SegmentJob", plan: "DecodePlan", shared: SharedIndex) -> DemuxReader:
    packet_of = shared.packet_of() if plan.exact else {}
    prefix = b""
    index = plan.index
    if dec.annexb and index.codec == "h264" and index.extradata:
        from vidpipe.decode.annexb import AnnexB
        from vidpipe.errors import UnsupportedError

        try:
            conv = AnnexB("h264", index.extradata)
            prefix = b"" if conv.passthrough else conv.sps + conv.pps
        except UnsupportedError:
            pass
    dec.note_packet_reader("pyav")
    return DemuxReader(
        plan, source=dec.info.location, annexb=dec.annexb, stream_id=dec.stream_id, packet_of=packet_of,
        start_prefix=prefix,
    )  # fmt: skip


def run_workers(
    dec: "SegmentJob", plan: "DecodePlan", asm: "BatchAssembler", k: int, window: int
) -> Iterator["FrameBatch"]:
    """``k`` worker threads + the consumer (this generator)."""
    segs = plan.segments
    reorder: ReorderBuffer[Any] = ReorderBuffer(window, plan.total)
    lock = threading.Lock()
    state = {"next": 0, "stop": False}
    shared = SharedIndex(dec, plan)

    def worker(wid: int) -> None:
        sessions: list[Any] = [None]
        failures = 0  # primary sessions of this worker that failed
        emit = Emitter(reorder, asm, wid)
        reader = None
        try:
            while True:
                with lock:
                    if state["stop"] or state["next"] >= len(segs):
                        break
                    s = state["next"]
                    state["next"] += 1
                seg = segs[s]
                if reader is None:
                    reader = make_reader(dec, plan, shared)
                if sessions[0] is None:
                    sessions[0] = new_session(dec, wid, failures)
                done = False
                try:
                    failures += decode_segment(dec, seg, reader.steps(seg), sessions, wid, emit)
                except Stop:
                    done = True
                emit.flush()
                if plan.exact:
                    reorder.skip(*seg.positions)
                if done:
                    break
            if not plan.exact:
                reorder.close(emit.last + 1)
        except Cancelled:
            pass
        except BaseException as exc:  # noqa: BLE001 - wake the consumer with the failure
            reorder.fail(exc)
        finally:
            for sess in sessions:
                try:
                    if sess is not None:
                        sess.close()
                except Exception:  # noqa: BLE001
                    logger.debug("session close failed", exc_info=True)
            if reader is not None:
                try:
                    reader.close()
                except Exception:  # noqa: BLE001
                    logger.debug("reader close failed", exc_info=True)

    def cancel() -> None:  # Decoder.close() while the consumer is suspended in a yield
        with lock:
            state["stop"] = True
        reorder.cancel()

    dec.on_close(cancel)
    threads = [threading.Thread(target=worker, args=(i,), name=f"vidpipe-dec{i}", daemon=True) for i in range(k)]
    for t in threads:
        t.start()
    bs = asm.batch_size
    try:
        while True:
            asm.recycle()
            run = reorder.get_ready(bs - reorder.next_position % bs)
            if run is None:
                break
            for pos, item in run:
                out = asm.add(pos, item)
                if out is not None:
                    dec.note_delivered(len(out))
                    yield out
        out = asm.flush()
        if out is not None:
            dec.note_delivered(len(out))
            yield out
            asm.recycle()
        dec.note_missing(reorder.missing)
    finally:
        with lock:
            state["stop"] = True
        reorder.cancel()
        for t in threads:
            t.join(timeout=30)
            if t.is_alive():
                logger.warning("%s: thread %s did not stop", dec.info.source, t.name)


def new_session(dec: "SegmentJob", wid: int, failures: int) -> Any:
    """The worker's primary session, or its fallback once the primary failed
    :data:`MAX_FAILURES` times or cannot be created."""
    if failures >= MAX_FAILURES and dec.fallback_factory is not None:
        return dec.fallback_factory(wid)
    try:
        return dec.session_factory(wid)
    except Exception as exc:  # noqa: BLE001
        if dec.fallback_factory is None:
            raise
        reason = f"worker {wid} could not start its decoder ({type(exc).__name__}: {exc})"
        logger.warning("%s: %s; using the fallback decoder", dec.info.source, reason)
        dec.note_fallback(reason)
        return dec.fallback_factory(wid)
