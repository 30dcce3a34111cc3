""":class:`LiveSource`: a camera or stream URL (or a file played as one) as a run's input.

Per connection (:mod:`vidpipe.sources.packets`): a reader thread opens the input once
(:mod:`vidpipe.sources.connect`) and queues its packets, stamped at receipt
(:mod:`vidpipe.sources.capture`); the source's worker thread decodes them
(:mod:`vidpipe.sources.live_decode`: NVDEC on CUDA where it can, else PyAV), preprocesses each
frame as the file source does (``canvas_size`` + ``preprocess`` on the worker's own CUDA stream)
and yields one-frame ``(ModelInput, ready_event)`` chunks. The pipeline's latest-wins queue drops
decoded frames when the model is behind; compressed packets are never dropped.

Watchdog and reconnect: a connection is given up when its stream ends or fails, or when no frame
has been decoded for ``stall_timeout`` seconds (:mod:`vidpipe.sources.watchdog`); the source then
reconnects, forever, at the capped pace of :mod:`vidpipe.sources.reconnect` (1, 2, 4, 8, 10, 10 s
... with the defaults; reset by a connection that delivered frames). Cameras offline at the start
are retried the same way. An offline camera is logged once (WARNING), then once a minute (INFO).

``state.live_state``: ``connecting`` (until the first connection opens), ``live`` (frames
flowing), ``stalled`` (the watchdog fired: waiting to reconnect), ``reconnecting`` (a connection
was lost: waiting or trying again), ``stopped`` (the run stopped it, or a file played as a camera
ended), ``failed``: only for errors retrying can never fix, raised to the pipeline: an FFmpeg
without the URL's protocol (``srt://`` with PyAV's wheels), a missing webcam device, a missing
file, an input without video, ``decoder='nvdec'`` where NVDEC cannot decode the stream, a
``strict_gpu`` fallback. Everything else (refused, timed out, 401/404, a server not up yet,
damaged data) is retried. Counters: ``frames_in`` (frames decoded), ``reconnects`` (connections
opened after the first), ``stalls``, ``decode_errors`` (packets the decoder rejected),
``last_frame_at`` (``time.monotonic()`` of the last decoded frame).

Frames: ``FrameMeta.index`` is a running count of the frames decoded, per source, across
reconnects (0, 1, 2, ..., never repeated; ``PipelineConfig.frame_skip`` N keeps 0, N, 2N, ...;
``max_frames`` ends the source after that many frames; ``start``/``end`` apply to files only); ``pts`` the stream's own timestamp in seconds (it
restarts with each connection); ``captured_at`` / ``captured_mono`` when the frame's packet
arrived; ``camera_time`` the camera's clock from RTCP sender reports (RTSP), else ``None``.
``FrameMeta.source`` is the redacted name (``rtsp://***@host/...``), as in every log line and
error.

Stop: every wait checks ``ctx.stop`` at least every 0.2 s, so ``produce`` returns within about
0.2 s of a stop (plus one frame's decode and preprocess); a reader thread blocked in a read on a
dead server ends on its own within ``read_timeout`` and closes its connection.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

from vidpipe.ops.preprocess import Preprocessor
from vidpipe.sources.capture import CaptureStamps, camera_time
from vidpipe.sources.connect import is_permanent, live_target
from vidpipe.sources.drive import ready_event, stream_scope
from vidpipe.sources.live_decode import PyAVLiveDecoder, open_live_decoder
from vidpipe.sources.options import LiveOptions
from vidpipe.sources.packets import PacketReader
from vidpipe.sources.reconnect import STEP, Backoff, OfflineLog, wait
from vidpipe.sources.redact import redact_text
from vidpipe.sources.watchdog import Watchdog
from vidpipe.types import FrameMeta

if TYPE_CHECKING:
    import torch

    from vidpipe.pipeline_config import SourceState
    from vidpipe.sources.base import Chunk, SourceContext
    from vidpipe.sources.spec import SourceSpec

__all__ = ["LiveSource", "Buffers"]

logger = logging.getLogger(__name__)


class Buffers(Protocol):
    """Where :meth:`LiveSource.frames` writes each decoded frame."""

    def __call__(self, shape: tuple[int, ...], dtype: "torch.dtype", fmt: str, color: Any) -> "torch.Tensor | None":
        """A buffer of ``shape`` and ``dtype`` for the next frame (``fmt``: ``"nv12"``,
        ``"p010"`` or ``"rgb"``; ``color``: its :class:`~vidpipe.types.ColorSpec`), or ``None``:
        no room, the frame is dropped (the callable counts the drop)."""
        ...


#: a decoded frame older than this (seconds since its packet arrived) is dropped before conversion
#: when more packets are already waiting: the source is behind real time
LATE_S = 0.5


class _Ended(Exception):
    """Internal: how a connection ended (``reason``; ``eof``: the input's clean end)."""

    def __init__(self, reason: str, *, eof: bool = False, frames: int = 0, stalled: bool = False) -> None:
        super().__init__(reason)
        self.reason, self.eof, self.frames, self.stalled = reason, eof, frames, stalled


class LiveSource:
    """A live input: ``rtsp(s)://`` (TCP or UDP), ``rtmp(s)://``, ``http(s)://`` (HLS, MPEG-TS),
    ``srt://`` (where PyAV's FFmpeg has it), webcams (``/dev/videoN`` or an index such as ``0``),
    or a video file played at its own frame rate (``spec.kind == "file"``: what
    ``LiveOptions.realtime`` makes of files). See the module docstring.

    Args:
        spec: the input; ``spec.name`` (credentials masked) is what is ever shown.
        options: transport, timeouts, watchdog and reconnect pace (default ``LiveOptions()``).
    """

    def __init__(self, spec: "SourceSpec", options: LiveOptions | None = None) -> None:
        self.spec = spec
        self.options = options if options is not None else LiveOptions()
        self.target = live_target(spec)
        self._next_index = 0  # FrameMeta.index of the next decoded frame (running count, never repeats)
        self._kept = 0  # frames yielded
        self._decode_s = 0.0  # codec time not yet added to the "decode" statistics
        self._fallback_logged = False
        self._decode_warned = False
        self._buffer: Buffers | None = None  # frames(): decoded frames into these buffers, not preprocessed

    @property
    def live(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"LiveSource({self.spec.name!r}, kind={self.target.kind!r})"

    # ---------------------------------------------------------------------------- the loop

    def produce(self, state: "SourceState", ctx: "SourceContext") -> Iterator["Chunk"]:
        """Yield one-frame ``(ModelInput, ready_event)`` chunks until ``ctx.stop`` (or, for a file
        played as a camera, its end); see the module docstring for states and counters."""
        self._buffer = None
        return self._run(state, ctx)

    def frames(self, state: "SourceState", ctx: "SourceContext", buffer: "Buffers") -> Iterator[tuple[Any, Any]]:
        """The same loop, but each decoded frame is written into a buffer ``buffer`` gives, not
        preprocessed: yields ``(FrameBatch, ready_event)``, the batch's ``data`` a ``(1, ...)``
        view of that buffer (NV12/P016 ``(1, H*3/2, W)`` from NVDEC, RGB ``(1, 3, H, W)`` from
        PyAV). A frame ``buffer`` has no room for is dropped (``buffer`` counts it)."""
        self._buffer = buffer
        return self._run(state, ctx)

    def _run(self, state: "SourceState", ctx: "SourceContext") -> Iterator[Any]:
        opts = self.options
        name = self.spec.name
        backoff = Backoff(opts.reconnect_min, opts.reconnect_max)
        offline = OfflineLog(logger, name, cap=opts.reconnect_max)
        watchdog = Watchdog(opts.stall_timeout)
        limit = ctx.config.max_frames
        state.live_state = "connecting"
        opened = 0  # connections opened so far
        try:
            while not ctx.stop.is_set():
                reader = PacketReader(self.target, opts, stop=ctx.stop, paced=self.target.kind == "file",
                                      first=opened == 0)
                ended: _Ended | None = None
                items = self._connection(reader, state, ctx, watchdog, offline)
                try:
                    first = opened == 0
                    for item in items:
                        if item is None:  # a connection opened
                            opened += 1
                            if not first:
                                state.reconnects += 1
                            continue
                        yield item
                        if limit is not None and self._kept >= limit:
                            logger.info("%s: max_frames=%d reached", name, limit)
                            state.live_state = "stopped"
                            return
                except _Ended as end:
                    ended = end
                except BaseException as exc:
                    if is_permanent(exc):  # the pipeline records the error
                        state.live_state = "failed"
                    raise
                finally:
                    items.close()  # releases the decoder and the connection now
                    reader.close()
                if ended is None:  # stopped
                    break
                if ended.eof and (self.target.kind == "file" or self.target.scheme in ("http", "https")):
                    # a file played as a camera, an HTTP file or a finished HLS playlist: the end of
                    # the input (a live HTTP stream that breaks ends with an error, not an end of file)
                    logger.info("%s: the input ended", name)
                    state.live_state = "stopped"
                    return
                if ended.frames:
                    backoff.reset()
                delay = backoff.next()
                state.live_state = "stalled" if ended.stalled else ("reconnecting" if opened else "connecting")
                offline.failed(ended.reason, delay)
                state.extra["last_error"] = redact_text(str(ended.reason))
                if wait(delay, ctx.stop):
                    break
                if opened:
                    state.live_state = "reconnecting"
        except GeneratorExit:  # the pipeline closed this source (removed, or the run closing)
            state.stopped = True
            state.live_state = "stopped"
            raise
        finally:
            if ctx.stop.is_set():
                state.stopped = True
                state.live_state = "stopped"

    def _connection(
        self,
        reader: PacketReader,
        state: "SourceState",
        ctx: "SourceContext",
        watchdog: Watchdog,
        offline: OfflineLog,
    ) -> Iterator[Any]:
        """One connection: ``None`` when it opens, then chunks. Returns on stop; raises
        :class:`_Ended` when the connection is over, or a permanent error."""
        device = ctx.detector.device
        cuda_stream, scope = stream_scope(device)
        stamps = CaptureStamps()
        conn = dec = None
        frames = 0
        to_input = Preprocessor(ctx.detector, ctx.config)
        try:
            while True:
                if ctx.stop.is_set():
                    return
                try:
                    item = reader.queue.get(timeout=STEP)
                except queue.Empty:
                    item = None
                if conn is not None and watchdog.stalled():
                    state.stalls += 1
                    state.live_state = "stalled"
                    quiet = watchdog.quiet_for()  # logged by OfflineLog (once, then rarely)
                    raise _Ended(f"stalled: no frame decoded for {quiet:.1f} s", frames=frames, stalled=True)
                if item is None:
                    continue
                kind = item[0]
                if kind == "packet":
                    packet, stamp = item[1], item[2]
                    stamps.packet(packet.pts, stamp)
                    t0 = time.perf_counter()
                    with scope:
                        dec, decoded = self._decode(dec, packet, state, conn, device)
                    self._decode_s += time.perf_counter() - t0  # counted with the next frame
                    for pts, frame in decoded:
                        frames += 1
                        if frames == 1:
                            state.live_state = "live"
                            offline.back()
                        watchdog.frame()
                        late = reader.queue.qsize() > 0  # more packets wait: may skip an old frame
                        chunk = self._frame(
                            dec, frame, pts, stamps, conn, state, ctx, scope, cuda_stream, to_input, late=late
                        )
                        if chunk is not None:
                            yield chunk
                elif kind == "open":
                    conn = item[1]
                    watchdog.start()
                    dec = self._open_decoder(conn, state, ctx)
                    logger.info(
                        "%s: opened in %.2f s (%s %dx%d, %s)",
                        self.spec.name, conn.open_seconds, conn.info.codec, conn.info.width, conn.info.height,
                        dec.name,
                    )  # fmt: skip
                    yield None
                else:  # "end"
                    exc = item[1]
                    if exc is None:
                        if dec is not None:
                            with scope:
                                tail = dec.flush()
                            for pts, frame in tail:
                                frames += 1
                                chunk = self._frame(
                                    dec, frame, pts, stamps, conn, state, ctx, scope, cuda_stream, to_input
                                )
                                if chunk is not None:
                                    yield chunk
                        raise _Ended("the stream ended", eof=True, frames=frames)
                    if is_permanent(exc):
                        raise exc
                    raise _Ended(redact_text(str(getattr(exc, "reason", None) or exc)), frames=frames)
        finally:
            if dec is not None:
                with contextlib.suppress(Exception):
                    dec.close()
            if conn is not None:
                conn.release()

    # ----------------------------------------------------------------------------- helpers

    def _open_decoder(self, conn: Any, state: "SourceState", ctx: "SourceContext") -> Any:
        dec = open_live_decoder(conn, ctx.detector.device, ctx.config)
        state.decoder = dec.name
        state.decoder_reason = dec.reason
        if dec.name == "pyav" and ctx.detector.device.type == "cuda" and not self._fallback_logged:
            self._fallback_logged = True
            logger.info("%s: decoding with %s", self.spec.name, dec.reason)
        return dec

    def _decode(self, dec: Any, packet: Any, state: "SourceState", conn: Any, device: Any) -> tuple[Any, list]:
        """Decode one packet: ``(decoder, [(pts, frame)])``; NVDEC failing mid-stream hands the
        connection to PyAV (the decoder returned is then the PyAV one)."""
        before = dec.errors
        try:
            out = dec.decode(packet)
        except Exception as exc:  # noqa: BLE001 - NVDEC (PyNvVideoCodec) raising mid-stream
            if isinstance(dec, PyAVLiveDecoder):
                raise
            why = redact_text(str(exc))
            logger.warning("%s: NVDEC failed (%s); decoding with PyAV from here", self.spec.name, why)
            with contextlib.suppress(Exception):
                dec.close()
            state.decode_errors += 1
            dec = PyAVLiveDecoder(conn, device, f"NVDEC failed mid-stream ({why}); PyAV on the CPU")
            state.decoder, state.decoder_reason = dec.name, dec.reason
            return dec, dec.decode(packet)
        if dec.errors > before:
            state.decode_errors += dec.errors - before
            if not self._decode_warned:  # once per stream, not per connection
                self._decode_warned = True
                logger.warning("%s: the decoder rejected a packet (%s); going on", self.spec.name, dec.last_error)
        return dec, out

    def _frame(
        self, dec, frame, pts, stamps, conn, state, ctx, scope, cuda_stream, to_input, *, late: bool = False
    ) -> "Chunk | None":
        """One decoded frame -> ``(ModelInput, ready_event)`` on the worker's CUDA stream, or
        ``None`` for a frame ``frame_skip`` leaves out (it keeps its number: 0, N, 2N, ...) or
        one dropped because this source is behind: ``late`` (more packets are waiting) and the
        frame arrived more than :data:`LATE_S` ago. Such a frame is decoded (the next ones need
        it) but not converted or preprocessed, and counted in ``state.drops`` like the
        pipeline's latest-wins drops, so a source that cannot keep up in real time stays
        current instead of falling further behind."""
        stamp = stamps.frame(pts)
        index = self._next_index
        self._next_index += 1
        now = time.monotonic()
        state.frames_in += 1
        state.last_frame_at = now
        if index % ctx.config.frame_skip:
            return None
        if late and now - stamp.mono > LATE_S:
            state.drop("late")
            return None
        info = dec.info
        pts_s = None if pts is None else float(pts * info.time_base)
        meta = FrameMeta(
            source=self.spec.name,
            stream_id=state.stream_id,
            index=index,
            pts=pts_s,
            height=getattr(frame, "height", None) or info.height,
            width=getattr(frame, "width", None) or info.width,
            captured_at=stamp.wall,
            captured_mono=stamp.mono,
            camera_time=camera_time(stamp.epoch, pts_s),
            connection=state.reconnects,
        )
        # GPU work in turn with the run's other live sources (SourceContext.gpu_submit); PyAV's
        # RGB conversion is CPU work and stays outside the lock
        turn = ctx.gpu_submit if ctx.gpu_submit is not None and cuda_stream is not None else contextlib.nullcontext()
        if self._buffer is not None:  # frames(): into the caller's buffer, as decoded
            shape, dtype, fmt = dec.frame_shape(frame)
            out = self._buffer(shape, dtype, fmt, dec.info.color)
            if out is None:
                return None
            with scope:
                t0 = time.perf_counter()
                with turn if dec.gpu_bound else contextlib.nullcontext():
                    batch = dec.batch(frame, meta, out=out)
                    ready = ready_event(cuda_stream)
            ctx.stats.add("decode", time.perf_counter() - t0 + self._decode_s, 1)
            self._decode_s = 0.0
            self._kept += 1
            return batch, ready
        with scope:
            t0 = time.perf_counter()
            with turn if dec.gpu_bound else contextlib.nullcontext():
                batch = dec.batch(frame, meta)
            t1 = time.perf_counter()
            with turn:
                inp = to_input(batch)
                ready = ready_event(cuda_stream)
        ctx.stats.add("decode", t1 - t0 + self._decode_s, 1)
        self._decode_s = 0.0
        ctx.stats.add("preprocess", time.perf_counter() - t1, 1)
        self._kept += 1
        return inp, ready
