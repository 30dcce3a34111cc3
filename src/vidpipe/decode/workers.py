"""The threads of segment-parallel decoding: a reader, ``k`` workers, and the consumer loop.

:func:`run_workers` runs one :class:`~vidpipe.decode.parallel.SegmentParallelDecoder` pass:

- the **reader** demuxes the file once (:func:`~vidpipe.decode.routing.route_packets`) into one
  queue per segment, reading at most ``k`` segments beyond the highest one a worker has taken;
- each **worker** takes the next segment in stream order and runs :func:`decode_segment` with its
  session, writing each kept frame into its batch row once the reorder buffer lets it (a worker
  ahead of the consumer by ``window`` positions waits);
- the **consumer** (the generator itself) takes positions in order from the
  :class:`~vidpipe.decode.reorder.ReorderBuffer` and yields complete batches.

Every exit path (end, error, the caller closing the generator) stops the reader, cancels the
reorder buffer, wakes waiting workers and joins the threads.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from vidpipe.decode.reorder import Cancelled, ReorderBuffer
from vidpipe.decode.routing import Routed, route_packets

if TYPE_CHECKING:
    from vidpipe.decode.assemble import BatchAssembler
    from vidpipe.decode.parallel import SegmentParallelDecoder
    from vidpipe.decode.segments import DecodePlan, Segment
    from vidpipe.decode.sessions import FrameRef
    from vidpipe.types import FrameBatch, FrameMeta

__all__ = ["run_workers", "decode_segment", "new_session", "MAX_FAILURES", "Stop"]

logger = logging.getLogger(__name__)

#: a worker whose primary session failed this often decodes its remaining segments on the fallback
MAX_FAILURES = 3


class Stop(Exception):
    """Internal: the segment has all its frames / an unindexed stream is past ``end``."""


def decode_segment(
    dec: "SegmentParallelDecoder",
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
    seen: list[Any] = []
    state = {"index": -1, "stop": False}

    def take(ref: "FrameRef") -> None:
        with dec._lock:
            dec.frames_decoded += 1
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
            want = opts.wants(index, dec._meta(index, pts).pts)
            if want is None:
                state["stop"] = True
                raise Stop
            if not want:
                return
            pos = len(emitted) + dec._positions_before
        emit(pos, dec._meta(index, pts), ref, sessions[0].stream)
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
        try:
            for pkt in replay:
                for ref in sess.feed(pkt):
                    take(ref)
            for step in steps:
                if step.packet is None:
                    if step.error is not None:
                        dec._note_error(seg, step.error)
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
    except Cancelled:
        raise
    except Exception as exc:  # noqa: BLE001 - a session failure is handled per segment
        failed = 1
        reason = f"{sessions[0].kind} failed on segment {seg.number} ({type(exc).__name__}: {exc})"
        try:  # keep the frames the failed session had already decoded
            for ref in sessions[0].finish():
                take(ref)
        except Cancelled:
            raise
        except Exception:  # noqa: BLE001 - Stop, or the session is unusable
            pass
        if dec.fallback_factory is None:
            dec._note_error(seg, reason)
        else:
            logger.warning("%s: %s; decoding the segment again on the fallback", dec.info.source, reason)
            with dec._lock:
                dec.fallbacks.append(reason)
            try:
                sessions[0].close()
            except Exception:  # noqa: BLE001
                logger.debug("closing the failed session failed", exc_info=True)
            try:
                sessions[0] = dec.fallback_factory(worker)
                run(list(seen))
            except Cancelled:
                raise
            except Exception as exc2:  # noqa: BLE001
                dec._note_error(seg, f"{reason}; the fallback failed too ({type(exc2).__name__}: {exc2})")
        try:
            if sessions[0] is not None:
                sessions[0].close()
        except Exception:  # noqa: BLE001
            logger.debug("closing a session failed", exc_info=True)
        sessions[0] = None
        if exact:
            for _ in steps:
                pass
    if exact and seg.count > len(emitted):
        with dec._lock:
            dec.frames_missing += seg.count - len(emitted)
    if state["stop"]:
        raise Stop
    return failed


def run_workers(
    dec: "SegmentParallelDecoder", plan: "DecodePlan", asm: "BatchAssembler", k: int, window: int
) -> Iterator["FrameBatch"]:
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
            with Demuxer(dec.info.source, annexb=dec.annexb, stream_id=dec.stream_id) as dmx:
                for step in route_packets(dmx, plan):
                    for s in step.segments:
                        with cond:
                            cond.wait_for(lambda s=s: state["stop"] or s <= state["taken"] + prefetch)
                            if state["stop"]:
                                return
                        if not put(s, step):
                            return
        except BaseException as exc:  # noqa: BLE001 - every segment must still end
            logger.warning("%s: reading stopped (%s: %s)", dec.info.source, type(exc).__name__, exc)
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
        failures = [0]  # primary sessions of this worker that failed
        last = [-1]

        def emit(pos: int, meta: "FrameMeta", ref: "FrameRef", stream: Any) -> None:
            reorder.reserve(pos)
            reorder.put(pos, asm.write(pos, meta, ref, writer=wid, stream=stream))
            last[0] = pos

        try:
            sessions.append(None)
            while True:
                with cond:
                    if state["stop"] or state["next"] >= len(segs):
                        break
                    s = state["next"]
                    state["next"] += 1
                    state["taken"] = max(state["taken"], s)
                    cond.notify_all()
                seg = segs[s]
                if sessions[0] is None:
                    sessions[0] = new_session(dec, wid, failures[0])
                try:
                    failures[0] += decode_segment(dec, seg, steps(s), sessions, wid, emit)
                except Stop:
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
                    if sess is not None:
                        sess.close()
                except Exception:  # noqa: BLE001
                    logger.debug("session close failed", exc_info=True)

    def cancel() -> None:  # Decoder.close() while the consumer is suspended in a yield
        with cond:
            state["stop"] = True
            cond.notify_all()
        reorder.cancel()

    dec._cancel = cancel
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
                dec.frames_delivered += len(out)
                yield out
        out = asm.flush()
        if out is not None:
            dec.frames_delivered += len(out)
            yield out
            asm.recycle()
        dec.frames_missing = max(dec.frames_missing, reorder.missing)
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
                logger.warning("%s: thread %s did not stop", dec.info.source, t.name)


def new_session(dec: "SegmentParallelDecoder", wid: int, failures: int) -> Any:
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
        with dec._lock:
            dec.fallbacks.append(reason)
        return dec.fallback_factory(wid)
