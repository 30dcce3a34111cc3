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

A child that dies takes only its segments in flight with it: their frames that did not arrive
are missing (the stream is marked partial with the reason), the others are decoded by the
remaining children. Stopping early (the caller drops the generator, an error) stops every child's
job and waits for it, so the ring is quiet before the next run uses it.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Iterator
from multiprocessing.connection import wait
from typing import TYPE_CHECKING, Any

from vidpipe.decode.assemble import RowBatcher, Written
from vidpipe.decode.reorder import ReorderBuffer
from vidpipe.errors import DecodeError
from vidpipe.types import FrameBatch, FrameMeta

if TYPE_CHECKING:
    from vidpipe.decode.parallel import SegmentParallelDecoder
    from vidpipe.decode.procpool import DecoderProcessPool, Ring
    from vidpipe.decode.segments import DecodePlan

__all__ = ["run_processes"]

logger = logging.getLogger(__name__)

#: seconds to wait for the children to acknowledge a stop before giving up on the pool
STOP_TIMEOUT = 30.0
_jobs = iter(range(1, 1 << 62))


class _Dispatch:
    """Segments given out to children, and what each has in flight."""

    def __init__(self, pool: "DecoderProcessPool", plan: "DecodePlan", job: int) -> None:
        self.pool = pool
        self.plan = plan
        self.job = job
        self.next = 0
        self.again: deque[int] = deque()  # segments a child could not be sent (it was gone)
        self.inflight: list[set[int]] = [set() for _ in pool.conns]
        self.lock = threading.Lock()

    def give(self, child: int) -> None:
        """Send child ``child`` the next segment, or the end of the list."""
        with self.lock:
            if self.again:
                s: int | None = self.again.popleft()
            elif self.next < len(self.plan.segments):
                s = self.next
                self.next += 1
            else:
                s = None
            if s is not None:
                self.inflight[child].add(s)
        if not self.pool.send(child, ("seg", self.job, s)) and s is not None:
            with self.lock:  # the child is gone before it got it: another one decodes it
                self.inflight[child].discard(s)
                self.again.append(s)

    def done(self, child: int, s: int) -> None:
        with self.lock:
            self.inflight[child].discard(s)

    def take_inflight(self, child: int) -> list[int]:
        with self.lock:
            gone = sorted(self.inflight[child])
            self.inflight[child].clear()
            return gone


def run_processes(
    dec: "SegmentParallelDecoder", plan: "DecodePlan", pool: "DecoderProcessPool", kind: str,
    batch_size: int, window: int, spec: dict,
) -> Iterator[FrameBatch]:  # fmt: skip
    """Decode ``plan`` with the pool's children (``dec.workers`` sessions spread over them) and
    yield its batches in order; see the module docstring. ``spec`` holds the job settings the
    children need besides the plan (``sessions``, ``fallback``, ...)."""

    from vidpipe.decode.gpu_buffers import ring_with_backoff

    shape, dtype, fmt = dec._row()
    n = len(pool.conns)
    slots = max(3, window // batch_size)
    asked = (batch_size, slots)
    ring, batch_size = ring_with_backoff(
        lambda b, k: pool.ring((b, *shape), dtype, k, dec.buffer_device), batch_size, slots, dec._frame_bytes(),
        source=dec.info.source,
    )  # fmt: skip
    slots = ring.slots
    if (batch_size, slots) != asked:
        dec.backoff = (batch_size, slots * batch_size)
    job = next(_jobs)
    live = [i for i in range(n) if pool.alive[i]]
    per = max(1, -(-dec.workers // max(1, len(live))))
    reorder: ReorderBuffer[Any] = ReorderBuffer(slots * batch_size, plan.total)
    dispatch = _Dispatch(pool, plan, job)
    asm = _RingBatches(ring, batch_size, fmt, dec.info.color if fmt != "rgb" else None)
    counters: list[dict] = []
    state: dict[str, Any] = {"done": set(), "dead": set(), "fail": None, "abandon": False}
    finished = threading.Event()
    for i in live:
        pool.send(i, ("job", {**spec, "job": job, "kind": kind, "info": dec.info, "plan": plan,
                              "options": dec.options, "stream_id": dec.stream_id, "batch_size": batch_size,
                              "ring": ring.id, "sessions": per}))  # fmt: skip
    for _ in range(per + 1):
        for i in live:
            dispatch.give(i)
    dec.workers_used = per * len(live)
    info, sid = dec.info, dec.stream_id

    def meta(index: int, sec: float | None) -> FrameMeta:
        return FrameMeta(info.source, sid, index, sec, info.height, info.width)

    def lost(child: int, why: str) -> None:
        state["dead"].add(child)
        for s in dispatch.take_inflight(child):
            reorder.skip(*plan.segments[s].positions)
        dec._errors.append(why)

    def receive() -> None:
        conns = {pool.conns[i]: i for i in live}
        try:
            while len(state["done"] | state["dead"]) < len(live) and not state["abandon"]:
                waiting = [c for c, i in conns.items() if i not in state["done"] | state["dead"]]
                for conn in wait(waiting, timeout=1.0):
                    i = conns[conn]
                    try:
                        msg = conn.recv()
                    except (EOFError, OSError):
                        pool.mark_dead(i)
                        lost(i, f"decoder process {i} exited (exit code {pool.procs[i].poll()})")
                        continue
                    if msg[1] != job:
                        continue  # a late message of an earlier run
                    kind_ = msg[0]
                    if kind_ == "frames":
                        reorder.put_many([(p, Written(meta(ix, sec), i, None)) for p, ix, sec in msg[2]])
                    elif kind_ == "seg":
                        dispatch.done(i, msg[2])
                        reorder.skip(msg[3], msg[4])
                        dispatch.give(i)
                    elif kind_ == "fail":
                        state["fail"] = msg[2]
                        reorder.fail(DecodeError(f"{info.source}: decoder process {i} failed: {msg[2]}"))
                    elif kind_ == "done":
                        counters.append(msg[2])
                        state["done"].add(i)
        except BaseException as exc:  # noqa: BLE001 - wake the consumer with it
            logger.debug("decoder process receiver failed", exc_info=True)
            reorder.fail(exc)
        finally:
            # every child is done or gone: what has not come will not (e.g. all children died)
            reorder.skip(0, plan.total)
            finished.set()

    receiver = threading.Thread(target=receive, name="vidpipe-precv", daemon=True)
    receiver.start()
    freed_sent = 0
    try:
        while True:
            freed = asm.freed(reorder.next_position // batch_size)
            if freed > freed_sent:
                for i in live:
                    pool.send(i, ("free", job, freed))
                freed_sent = freed
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
                    dec.frames_delivered += len(out)
                    yield out
                    asm.recycle()
        out = asm.flush()
        if out is not None:
            dec.frames_delivered += len(out)
            yield out
            asm.recycle()
    finally:
        for i in live:
            pool.send(i, ("stop", job))
        if not finished.wait(STOP_TIMEOUT):
            logger.warning("decoder processes did not stop within %.0f s; closing them", STOP_TIMEOUT)
            state["abandon"] = True
            pool.broken = True
        reorder.cancel()
        asm.drain()
        for c in counters:
            dec.frames_decoded += c.get("frames_decoded", 0)
            dec.frames_missing += c.get("frames_missing", 0)
            dec._errors.extend(c.get("errors", ()))
            dec.fallbacks.extend(c.get("fallbacks", ()))
            dec.packet_reader = c.get("packet_reader", dec.packet_reader)
        dec.frames_missing = max(dec.frames_missing, reorder.missing)
        if state["fail"] and not dec._errors:
            dec._errors.append(f"a decoder process failed: {state['fail']}")
        dec._ring_bytes = ring.nbytes


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
