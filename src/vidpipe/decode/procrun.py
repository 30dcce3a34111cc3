"""One segment-parallel decode run over decoder processes (:mod:`vidpipe.decode.procpool`).

The parent side of :mod:`vidpipe.decode.procworker`:

- the plan's segments are given out in stream order, a few ahead per child (its sessions + 1),
  and another each time a child reports one done, so the segments in flight stay a window of
  the file and a faster child takes more;
- a receiver thread turns the children's ``frames`` messages into records in the
  :class:`~vidpipe.decode.reorder.ReorderBuffer` and a finished segment's unfilled positions into
  :data:`~vidpipe.decode.reorder.MISSING`;
- the consumer (this generator) takes positions in order and yields each batch as a view of its
  ring slot (no copy; rows gathered only where frames are missing), records an event on the
  caller's stream when the caller asks for the next one, and frees slots (``free``) once those
  events completed, so the children never overwrite a batch still being read.

Children another file gave back join a run that still has segments enough for them (free for
:data:`GROW_IDLE_S`, so a file starting meanwhile takes them first): each gets the ring as it is,
the job, what the consumer has freed, and its segments.

A child that dies (killed, crashed) loses nothing: once it has exited (so it writes into the
ring no more), its segments in flight and not yet started are given to the children still
running, each decoded again in a thread of its own there (its positions are the earliest the
consumer waits for; the child's other threads may be waiting for ring slots past them), without
the positions it had already delivered (neither rewritten nor reported twice); rows it left
half written are never reported, and are rewritten before anyone reports them. With no child
left, the remaining segments are decoded by threads in this process, into the same ring. The end
of the segment list is sent only once every segment is done, so a child is never dropped with
work another could take. Stopping early (the caller drops the generator, an error) stops every child's
job and waits for it, so the ring is quiet before the next run uses it.

A run whose decoder processes are still starting (a :class:`~vidpipe.decode.proclate.LateLease`)
does not wait for them: it starts with threads in this process, which take the segments one at
a time (each once its session is ready), into a ring made here. The consumer looks for the
children at each step; once they are ready they get the ring, the job and what is freed, and the
next segments, and the parent's threads take no more (they finish the ones they have).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Iterator
from multiprocessing.connection import wait
from typing import TYPE_CHECKING, Any

from vidpipe.decode.assemble import RowBatcher, Written
from vidpipe.decode.procdispatch import LOCAL, Dispatch
from vidpipe.decode.procjob import ProcessJob
from vidpipe.decode.procpool import sessions_per_process
from vidpipe.decode.reorder import ReorderBuffer
from vidpipe.errors import DecodeError
from vidpipe.types import FrameBatch, FrameMeta

if TYPE_CHECKING:
    from vidpipe.decode.segment_job import SegmentJob
    from vidpipe.decode.proclate import LateLease
    from vidpipe.decode.proclease import Lease
    from vidpipe.decode.procring import Ring
    from vidpipe.decode.segments import DecodePlan

__all__ = ["run_processes"]

logger = logging.getLogger(__name__)

#: seconds to wait for the children to acknowledge a stop before giving up on the pool
STOP_TIMEOUT = 30.0
#: a decode takes children another file gave back once they have been free this long (seconds):
#: a file starting meanwhile takes them first (the pipeline opens the next one at once)
GROW_IDLE_S = 0.5
#: ... and only with at least this many segments per child still to give out
GROW_SEGMENTS = 4
_FALLBACK = -2  # the in-process fallback's number in messages (children are 0, 1, ...; LOCAL: the
# parent's threads while the children start)
#: seconds the receiver waits between looks while only the parent's threads decode (children
#: that join are listened to from the next look)
_HERE_POLL_S = 0.02
_jobs = iter(range(1, 1 << 62))


def run_processes(
    dec: "SegmentJob", plan: "DecodePlan", lease: "Lease | LateLease", kind: str,
    batch_size: int, window: int, settings: dict[str, Any],
) -> Iterator[FrameBatch]:  # fmt: skip
    """Decode ``plan`` with the children of ``lease`` (its share of the decoder processes;
    ``dec.workers`` sessions spread over them) and yield its batches in order; see the module
    docstring. ``settings``: the backend's fields of
    :class:`~vidpipe.decode.procjob.ProcessJob` (``device``, ``fallback``, ``threads``). A
    :class:`~vidpipe.decode.proclate.LateLease`: start with ``late.here`` threads here until the
    children are ready."""

    from vidpipe.decode.gpu_buffers import ring_with_backoff
    from vidpipe.decode.proclate import LateLease
    from vidpipe.decode.procring import Ring

    late = lease if isinstance(lease, LateLease) else None
    started_late = late is not None
    if late is not None:  # no child yet: they join once ready (join)
        lease = None
    shape, dtype, fmt = dec.row()
    n = len(lease.conns) if lease is not None else 0
    slots = max(3, window // batch_size)
    asked = (batch_size, slots)

    def new_ring(b: int, k: int) -> Ring:
        if lease is not None:
            return lease.ring((b, *shape), dtype, k, dec.buffer_device)
        return Ring(None, 0, (b, *shape), dtype, k, dec.buffer_device)  # shared once the children come

    ring, batch_size = ring_with_backoff(new_ring, batch_size, slots, dec.frame_bytes(), source=dec.info.source)
    slots = ring.slots
    if (batch_size, slots) != asked:
        dec.note_backoff(batch_size, slots * batch_size)
    job = next(_jobs)
    live = [i for i in range(n) if lease.alive[i]] if lease is not None else []
    per = sessions_per_process(dec.workers, len(live)) if live else 0
    reorder: ReorderBuffer[Any] = ReorderBuffer(slots * batch_size, plan.total)
    dispatch = Dispatch(lease, plan, job)
    asm = _RingBatches(ring, batch_size, fmt, dec.info.color if fmt != "rgb" else None)
    counters: list[dict] = []
    # threads_take: the parent's threads take segments (while the children start: late)
    state: dict[str, Any] = {"done": set(), "dead": set(), "fail": None, "abandon": False,
                             "threads_take": late is not None}  # fmt: skip
    finished = threading.Event()
    state["freed"] = 0
    state["stop"] = False
    stopping = threading.Lock()  # the consumer stopping vs. the receiver handing out a dead child's work

    def job_of(sessions: int) -> ProcessJob:
        return ProcessJob(id=job, kind=kind, info=dec.info, plan=plan, options=dec.options,  # type: ignore[arg-type]
                          stream_id=dec.stream_id, batch_size=batch_size, ring=ring.id, sessions=sessions,
                          **settings)  # fmt: skip

    for i in live:
        lease.send(i, ("job", job_of(per)))
    for _ in range(per + 1):
        for i in live:
            dispatch.give(i)
    info, sid = dec.info, dec.stream_id

    def meta(index: int, sec: float | None) -> FrameMeta:
        return FrameMeta(info.source, sid, index, sec, info.height, info.width)

    got: set[int] = set()  # positions delivered (a dead child's segments are decoded again without them)
    here: dict[int, Any] = {}  # the parent's own jobs (ChildJob) by number: LOCAL, _FALLBACK
    here_changed = threading.Event()  # one of them ended

    def handle(i: int, msg: tuple) -> None:
        kind_ = msg[0]
        if kind_ == "frames":
            got.update(p for p, _, _ in msg[2])
            reorder.put_many([(p, Written(meta(ix, sec), i, None)) for p, ix, sec in msg[2]])
        elif kind_ == "gap":  # frames of a damaged segment that will not come (before its end)
            reorder.skip(msg[2], msg[3])
        elif kind_ == "seg":
            reorder.skip(msg[3], msg[4])
            if i >= 0:
                dispatch.done(i, msg[2])
                dispatch.give(i)
            elif i == LOCAL:  # the children may be waiting for the end of the list
                dispatch.done(i, msg[2])
                dispatch.end_if_done()  # (the fallback's segments left the dispatch: rest())
        elif kind_ == "fail":
            state["fail"] = msg[2]
            who = f"decoder process {i}" if i >= 0 else "the decoding threads of this process"
            reorder.fail(DecodeError(f"{info.source}: {who} failed: {msg[2]}"))
        elif kind_ == "done":
            counters.append(msg[2])
            state["done"].add(i)
            if i < 0:
                here_changed.set()

    def take_here() -> tuple[int, tuple[int, ...]] | None:
        """The next segment for the parent's threads while the children start (then none)."""
        if not state["threads_take"] or state["stop"]:
            return None
        return dispatch.take(LOCAL)

    def here_running() -> bool:
        return any(k not in state["done"] for k in here)

    if late is not None:
        here[LOCAL] = _run_here([], job_of(late.here), ring, handle, LOCAL, 0, take=take_here)
        dec.note_workers(late.here)
    else:
        dec.note_workers(per * len(live))

    def lost(child: int) -> None:
        """``child`` died: its segments go to the children still running, or (none left) to
        threads here; the frames it delivered are not decoded twice."""
        state["dead"].add(child)
        dec.note_process_lost()
        with stopping:  # not once the consumer stopped the run (nothing would free the ring)
            if state["stop"] or lease.closing:  # nor when the pool's owner closes it (exit)
                return
            redo, kept = dispatch.requeue(child, got)
            where = _redo(redo)
        if redo:
            logger.info("%s: segment(s) %s of decoder process %d are decoded again by %s (%d of their frames it "
                        "had delivered are kept)", info.source, ", ".join(map(str, redo)), child, where, kept)  # fmt: skip

    def _redo(redo: list[int]) -> str:
        others = [j for j in live if j not in state["dead"] and j not in state["done"] and lease.alive[j]]
        if others:
            for k in range(len(redo)):
                dispatch.give(others[k % len(others)])
            dispatch.end_if_done()
            return f"decoder process(es) {', '.join(map(str, others))}"
        if any(j not in state["dead"] and j not in state["done"] for j in live):
            # a child already known dead (a send to it failed) whose end the receiver has not
            # read yet: its segments come back when it is, and the fallback starts then with
            # all of them (started now, it would never see those)
            return "threads in this process once every decoder process is accounted for"
        if _FALLBACK not in here:
            here[_FALLBACK] = _run_here(dispatch.rest(), job_of(dec.workers), ring, handle, _FALLBACK, state["freed"])
        return "threads in this process"

    def receive() -> None:
        try:
            while not state["abandon"]:
                conns = {lease.conns[i]: i for i in list(live)}  # (children may join: grow)
                waiting = [c for c, i in conns.items() if i not in state["done"] | state["dead"]]
                if not waiting:
                    if here_running():
                        here_changed.wait(_HERE_POLL_S)
                        here_changed.clear()
                        continue
                    if len(live) != len(conns):  # children joined the parent's threads meanwhile
                        continue
                    break
                for conn in wait(waiting, timeout=0.25):  # (a child that joined is waited for from the next)
                    i = conns[conn]
                    try:
                        msg = conn.recv()
                    except (EOFError, OSError):
                        lease.mark_dead(i)
                        lost(i)
                        continue
                    if msg[1] == job:  # else a late message of an earlier run
                        handle(i, msg)
        except BaseException as exc:  # noqa: BLE001 - wake the consumer with it
            logger.debug("decoder process receiver failed", exc_info=True)
            reorder.fail(exc)
        finally:
            # every child is done or gone: what has not come will not
            reorder.skip(0, plan.total)
            finished.set()

    def join(first: "Lease") -> bool:
        """The children started for this run are ready: they get the ring, the job, what is
        freed and the next segments; the parent's threads take no more. ``False``: none of
        them is alive (the threads go on)."""
        nonlocal lease, per
        joined = [i for i in range(len(first.conns)) if first.alive[i]]
        if not joined:
            return False
        with stopping:
            if state["stop"]:
                return True
            lease = first
            first.pool.adopt_ring(ring, first)
            ring.join(first, joined)
            per = sessions_per_process(dec.workers, len(joined))
            for i in range(len(first.conns)):
                dispatch.add_child(first)
            for i in joined:
                first.send(i, ("job", job_of(per)))
                first.send(i, ("free", job, state["freed"]))
            live.extend(joined)  # before the threads stop: the receiver listens to them first
            state["threads_take"] = False
            for _ in range(per + 1):
                for i in joined:
                    dispatch.give(i)
        dec.note_workers(per * len(live))
        dec.note_processes(len(live))
        dec.note_frames_before_processes(len(got))
        logger.info("%s: %d decoder process(es) joined after %d frames decoded here; the threads here finish their "
                    "segments", info.source, len(live), len(got))  # fmt: skip
        return True

    def grow() -> None:
        """Take children another file gave back (free for GROW_IDLE_S) while this plan has
        segments enough for them: each gets the ring, the job, what is freed, its segments."""
        if lease is None:
            return
        want = min(len(lease.pool.conns) - len(lease.children), dispatch.left() // GROW_SEGMENTS)
        if want < 1:
            return
        with stopping:  # not while a dead child's segments are handed out, nor once stopping
            if state["stop"] or _FALLBACK in here:
                return
            joined = lease.grow(most=want, idle_s=GROW_IDLE_S)
            if not joined:
                return
            lease.pool.ring_joined(ring, lease.children)
            ring.join(lease, joined)
            for i in joined:
                lease.send(i, ("job", job_of(per)))
                lease.send(i, ("free", job, state["freed"]))
                dispatch.add_child()
                live.append(i)
            for _ in range(per + 1):
                for i in joined:
                    dispatch.give(i)
        dec.note_workers(per * len(live))
        dec.note_processes(len(live))
        logger.info("%s: %d more decoder process(es) joined (%d now)", info.source, len(joined), len(live))

    receiver = threading.Thread(target=receive, name="vidpipe-precv", daemon=True)
    receiver.start()
    freed_sent = 0
    next_grow = time.monotonic() + GROW_IDLE_S
    try:
        while True:
            if late is not None and state["threads_take"]:
                first = late.poll()
                if first is not None and not join(first):
                    late.release()  # every child died meanwhile: the threads here go on
                    late = None
                elif late.gone:
                    late = None
            if time.monotonic() >= next_grow:
                next_grow = time.monotonic() + GROW_IDLE_S / 2
                grow()
            freed = asm.freed(reorder.next_position // batch_size)
            if freed > freed_sent:
                for i in live:
                    lease.send(i, ("free", job, freed))
                freed_sent = state["freed"] = freed
            for job_here in list(here.values()):  # (the fallback may start in the receiver at any time)
                job_here.free(freed)
            try:
                run = reorder.get_ready(batch_size - reorder.next_position % batch_size, timeout=0.005)
            except TimeoutError:
                asm.wait_all()  # the children may be waiting for slots the caller is done with
                continue
            if run is None:
                break
            for pos, item in run:
                out = asm.add(pos, item)
                if out is not None:
                    dec.note_delivered(len(out))
                    yield out
                    asm.recycle()
        out = asm.flush()
        if out is not None:
            dec.note_delivered(len(out))
            yield out
            asm.recycle()
    finally:
        # bounded: at interpreter exit the receiver (a daemon thread) may be frozen holding it
        locked = stopping.acquire(timeout=5)
        try:
            state["stop"] = True
            for job_here in list(here.values()):
                job_here.cancel()
        finally:
            if locked:
                stopping.release()
        for i in live:
            lease.send(i, ("stop", job))
        if not finished.wait(STOP_TIMEOUT):
            logger.warning("decoder processes did not stop within %.0f s; closing them", STOP_TIMEOUT)
            state["abandon"] = True
            if lease is not None:
                lease.break_pool()
        reorder.cancel()
        asm.drain()
        for c in counters:
            dec.count(decoded=c.get("frames_decoded", 0), missing=c.get("frames_missing", 0))
            dec.note_errors(c.get("errors", ()))
            dec.note_fallbacks(c.get("fallbacks", ()))
            if c.get("packet_reader"):
                dec.note_packet_reader(c["packet_reader"])
        dec.note_missing(reorder.missing)
        if started_late and lease is None:  # the children never joined: every frame was decoded here
            dec.note_frames_before_processes(len(got))
        if state["fail"] and not dec.errors:
            dec.note_errors([f"a decoder process failed: {state['fail']}"])
        dec.note_ring_bytes(ring.nbytes)


def _run_here(segments: list[tuple[int, tuple[int, ...]]], work: ProcessJob, ring: "Ring", handle: Any,
              ident: int, freed: int, *, take: Any = None) -> Any:  # fmt: skip
    """Decode ``segments`` (``(segment, positions already delivered)``) with threads in this
    process, into the same ring and with the same messages as a child (``handle(ident, msg)``):
    the fallback once every decoder process is gone, or (``take``: where the threads get their
    segments, one at a time) the threads that decode while the children start. Returns the running
    :class:`~vidpipe.decode.procworker.ChildJob` (``free``, ``cancel``)."""
    from vidpipe.decode.procworker import ChildJob

    job = ChildJob(work, ring.tensors, lambda msg: handle(ident, msg), take=take)
    job.free(freed)
    for s, have in segments:
        if have:
            job.redo(s, frozenset(have))
        else:
            job.segments.put(s)
    if take is None:
        for _ in range(work.sessions):
            job.segments.put(None)
    threading.Thread(target=job.run, name="vidpipe-phere", daemon=True).start()
    return job


class _RingBatches(RowBatcher):
    """The consumer side of the ring: records in position order -> batches (views of their slot),
    and which batches the caller is done with.

    A batch is freed once the caller's reads of it completed (the event recorded when it asked
    for the next batch) and the caller has moved one batch further (its loop variable no longer
    holds it). If a view of the slot is still alive then, the caller kept the batch: the slot gets
    a new buffer and the kept one leaves the ring, as a pool buffer would.
    """

    def __init__(self, ring: "Ring", batch_size: int, fmt: str, color: Any) -> None:
        self.ring = ring
        self.batch_size = batch_size
        self.fmt = fmt
        self.color = color
        self._batch: int | None = None
        self._items: list[tuple[int, Written]] = []
        self._yielded: int | None = None  # batch handed out and not yet recycled
        self._reading: deque[tuple[int, Any]] = deque()  # (batch, event of the caller's reads)
        for slot in range(ring.slots):  # a batch of an earlier run the caller still holds
            ring.renew_if_kept(slot)

    def _emit(self) -> FrameBatch | None:
        import torch

        batch, items = self._batch, self._items
        self._batch, self._items = None, []
        if batch is None or not items:
            return None
        data = self.ring.tensors[batch % self.ring.slots]
        rows = [r for r, _ in items]
        if rows == list(range(len(rows))):
            data = data[: len(rows)]
        else:  # frames missing inside the batch: gather the rows that came
            data = data.index_select(0, torch.tensor(rows, device=data.device))
        self._yielded = batch
        return FrameBatch(data=data, frames=tuple(w.meta for _, w in items), format=self.fmt, color=self.color)

    def recycle(self) -> None:
        """The caller asked for the next batch: its reads of the last one are queued on its stream."""
        if self._yielded is None:
            return
        event = None
        if self.ring.device.type == "cuda":
            import torch

            event = torch.cuda.Event()
            event.record(torch.cuda.current_stream(self.ring.device))
        self._reading.append((self._yielded, event))
        self._yielded = None

    def freed(self, consumed: int) -> int:
        """Batches before the returned one may be rewritten (``consumed``: the first batch the
        consumer has not fully taken)."""
        reading = self._reading
        while len(reading) > 1 and (reading[0][1] is None or reading[0][1].query()):
            self.ring.renew_if_kept(reading.popleft()[0] % self.ring.slots)
        if len(reading) == 1 and self._yielded is None and consumed - reading[0][0] >= self.ring.slots:
            # every batch between the newest one handed out and the one the consumer waits for
            # was lost (damage): the writers need the newest one's slot, which the caller may
            # still hold. Once its reads are done, it leaves the ring if kept.
            batch, event = reading.popleft()
            if event is not None:
                event.synchronize()
            self.ring.renew_if_kept(batch % self.ring.slots)
        low = consumed
        if self._yielded is not None:
            low = min(low, self._yielded)
        if reading:
            low = min(low, reading[0][0])
        return low

    def wait_all(self) -> None:
        """Wait for the caller's reads of all but the newest batch, and free them."""
        reading = self._reading
        while len(reading) > 1:
            batch, ev = reading.popleft()
            if ev is not None:
                ev.synchronize()
            self.ring.renew_if_kept(batch % self.ring.slots)

    def drain(self) -> None:
        """At the end: wait for every read (batches still held are found at the next run's start)."""
        while self._reading:
            ev = self._reading.popleft()[1]
            if ev is not None:
                ev.synchronize()
