"""Live streams decoded in decoder processes: :class:`LiveHub` (one per run) and
:class:`ProcessLiveSource` (one per stream).

Why: every live stream in the run's own process costs two threads (a packet reader, a decoding
and preprocessing worker) that take the GIL back dozens of times per frame, and the thread that
runs the model competes with all of them for it. Measured on an H100 with 32 paced 1080p30 RTMP
streams (nginx-rtmp on loopback, ``tools/bench-probes/live_gpu_submit.py``): the streams alone
decode and preprocess at the full 960 frames/s (taking turns at the GPU), but with the model's
thread beside them the run delivered about 650 results/s and dropped the rest; at 64 streams
25 results/s. Decoder processes give the readers and decoders GILs (and CUDA contexts) of their
own: the run's process keeps one receiving thread for all the children, one mostly idle thread
per stream (it waits for the stream's end) and the model's thread.

How: the hub starts ``processes`` children of :mod:`vidpipe.decode.procpool` (they die with the
parent) and spreads the streams over them (fewest streams first). Each stream runs the ordinary
:class:`~vidpipe.sources.live.LiveSource` in its child (:mod:`vidpipe.sources.live_child`), which
only decodes: each frame goes straight into one of its stream's frame buffers, which this
process allocated at the stream's frame size and shared (CUDA IPC, or anonymous shared memory on
the CPU). Here the receiver thread queues it as it is, a
:class:`~vidpipe.batching.pending.PendingFrame`; the batch that takes it preprocesses all its
frames together (letterbox, colour conversion, kept frames: one fused launch) and the slot goes
back to the child once that work is done. So the GPU's compute runs in one CUDA context and
costs one launch per batch: when each child preprocessed its own frames, nine contexts took
turns at the GPU (an H100 75-80% busy at 64 streams for 1,576 results/s); when the receivers
preprocessed each frame as it came, they fell behind (an H200: 178 results/s at 64 streams).
States and counters (``live_state``, ``frames_in``, ``reconnects``, ...) come with every frame
and every half second; drops are this process's latest-wins drops plus the child's (by cause:
``SourceState.drop``). A child that dies fails its streams with a clear error; the others go
on.
"""

from __future__ import annotations

import collections
import logging
import os
import queue
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from vidpipe.errors import SourceError

if TYPE_CHECKING:
    import torch

    from vidpipe.pipeline_config import PipelineConfig, SourceState
    from vidpipe.sources.base import Chunk, SourceContext
    from vidpipe.sources.spec import SourceSpec

__all__ = ["LiveHub", "LiveProcesses", "ProcessLiveSource", "default_processes", "hub_processes", "THRESHOLD"]

logger = logging.getLogger(__name__)

#: frame buffers per stream shared with its child beyond ``LiveOptions.queue_frames``: a frame
#: holds one from its decode, while it waits in the run's queue, until its batch's preprocessing
#: is done and the slot is handed back
SPARE_SLOTS = 4
#: ``LiveOptions.processes=None`` on a CUDA device: live streams go to decoder processes once a
#: run has this many (8 paced 1080p30 streams held in threads on an H100; 16 did not, cleanly)
THRESHOLD = 8
_POLL_S = 0.2
#: seconds between the receiver's hand-backs of slots whose work is done (one message per child
#: for all its streams). A stream has ``queue_frames + SPARE_SLOTS`` slots, 8 by default: 267 ms
#: of a 30 fps stream, so 10 ms more before a slot is free again costs nothing
HAND_BACK_S = 0.01


def default_processes() -> int:
    """Children for ``LiveOptions.processes=None``: half the cores, 1 to 8."""
    return max(1, min(8, (os.cpu_count() or 2) // 2))


class _Link:
    """One stream's connection to its child. The hub's receiver thread calls :meth:`handle` for
    each message: a frame is put on ``sink`` right there, as a
    :class:`~vidpipe.batching.pending.PendingFrame` over its slot (no thread of the stream's own
    wakes per frame, and no GPU work here: the batch that takes it preprocesses it); once that
    work is done the hub hands the slot back to the child (:meth:`LiveHub.hand_back`)."""

    def __init__(self, stream_id: int, child: int, hub: "LiveHub", *, state: "SourceState",
                 sink: Any, stop: threading.Event) -> None:  # fmt: skip
        self.stream_id = stream_id
        self.child = child
        self.hub = hub
        self.state = state
        self.sink = sink  # .put(inp, ready, *, stop) -> bool, as a SourceQueue
        self.stop = stop
        self.done = threading.Event()  # the child's stream ended (``end`` says how)
        self.end: Any = None
        self.refused = False  # the sink refused a frame (the run is stopping)
        self._pending: list[tuple[Any, int, int]] = []  # (work done event, ring id, slot) not handed back yet
        self.ring: Any = None  # the Ring of this stream's frames (``live-size``)
        self.views: list[Any] = []  # its slots as one-frame (1, ...) views
        self.key: tuple | None = None  # its (shape, dtype, format, color)
        self.input_shape: tuple[int, int, int] | None = None  # (3, H, W) model input of its frames
        self._child_causes: dict[str, int] = {}  # the child's drop counts by cause, as last reported
        self._lock = threading.Lock()

    def handle(self, msg: tuple) -> None:
        kind, fields = msg[0], msg[-1]
        if fields is not None:
            _apply(self.state, fields, self._child_causes)
        if kind == "live-end":
            self.end = msg[2]
            self.done.set()
        elif kind == "live-size":
            self.hub.frame_ring(self, msg[2])
        elif kind == "live-frame" and not self.refused:
            _, _, ring_id, slot, meta, _ = msg
            ring = self.ring
            if ring is None or ring.id != ring_id:  # a frame of a ring since replaced
                self.state.drop("startup")
                return
            if not self.sink.put(self._frame(ring_id, slot, meta), None, stop=self.stop):
                self.refused = True

    def _frame(self, ring_id: int, slot: int, meta: Any) -> Any:
        """A :class:`~vidpipe.batching.pending.PendingFrame` over ``slot`` of the current ring:
        no PyTorch call here (each one would hand the GIL to the model's thread and wait to
        get it back): the slot's one-frame view was made with the ring."""
        from vidpipe.batching.pending import PendingFrame
        from vidpipe.types import FrameBatch

        _, _, fmt, color = self.key  # type: ignore[misc]
        batch = FrameBatch(data=self.views[slot], frames=(meta,), format=fmt, color=None if fmt == "rgb" else color)

        def release(done: Any) -> None:  # the slot may be written again once `done` (any thread)
            with self._lock:
                self._pending.append((done, ring_id, slot))
            self.hub.released(self)

        return PendingFrame(batch=batch, input_shape=self.input_shape, release=release)  # type: ignore[arg-type]

    def take_done(self, finished: dict[int, bool]) -> tuple[int | None, list[int], bool]:
        """The current ring's slots whose work is done, taken off the pending list: ``(ring id,
        slots, more)``, ``more`` when some are still in use. ``finished``: each event's
        ``query()``, asked once per event (a batch's frames share one) by whoever passes it."""
        with self._lock:
            ring_id = None if self.ring is None else self.ring.id
            done: list[int] = []
            left: list[tuple[Any, int, int]] = []
            for ev, rid, slot in self._pending:
                if rid != ring_id:  # a ring since replaced: let go with it
                    continue
                ok = True if ev is None else finished.get(id(ev))
                if ok is None:
                    ok = finished[id(ev)] = ev.query()
                if ok:
                    done.append(slot)
                else:
                    left.append((ev, rid, slot))
            self._pending = left
        return ring_id, done, bool(left)

    def drain(self) -> None:
        """Wait for the work queued on this link's frames (before their ring is let go)."""
        with self._lock:
            events = [ev for ev, _, _ in self._pending if ev is not None]
            self._pending = []
        for ev in events:
            ev.synchronize()

    def raise_end(self, name: str) -> None:
        """Raise how the stream ended (nothing for a clean end)."""
        err = self.end
        if err is None:
            return
        if isinstance(err, BaseException):
            raise err
        raise SourceError(f"{name}: {err[0]}: {err[1]}" if isinstance(err, tuple) else str(err))


class _Inbox:
    """A sink for :meth:`ProcessLiveSource.produce`: chunks wait here for the iterating thread."""

    def __init__(self) -> None:
        self.chunks: queue.SimpleQueue = queue.SimpleQueue()

    def put(self, inp: Any, ready: Any, *, stop: threading.Event) -> bool:
        if stop.is_set():
            return False
        self.chunks.put((inp, ready))
        return True


class LiveHub:
    """Decoder processes that run a run's live streams (see the module docstring).

    Raises:
        DecodeError: the children did not start.
    """

    def __init__(self, *, device: "torch.device", processes: int, config: "PipelineConfig", detector: Any) -> None:
        from vidpipe.decode.procpool import DecoderProcessPool
        from vidpipe.ops.preprocess import Preprocessor
        from vidpipe.sources.live_child import DetectorGeometry

        self.device = device
        self.geometry = DetectorGeometry.of(detector)
        self.to_input = Preprocessor(detector, config)  # for the model inputs' shapes
        self.slots = config.live.queue_frames + SPARE_SLOTS
        self.pool = DecoderProcessPool(str(device), processes)
        self._lock = threading.Lock()
        self._rings = 0  # frame rings made so far (their ids)
        self._links: dict[int, _Link] = {}
        self._released: collections.deque[_Link] = collections.deque()  # links with slots to hand back
        self._load = [0] * processes
        self._closed = False
        self.pool.broadcast(("live-init", config, self.geometry))
        self._receiver = threading.Thread(target=self._receive, name="vidpipe-livehub", daemon=True)
        self._receiver.start()
        logger.info("live streams in %d decoder processes (started in %.1f s)", processes, self.pool.start_s)

    def attach(self, spec: "SourceSpec", state: "SourceState", sink: Any, stop: threading.Event) -> _Link:
        """Start ``spec`` as stream ``state.stream_id`` in the least loaded live child; its frames
        go to ``sink``."""
        stream_id = state.stream_id
        with self._lock:
            if self._closed:
                raise SourceError(f"{spec.name}: the run's decoder processes are closed")
            alive = [i for i in range(len(self._load)) if self.pool.alive[i]]
            if not alive:
                raise SourceError(f"{spec.name}: every decoder process of this run has died")
            child = min(alive, key=lambda i: self._load[i])
            self._load[child] += 1
            link = self._links[stream_id] = _Link(stream_id, child, self, state=state, sink=sink, stop=stop)
        self.pool.send(child, ("live-add", stream_id, spec))
        return link

    def frame_ring(self, link: "_Link", key: tuple) -> None:
        """Make ``link``'s ring of frames for ``key`` = ``(shape, dtype, format, color)`` and
        tell its child (the old ring, of another kind, is let go once the work queued on its
        frames is done)."""
        from vidpipe.decode.proclease import Lease
        from vidpipe.decode.procring import Ring

        shape, dtype, _, _ = key
        with self._lock:
            self._rings += 1
            ident = -(1 << 20) - self._rings
        # shared with the stream's child only (the hub's own pool: nothing to give back)
        ring = Ring(Lease(self.pool, (link.child,)), ident, shape, dtype, self.slots, self.device)
        old = link.ring
        if old is not None:
            link.drain()
        h, w = (shape[0] * 2 // 3, shape[1]) if len(shape) == 2 else (shape[1], shape[2])
        link.input_shape = self.to_input.input_shape(h, w)
        link.views = [t.unsqueeze(0) for t in ring.tensors]
        link.ring, link.key = ring, key
        self.pool.send(link.child, ("live-ring", link.stream_id, ident, key))
        if old is not None:
            old.release()

    def released(self, link: _Link) -> None:
        """``link`` has a frame whose slot goes back once its work is done (any thread)."""
        self._released.append(link)

    def hand_back(self) -> None:
        """Hand the slots whose work is done back to their children: one ``live-free`` message
        per child, for all its streams (each batch's event asked once). Links with slots still
        in use stay on the list for the next pass. The receiver thread's, every
        :data:`HAND_BACK_S`: one message per frame, or per stream every other frame, was a
        system call and a PyTorch call per frame on that thread."""
        links: dict[int, _Link] = {}
        while True:
            try:
                link = self._released.popleft()
            except IndexError:
                break
            links[id(link)] = link
        finished: dict[int, bool] = {}
        per_child: dict[int, list[tuple[int, int, list[int]]]] = {}
        for link in links.values():
            ring_id, done, more = link.take_done(finished)
            if done and ring_id is not None:
                per_child.setdefault(link.child, []).append((link.stream_id, ring_id, done))
            if more:
                self._released.append(link)
        for child, entries in per_child.items():
            self.pool.send(child, ("live-free", entries))

    def detach(self, link: _Link) -> None:
        with self._lock:
            if self._links.pop(link.stream_id, None) is None:
                return
            self._load[link.child] -= 1
        self.pool.send(link.child, ("live-remove", link.stream_id))
        if link.ring is not None:
            link.drain()
            link.ring.release()

    def _receive(self) -> None:
        """Take every child's messages, on one thread: with one thread per child, the model's
        thread waited behind eight of them each time it took the GIL back (measured on an H100:
        5.7 ms of post-processing per batch at 64 streams became 21.5 ms at 120)."""
        from multiprocessing.connection import wait

        conns = {conn: i for i, conn in enumerate(self.pool.conns)}
        next_hand_back = time.monotonic()
        while conns:
            timeout = max(0.0, next_hand_back - time.monotonic()) if self._released else _POLL_S
            try:
                ready = wait(list(conns), timeout=timeout)
            except (OSError, ValueError, TypeError):  # the pool closed a connection meanwhile
                ready = [conn for conn in conns if conn.closed]
                if not ready:
                    time.sleep(_POLL_S)
            for conn in ready:
                try:
                    msg = conn.recv()
                except (EOFError, OSError, TypeError):  # the child exited, or the pool closed the connection
                    self._child_gone(conns.pop(conn))
                    continue
                for one in msg[1] if msg[0] == "live-batch" else (msg,):
                    self._dispatch(one)
            if self._released and time.monotonic() >= next_hand_back:
                next_hand_back = time.monotonic() + HAND_BACK_S
                try:
                    self.hand_back()
                except (OSError, ValueError):  # a child's connection closed meanwhile
                    pass

    def _dispatch(self, msg: tuple) -> None:
        link = self._links.get(msg[1]) if len(msg) > 1 and isinstance(msg[1], int) else None
        if link is not None:
            try:
                link.handle(msg)
            except Exception as exc:  # noqa: BLE001 - this stream fails; the child's others go on
                link.end = SourceError(f"frames from the decoder process could not be taken: {exc}")
                link.done.set()

    def _child_gone(self, child: int) -> None:
        """Child ``child``'s connection ended: unless the hub is closing, its streams fail."""
        if not self._closed:
            self.pool.mark_dead(child)
            gone = SourceError(f"its decoder process {child} exited (exit code {self.pool.procs[child].poll()})")
            for link in list(self._links.values()):
                if link.child == child:
                    link.end = gone
                    link.done.set()

    def cpu_seconds(self) -> float:
        """CPU seconds the decoder processes have used so far."""
        from vidpipe.decode.procpool import cpu_seconds

        return cpu_seconds([p.pid for p in self.pool.procs])

    def close(self) -> None:
        with self._lock:
            self._closed = True
            links = list(self._links.values())
        for link in links:
            self.detach(link)
        self.pool.close()
        self._receiver.join(timeout=5)


class ProcessLiveSource:
    """A live input run by a :class:`LiveHub`'s decoder process (the
    :class:`~vidpipe.sources.base.Source` protocol; ``live`` is ``True``)."""

    live = True

    def __init__(self, spec: "SourceSpec", hub: LiveHub) -> None:
        self.spec = spec
        self.hub = hub

    def deliver(self, state: "SourceState", ctx: "SourceContext", sink: Any) -> None:
        """Run until the stream ends or ``ctx.stop``: the hub's receiver thread puts each frame
        on ``sink`` (the run's queue for this source) as it arrives; this thread only waits.
        Raises what ended the stream (a permanent error, a dead decoder process)."""
        state.live_state = "connecting"
        link = self.hub.attach(self.spec, state, sink, ctx.stop)
        try:
            while not link.done.wait(_POLL_S):
                if ctx.stop.is_set():
                    return
                if link.refused:
                    state.stopped = True
                    return
            link.raise_end(self.spec.name)
        finally:
            self.hub.detach(link)

    def produce(self, state: "SourceState", ctx: "SourceContext") -> Iterator["Chunk"]:
        """The same frames as one-frame ``(ModelInput, ready_event)`` chunks in this thread (the
        :class:`~vidpipe.sources.base.Source` protocol; the run uses :meth:`deliver`)."""
        state.live_state = "connecting"
        inbox = _Inbox()
        link = self.hub.attach(self.spec, state, inbox, ctx.stop)
        from vidpipe.batching.pending import materialize
        from vidpipe.sources.drive import ready_event, stream_scope

        cuda_stream, scope = stream_scope(self.hub.device)
        try:
            while not ctx.stop.is_set():
                try:
                    pending, _ = inbox.chunks.get(timeout=_POLL_S)
                except queue.Empty:
                    if link.done.is_set() and inbox.chunks.empty():
                        link.raise_end(self.spec.name)
                        return
                    continue
                with scope:  # preprocessed here, on this thread's CUDA stream
                    inp = materialize([pending], self.hub.to_input)
                    ready = ready_event(cuda_stream)
                yield inp, ready
        finally:
            self.hub.detach(link)


def _apply(state: "SourceState", fields: dict[str, Any], seen: dict[str, int]) -> None:
    """Copy the child's live fields into ``state``. Its drops add to this process's own, by
    cause: ``seen`` holds the child's counts as last reported (updated here)."""
    causes = fields.get("drop_causes") or {}
    for cause, n in causes.items():
        if n > seen.get(cause, 0):
            state.drop(cause, n - seen.get(cause, 0))
    seen.update(causes)
    for name, value in fields.items():
        if name in ("drops", "drop_causes"):
            continue
        if name == "extra":
            state.extra.update(value)
        else:
            setattr(state, name, value)


def hub_processes(config: "PipelineConfig", device: "torch.device", live_inputs: int) -> int:
    """How many decoder processes a run with ``live_inputs`` live inputs should give them
    (``0``: none, threads in the run's process); see ``LiveOptions.processes``."""
    n = config.live.processes
    if n is not None:
        return n
    if device.type != "cuda" or live_inputs < THRESHOLD:
        return 0
    return default_processes()


class LiveProcesses:
    """A run's decoder processes for its live inputs: a :class:`LiveHub` started when the first
    live stream that should run in one is added (:func:`hub_processes` decides; ``specs``: the
    run's inputs at its start, so a run that starts with many cameras uses processes for all).
    A hub that fails to start is logged once; the streams then run in threads."""

    def __init__(self, *, config: "PipelineConfig", detector: Any, specs: "Any" = ()) -> None:
        from vidpipe.sources.factory import is_live_spec
        from vidpipe.sources.spec import SourceSpec

        self.config = config
        self.detector = detector
        self.hub: LiveHub | None = None
        self._failed = False
        self._at_start = sum(
            1 for s in specs
            if (is_live_spec(s, config) if isinstance(s, SourceSpec) else bool(getattr(s, "live", False)))
        )  # fmt: skip

    def wrap(self, source: Any, *, live_inputs: int) -> Any:
        """``source`` as a :class:`ProcessLiveSource` when decoder processes should run it (an
        in-process :class:`~vidpipe.sources.live.LiveSource`; ``live_inputs`` of the run so far,
        this one included); else ``source`` itself (a caller's own Source always runs as it is)."""
        from vidpipe.sources.live import LiveSource

        if not isinstance(source, LiveSource):
            return source
        if self.hub is None:
            n = hub_processes(self.config, self.detector.device, max(self._at_start, live_inputs))
            if n <= 0 or self._failed:
                return source
            try:
                self.hub = LiveHub(device=self.detector.device, processes=n, config=self.config, detector=self.detector)
            except Exception as exc:  # noqa: BLE001 - the streams still run, in this process
                self._failed = True
                logger.warning("decoder processes for the live streams did not start (%s); they run in threads", exc)
                return source
        return ProcessLiveSource(source.spec, self.hub)

    @property
    def processes(self) -> int:
        """Decoder processes alive now (0: none)."""
        return 0 if self.hub is None else self.hub.pool.size

    def cpu_seconds(self) -> float:
        return 0.0 if self.hub is None else self.hub.cpu_seconds()

    def close(self) -> None:
        if self.hub is not None:
            self.hub.close()
