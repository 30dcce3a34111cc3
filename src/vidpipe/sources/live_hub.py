"""Live streams decoded in decoder processes: :class:`LiveHub` (one per run) and
:class:`ProcessLiveSource` (one per stream).

Why: every live stream in the run's own process costs two threads (a packet reader, a decoding
and preprocessing worker) that take the GIL back dozens of times per frame, and the thread that
runs the model competes with all of them for it. Measured on an H100 with 32 paced 1080p30 RTMP
streams (nginx-rtmp on loopback, ``tools/bench-probes/live_gpu_submit.py``): the streams alone
decode and preprocess at the full 960 frames/s (taking turns at the GPU), but with the model's
thread beside them the run delivered about 650 results/s and dropped the rest; at 64 streams
25 results/s. Decoder processes give the readers and decoders GILs (and CUDA contexts) of their
own: the run's process keeps one light thread per stream (a queue, one device-to-device copy per
frame) and the model's thread.

How: the hub starts ``processes`` children of :mod:`vidpipe.decode.procpool` (they die with the
parent) and spreads the streams over them (fewest streams first). Each stream runs the ordinary
:class:`~vidpipe.sources.live.LiveSource` in its child (:mod:`vidpipe.sources.live_child`), which
preprocesses each frame into one of ``SLOTS`` model-input buffers this process allocated and
shared (CUDA IPC, or anonymous shared memory on the CPU); here the frame is copied out on the
worker's CUDA stream and the slot handed back once the copy is done. States and counters
(``live_state``, ``frames_in``, ``reconnects``, ...) come with every frame and every half second;
drops are this process's latest-wins drops plus the child's (a frame that found no free slot).
A child that dies fails its streams with a clear error; the others go on.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from vidpipe.errors import SourceError

if TYPE_CHECKING:
    import torch

    from vidpipe.decode.procpool import DecoderProcessPool
    from vidpipe.pipeline_config import PipelineConfig, SourceState
    from vidpipe.sources.base import Chunk, SourceContext
    from vidpipe.sources.spec import SourceSpec

__all__ = ["LiveHub", "ProcessLiveSource", "default_processes", "THRESHOLD"]

logger = logging.getLogger(__name__)

#: model-input buffers per stream shared with its child
SLOTS = 4
#: ``LiveOptions.processes=None`` on a CUDA device: live streams go to decoder processes once a
#: run has this many (8 paced 1080p30 streams held in threads on an H100; 16 did not, cleanly)
THRESHOLD = 8
_POLL_S = 0.2


def default_processes() -> int:
    """Children for ``LiveOptions.processes=None``: half the cores, 1 to 8."""
    return max(1, min(8, (os.cpu_count() or 2) // 2))


class _OneChild:
    """What :class:`~vidpipe.decode.procring.Ring` needs of a pool, for one child only."""

    def __init__(self, pool: "DecoderProcessPool", child: int) -> None:
        self.pool, self.child = pool, child

    def broadcast(self, msg: tuple, fds: tuple[int, ...] = ()) -> None:
        self.pool.send(self.child, msg, fds)


class _Link:
    """One stream's connection to its child: the inbox of its messages and its ring."""

    def __init__(self, stream_id: int, child: int, ring: Any) -> None:
        self.stream_id = stream_id
        self.child = child
        self.ring = ring
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()


class LiveHub:
    """Decoder processes that run a run's live streams (see the module docstring).

    Raises:
        DecodeError: the children did not start.
    """

    def __init__(self, *, device: "torch.device", processes: int, config: "PipelineConfig", detector: Any) -> None:
        from vidpipe.decode.procpool import DecoderProcessPool
        from vidpipe.sources.live_child import DetectorGeometry

        self.device = device
        self.geometry = DetectorGeometry.of(detector)
        self.pool = DecoderProcessPool(str(device), processes)
        self._lock = threading.Lock()
        self._links: dict[int, _Link] = {}
        self._load = [0] * processes
        self._closed = False
        self.pool.broadcast(("live-init", config, self.geometry))
        self._receivers = [
            threading.Thread(target=self._receive, args=(i,), name=f"vidpipe-livehub{i}", daemon=True)
            for i in range(processes)
        ]
        for t in self._receivers:
            t.start()
        logger.info("live streams in %d decoder processes (started in %.1f s)", processes, self.pool.start_s)

    def attach(self, spec: "SourceSpec", stream_id: int) -> _Link:
        """Start ``spec`` as stream ``stream_id`` in the least loaded live child."""
        from vidpipe.decode.procring import Ring

        with self._lock:
            if self._closed:
                raise SourceError(f"{spec.name}: the run's decoder processes are closed")
            alive = [i for i in range(len(self._load)) if self.pool.alive[i]]
            if not alive:
                raise SourceError(f"{spec.name}: every decoder process of this run has died")
            child = min(alive, key=lambda i: self._load[i])
            self._load[child] += 1
            h, w = self.geometry.input_size
            ring = Ring(_OneChild(self.pool, child), -(stream_id + 1), (3, h, w), self.geometry.dtype,  # type: ignore[arg-type]
                        SLOTS, self.device)  # fmt: skip
            link = self._links[stream_id] = _Link(stream_id, child, ring)
        self.pool.send(child, ("live-add", stream_id, spec, ring.id))
        return link

    def free(self, link: _Link, slots: list[int]) -> None:
        self.pool.send(link.child, ("live-free", link.stream_id, slots))

    def detach(self, link: _Link) -> None:
        with self._lock:
            if self._links.pop(link.stream_id, None) is None:
                return
            self._load[link.child] -= 1
        self.pool.send(link.child, ("live-remove", link.stream_id))
        link.ring.release()

    def _receive(self, child: int) -> None:
        conn = self.pool.conns[child]
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError, TypeError):  # TypeError: the pool closed the connection meanwhile
                break
            link = self._links.get(msg[1]) if len(msg) > 1 and isinstance(msg[1], int) else None
            if link is not None:
                link.inbox.put(msg)
        if not self._closed:
            self.pool.mark_dead(child)
            gone = SourceError(f"its decoder process {child} exited (exit code {self.pool.procs[child].poll()})")
            for link in list(self._links.values()):
                if link.child == child:
                    link.inbox.put(("live-end", link.stream_id, gone, None))

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
        for t in self._receivers:
            t.join(timeout=5)


class ProcessLiveSource:
    """A live input run by a :class:`LiveHub`'s decoder process (the
    :class:`~vidpipe.sources.base.Source` protocol; ``live`` is ``True``)."""

    live = True

    def __init__(self, spec: "SourceSpec", hub: LiveHub) -> None:
        self.spec = spec
        self.hub = hub

    def produce(self, state: "SourceState", ctx: "SourceContext") -> Iterator["Chunk"]:
        """Yield one-frame ``(ModelInput, ready_event)`` chunks copied out of the child's slots."""
        import torch

        from vidpipe.sources.drive import ready_event, stream_scope
        from vidpipe.types import ModelInput

        device = self.hub.device
        cuda_stream, scope = stream_scope(device)
        state.live_state = "connecting"
        link = self.hub.attach(self.spec, state.stream_id)
        pending: list[tuple[Any, int]] = []  # (copy done event, slot) not handed back yet
        factors: dict[tuple, tuple[Any, Any]] = {}  # (scale, pad) -> device tensors
        child_drops = 0
        try:
            while not ctx.stop.is_set():
                if len(pending) >= SLOTS // 2:
                    pending = self._hand_back(link, pending)
                try:
                    msg = link.inbox.get(timeout=_POLL_S)
                except queue.Empty:
                    pending = self._hand_back(link, pending)
                    continue
                kind, fields = msg[0], msg[-1]
                if fields is not None:
                    child_drops = _apply(state, fields, child_drops)
                if kind == "live-end":
                    err = msg[2]
                    if err is None:
                        return
                    if isinstance(err, BaseException):
                        raise err
                    raise SourceError(f"{self.spec.name}: {err[0]}: {err[1]}" if isinstance(err, tuple) else str(err))
                if kind != "live-frame":
                    continue
                _, _, slot, (h, w), meta, scale, pad, _ = msg
                key = (scale, pad)
                if key not in factors:
                    factors[key] = (torch.tensor([scale], dtype=torch.float32, device=device),
                                    torch.tensor([pad], dtype=torch.float32, device=device))  # fmt: skip
                with scope:
                    x = link.ring.tensors[slot][:, :h, :w].unsqueeze(0).clone()
                    ready = ready_event(cuda_stream)
                pending.append((ready, slot))
                sc, pd = factors[key]
                yield ModelInput(tensor=x, frames=(meta,), scale=sc, pad=pd), ready
        finally:
            self.hub.detach(link)

    def _hand_back(self, link: _Link, pending: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
        """Hand the slots whose copy is done back to the child (one message; half the slots at
        a time while frames flow, to halve the messages)."""
        left, done = [], []
        for ev, slot in pending:
            if ev is None or ev.query():
                done.append(slot)
            else:
                left.append((ev, slot))
        if done:
            self.hub.free(link, done)
        return left


def _apply(state: "SourceState", fields: dict[str, Any], child_drops: int) -> int:
    """Copy the child's live fields into ``state``; drops add to this process's own. Returns the
    child's drop count (to add only what is new next time)."""
    drops = int(fields.get("drops", 0))
    state.drops += max(0, drops - child_drops)
    for name, value in fields.items():
        if name == "drops":
            continue
        if name == "extra":
            state.extra.update(value)
        else:
            setattr(state, name, value)
    return drops


def hub_processes(config: "PipelineConfig", device: "torch.device", live_inputs: int) -> int:
    """How many decoder processes a run with ``live_inputs`` live inputs should give them
    (``0``: none, threads in the run's process); see ``LiveOptions.processes``."""
    n = config.live.processes
    if getattr(config, "keep_frames", False):
        if n:
            logger.info("live streams run in threads: kept frames (keep_frames) do not come back from decoder processes")
        return 0
    if n is not None:
        return n
    if device.type != "cuda" or live_inputs < THRESHOLD:
        return 0
    return default_processes()
