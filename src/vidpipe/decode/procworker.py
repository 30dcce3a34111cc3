"""A decoder process: runs segments of a parent's decode in its own interpreter (its own GIL).

Started by :class:`~vidpipe.decode.procpool.DecoderProcessPool` as
``python -m vidpipe.decode.procworker`` (a plain subprocess, so the user's ``__main__`` is never
re-imported); it talks to the parent over an inherited socket and serves jobs until told to exit
or the parent goes away (by any signal: :mod:`vidpipe.decode.proclife`). One job at a time:

- the parent sends the ring of batch buffers once (``ring``: CUDA allocations' IPC handles,
  each mapped here, without PyTorch, when a job first writes into it:
  :class:`~vidpipe.decode.ipc_memory.MappedSlot`; or CPU shared memory), then a
  ``job`` (stream, plan, options, session count) and the segments this process is to decode
  (``seg``), a few ahead, in stream order;
- ``sessions`` threads here each take the next segment, decode it with the same code as the
  in-process workers (:func:`~vidpipe.decode.workers.decode_segment`: file reads, fallback
  session on failure, frames copied straight into their row of the shared ring), synchronize
  their CUDA stream after a run of frames and report the run (``frames``: position, frame
  number, seconds), then the segment's end (``seg``), which tells the parent to give out another;
- a frame for position ``p`` is written only once the parent has freed the ring slot of
  ``p``'s batch (``free``: batches before ``n`` are done), so a slow consumer holds the
  decoders back instead of being overwritten;
- at the end (or on ``stop``) it reports its counters (``done``).

Messages are tuples ``(kind, job, ...)``; see :mod:`vidpipe.decode.procpool` for the parent side.

**No PyTorch for files.** The process starts its GPU's primary context and its NVDEC sessions
through the CUDA driver (:mod:`vidpipe.decode.cuda_driver`, :mod:`vidpipe.decode.nvdec_early`),
decodes an NVDEC job with a bare :class:`~vidpipe.decode.segment_state.SegmentState` whose
sessions run on driver streams, and copies each frame into the ring with one driver call
(:mod:`vidpipe.decode.nvdec_copy`). So it never imports PyTorch for a file's NVDEC decode: ready
in about 1.3 s instead of 4.5-5.4 s, and the command that started it imports PyTorch about 0.7 s
sooner (an H200, 4 such processes beside the command, ``docs/bench/h200/torch-free-children``).
A PyAV job writes its RGB rows into NumPy views of the parent's CPU ring, without PyTorch too.
PyTorch is imported only where it is used: a segment NVDEC fails on, decoded again by PyAV and
uploaded; live streams.
"""

from __future__ import annotations

import logging
import os
import queue
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from vidpipe.decode.ipc_memory import Mappings
    from vidpipe.decode.procjob import ProcessJob
    from vidpipe.prewarm import ChildPrewarm

__all__ = ["main", "ChildJob"]

logger = logging.getLogger(__name__)


class ChildJob:
    """One job in this process: the decoder object the shared segment code expects, the segment
    queue, the ring gate and the outgoing messages.

    It plays both parts the in-process emitter (:class:`~vidpipe.decode.workers.Emitter`) talks
    to: the reorder buffer (``writable``, ``reserve``, ``put_many``: here a ``frames`` message to
    the parent) and the batch assembler (``write`` into the shared ring, ``seal``: synchronize
    the session's stream, so the rows are complete before the parent hears of them)."""

    def __init__(self, spec: "ProcessJob", ring: list[Any], send: Any, *, take: Any = None) -> None:
        self.spec = spec
        self.id = spec.id
        self.ring = ring
        self.send = send
        self.batch_size = spec.batch_size
        self.slots = len(ring)
        self.freed = 0  # batches before this one may be (re)written
        self.cancelled = False
        self.cond = threading.Condition()
        self.segments: queue.Queue[int | None] = queue.Queue()
        # ``take() -> (segment, positions delivered) | None``: where the threads get their
        # segments instead (the parent's threads of a run whose decoder processes still start)
        self.take = take
        self.extra: list[threading.Thread] = []  # threads of segments decoded again (redo)
        # NVDEC: the GPU whose primary context each decoding thread makes current (driver streams)
        self.gpu = gpu_of(spec.device) if spec.kind == "nvdec" else None
        self.received = time.perf_counter()  # (the debug log's times of the job's first frames)
        self.reported = False
        self.dec = _decoder(spec)

    # --------------------------------------------------------------------------- the ring gate

    def free(self, n: int) -> None:
        with self.cond:
            if n > self.freed:
                self.freed = n
                self.cond.notify_all()

    def cancel(self) -> None:
        with self.cond:
            self.cancelled = True
            self.cond.notify_all()
        for _ in range(self.spec.sessions):
            self.segments.put(None)

    def writable(self, position: int) -> bool:
        return position // self.batch_size < self.freed + self.slots

    def reserve(self, position: int) -> None:
        from vidpipe.decode.reorder import Cancelled

        batch = position // self.batch_size
        with self.cond:
            while not self.cancelled and batch >= self.freed + self.slots:
                self.cond.wait(1.0)
            if self.cancelled:
                raise Cancelled("the parent stopped the decode")

    def put_many(self, records: list) -> None:
        self.send(("frames", self.id, [(p, w.meta.index, w.meta.pts) for p, w in records]))
        if not self.reported:
            self.reported = True
            logger.debug("job %d: first frames reported %.3f s after it came", self.id,
                         time.perf_counter() - self.received)  # fmt: skip

    def skip(self, start: int, end: int) -> None:
        """Positions in ``[start, end)`` not reported will not come (``gap``: the parent skips them)."""
        self.send(("gap", self.id, start, end))

    # ----------------------------------------------------------------------- the ring writer

    def write(self, position: int, ref: Any, *, writer: int, stream: Any) -> None:
        batch, row = divmod(position, self.batch_size)
        ref.copy_into(self.ring[batch % self.slots][row])

    def seal(self, stream: Any) -> None:
        if stream is not None:
            stream.synchronize()

    # ------------------------------------------------------------------------------- running

    def redo(self, s: int, have: frozenset[int]) -> None:
        """Decode segment ``s`` again (a decoder process that had it died) in a thread of its
        own, skipping the positions in ``have`` (already delivered). Its own thread: the
        segment holds the earliest positions the parent waits for, and this process's
        threads may all be waiting for the parent to free ring slots past them."""
        t = threading.Thread(target=self._worker, args=(-1 - len(self.extra), [(s, have)]),
                             name="vidpipe-predo", daemon=True)  # fmt: skip
        with self.cond:
            self.extra.append(t)
        t.start()

    def run(self) -> None:
        """Decode segments with ``sessions`` threads until the parent says there are no more."""
        threads = [
            threading.Thread(target=self._worker, args=(i,), name=f"vidpipe-pdec{i}", daemon=True)
            for i in range(self.spec.sessions)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with self.cond:
            extra = list(self.extra)
        for t in extra:
            t.join()
        d = self.dec
        self.send(("done", self.id, {
            "frames_decoded": d.frames_decoded, "frames_missing": d.frames_missing, "errors": d.errors,
            "fallbacks": list(d.fallbacks), "packet_reader": d.packet_reader,
        }))  # fmt: skip

    def _worker(self, wid: int, only: "list[tuple[int, frozenset[int]]] | None" = None) -> None:
        """Decode the segments of the queue (or just those of ``only``: ``(segment, positions
        not to write)``) until the end marker."""
        from vidpipe.decode.reorder import Cancelled
        from vidpipe.decode.workers import Emitter, SharedIndex, Stop, decode_segment, make_reader, new_session

        dec, plan = self.dec, self.dec.plan
        shared = SharedIndex(dec, plan)
        sessions: list[Any] = [None]
        failures = 0
        reader = None
        emit = Emitter(self, self, wid)
        try:
            if self.gpu is not None:
                from vidpipe.decode.cuda_driver import use_primary_context

                use_primary_context(self.gpu)
            while True:
                if sessions[0] is None and self.take is not None:  # ready before it takes a segment
                    sessions[0] = new_session(dec, max(0, wid), failures)  # (sessions start one at a time)
                if only is not None:
                    s, have = only.pop() if only else (None, frozenset())
                elif self.take is not None:
                    s, have = self.take() or (None, ())
                    have = frozenset(have)
                else:
                    s, have = self.segments.get(), frozenset()
                if s is None or self.cancelled:
                    break
                seg = plan.segments[s]
                if reader is None:
                    reader = make_reader(dec, plan, shared)
                if sessions[0] is None:
                    sessions[0] = new_session(dec, max(0, wid), failures)
                out = emit if not have else _Skipping(emit, have)
                try:
                    failures += decode_segment(dec, seg, reader.steps(seg), sessions, wid, out)
                except Stop:
                    pass
                emit.flush()
                self.send(("seg", self.id, s, *seg.positions))
        except Cancelled:
            pass
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, which fails the run
            logger.debug("decoder process worker failed", exc_info=True)
            self.send(("fail", self.id, f"{type(exc).__name__}: {exc}"))
            self.cancel()
        finally:
            for closeable in (sessions[0], reader):
                try:
                    if closeable is not None:
                        closeable.close()
                except Exception:  # noqa: BLE001
                    logger.debug("close failed", exc_info=True)


class _Skipping:
    """An emitter that leaves out the positions ``have`` (delivered before by a process that
    died): they are neither written (their ring slot may hold a later batch now) nor reported."""

    __slots__ = ("emit", "have")

    def __init__(self, emit: Any, have: frozenset[int]) -> None:
        self.emit = emit
        self.have = have

    def __call__(self, pos: int, meta: Any, ref: Any, stream: Any) -> None:
        if pos not in self.have:
            self.emit(pos, meta, ref, stream)

    def writable(self, pos: int) -> bool:
        return self.emit.writable(pos)

    def give_up(self, start: int, end: int) -> None:
        self.emit.give_up(start, end)


def gpu_of(device: str | None) -> int:
    """The CUDA ordinal of a job's device (``"cuda:1"``: 1; ``"cuda"``: 0)."""
    return int((device or "").partition(":")[2] or 0)


def _decoder(spec: "ProcessJob") -> Any:
    """What the segment code decodes with and counts into (its settings, sessions and counters):
    a pass's bare state, without PyTorch (NVDEC sessions, or PyAV ones writing into NumPy views
    of a CPU ring)."""
    info, plan = spec.info, spec.plan
    common = {"options": spec.options, "stream_id": spec.stream_id}
    if spec.kind == "nvdec":
        from vidpipe.decode.nvdec import process_pass

        dec = process_pass(info, gpu_of(spec.device), workers=spec.sessions, fallback=spec.fallback, **common)
    elif spec.kind == "pyav":
        from vidpipe.decode.parallel import pyav_process_pass

        dec = pyav_process_pass(info, workers=spec.sessions, threads=spec.threads, **common)
    else:
        raise ValueError(f"unknown decoder kind {spec.kind!r}")
    dec.prepare(plan)
    return dec


def _open_ring(conn: Any, ring: int, handles: list[Any], mappings: "Mappings") -> list[Any]:
    """Ring ``ring``'s slots (CPU ones: the descriptor of their file follows the message on
    ``conn``; CUDA ones are mapped through ``mappings``)."""
    from vidpipe.decode.procring import open_slots, recv_fds

    fd = recv_fds(conn, 1)[0] if any(h[0] == "fd" for h in handles) else None
    try:
        return open_slots(handles, fd, mappings, ring)
    finally:
        if fd is not None:
            os.close(fd)


def serve(conn: Any) -> bool:
    """Serve the parent on ``conn`` until ``exit`` (returns ``True`` once the job stopped) or
    the parent goes away (returns ``False`` at once: nothing is left to wait for)."""
    send_lock = threading.Lock()

    def send(msg: tuple) -> None:
        with send_lock:
            conn.send(msg)

    from vidpipe.decode.ipc_memory import Mappings

    rings: dict[int, list[Any]] = {}
    mappings = Mappings()  # the parent's CUDA allocations mapped here (each once)
    job: ChildJob | None = None
    runner: threading.Thread | None = None
    live: Any = None  # live streams run for the parent (vidpipe.sources.live_child)
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return False
        kind = msg[0]
        if kind == "exit":
            break
        if kind.startswith("live-"):
            if live is None:
                from vidpipe.sources.live_child import LiveChild

                live = LiveChild(send, rings)
            live.handle(msg)
            continue
        if kind == "ring":  # (a CUDA slot is mapped when a job first writes into it)
            rings[msg[1]] = _open_ring(conn, msg[1], msg[2], mappings)
        elif kind == "slot":  # one slot of a ring replaced (the parent's caller kept a batch)
            rings[msg[1]][msg[2]] = _open_ring(conn, msg[1], [msg[3]], mappings)[0]
        elif kind == "drop":  # the parent frees the ring's memory: let go of its slots
            slots = rings.pop(msg[1], None)
            mappings.drop(msg[1])
            finished = runner is not None and not runner.is_alive()
            if slots is not None and job is not None and job.ring is slots and finished:
                job = runner = None  # (the finished job held them: unmapped now)
        elif kind == "warm":
            _warm(msg, send)
        elif kind == "job":
            spec = msg[1]
            try:
                job = ChildJob(spec, rings[spec.ring], send)
            except BaseException as exc:  # noqa: BLE001 - the parent fails the run with this
                send(("fail", spec.id, f"{type(exc).__name__}: {exc}"))
                send(("done", spec.id, {}))
                job = None
                continue
            runner = threading.Thread(target=job.run, name="vidpipe-pjob", daemon=True)
            runner.start()
        elif job is not None and msg[1] == job.id:
            if kind == "redo":
                job.redo(msg[2], frozenset(msg[3]))
            elif kind == "seg":
                if msg[2] is None:
                    for _ in range(job.spec.sessions):
                        job.segments.put(None)
                else:
                    job.segments.put(msg[2])
            elif kind == "free":
                job.free(msg[2])
            elif kind == "stop":
                job.cancel()
    if job is not None:
        job.cancel()
    if live is not None:
        live.close()
    if runner is not None:
        runner.join(timeout=10)
    return True


def _warm(msg: tuple, send: Any) -> None:
    """Create and pool ``count`` NVDEC sessions for a kind of stream (before the clock starts)."""
    _, info, device, count = msg
    try:
        send(("warmed", _pool_sessions(info, gpu_of(device), count), None))
    except BaseException as exc:  # noqa: BLE001
        send(("warmed", 0, f"{type(exc).__name__}: {exc}"))


def _pool_sessions(info: Any, gpu: int, count: int) -> int:
    """Start sessions for ``info``'s kind of stream until ``count`` are pooled here, without
    PyTorch (:func:`~vidpipe.decode.nvdec_early.pool_sessions`); how many are pooled."""
    from vidpipe.decode.nvdec import session_key
    from vidpipe.decode.nvdec_early import pool_sessions
    from vidpipe.decode.nvdec_pool import POOL

    key = session_key(info, gpu)
    pool_sessions(info, gpu, max(0, count - POOL.idle(key)))
    return POOL.idle(key)


def _warm_at_start(path: str, gpu: int, processes: int, early: "ChildPrewarm | None" = None) -> None:
    """Pool this child's share of the NVDEC sessions for ``path``'s kind of stream (the sessions
    of the parent's first decode of it: :func:`~vidpipe.decode.nvdec.default_workers` over
    ``processes``), before the hello: the pool's start then includes them, beside the parent's own
    start, instead of the decode's. The sessions ``early`` started count; the rest start here. A
    file NVDEC cannot read is left to the decode to report."""
    try:
        from vidpipe.decode.nvdec import default_workers
        from vidpipe.decode.probe import probe
        from vidpipe.decode.procpool import sessions_per_process

        started = early.wait() if early is not None else 0  # pooled already: counted below
        if started:
            logging.getLogger(__name__).debug("%d NVDEC sessions started beside the start", started)
        info = early.info if early is not None and early.info is not None else probe(path)
        _pool_sessions(info, gpu, sessions_per_process(default_workers(gpu, info.codec), processes))
    except Exception as exc:  # noqa: BLE001 - the decode starts its sessions itself
        logging.getLogger(__name__).debug("no NVDEC sessions started for %s: %s", path, exc)


def main() -> NoReturn:
    """Entry point of ``python -m vidpipe.decode.procworker``. From the environment: the parent's
    pid (``VIDPIPE_PROC_PARENT``), the inherited descriptors of this child's socket to the parent
    (``VIDPIPE_PROC_FD``) and of the parent's lifeline pipe (``VIDPIPE_PROC_WATCH``)."""
    from multiprocessing.connection import Connection

    from vidpipe.decode.proclife import parent_gone, watch_parent

    # first, before PyTorch (seconds) and any other thread: a parent killed meanwhile ends us
    parent = int(os.environ["VIDPIPE_PROC_PARENT"])
    watch_parent(parent, int(os.environ["VIDPIPE_PROC_WATCH"]))
    conn = Connection(int(os.environ["VIDPIPE_PROC_FD"]))
    device = os.environ.get("VIDPIPE_PROC_DEVICE", "")
    warm_for = os.environ.get("VIDPIPE_PROC_WARM") if device.startswith("cuda") else None
    processes = int(os.environ.get("VIDPIPE_PROC_COUNT", "1"))
    times = [time.perf_counter()]
    early = None
    gpu = gpu_of(device) if device.startswith("cuda") else None
    if warm_for and gpu is not None:  # the NVDEC caps and sessions, in a thread (vidpipe.prewarm)
        from vidpipe.prewarm import ChildPrewarm

        early = ChildPrewarm(warm_for, gpu, processes=processes)
    if gpu is not None:  # the CUDA context inside the pool's start, not the first decode's (no PyTorch)
        try:
            from vidpipe.decode.cuda_driver import use_primary_context

            use_primary_context(gpu)
        except Exception as exc:  # noqa: BLE001 - the first job on it reports it
            logging.getLogger(__name__).debug("CUDA on %s did not start: %s", device, exc)
    times.append(time.perf_counter())

    level = os.environ.get("VIDPIPE_PROC_LOG", "WARNING")
    logging.basicConfig(level=level, format="vidpipe decoder process %(process)d: %(levelname)s %(message)s")
    from vidpipe.sources.redact import RedactingFilter

    for handler in logging.getLogger().handlers:  # live streams log their URLs: never a password
        handler.addFilter(RedactingFilter())
    if warm_for and gpu is not None:
        _warm_at_start(warm_for, gpu, processes, early)
    times.append(time.perf_counter())
    logger.debug("ready in %.2f s: CUDA %.2f s, sessions %.2f s more", times[2] - times[0], times[1] - times[0],
                 times[2] - times[1])  # fmt: skip
    conn.send(("hello", os.getpid()))
    try:
        told = serve(conn)
    finally:
        conn.close()
    if not told:  # the socket closed: the parent died (or dropped us)
        parent_gone(parent)
    # no interpreter shutdown: it could wait on a decode thread's CUDA call and only costs time
    # (PyTorch's teardown); nothing is left to flush (log records are flushed as written)
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
