"""The CPU decoder: PyAV (FFmpeg) with frame/slice threads, RGB conversion by swscale.

Frames come out as ``(B, 3, H, W)`` uint8 RGB batches. Conversion uses the stream's own colour
matrix and range (the frame's tags, else the :class:`StreamInfo` convention) into full-range RGB,
and only for frames the :class:`DecodeOptions` keep: a skipped frame is decoded (the codec needs
it) but never converted or copied.

Conversion is :class:`vidpipe.decode.rgb.FrameToRGB` (swscale to planar RGB written straight into
the channels of a preallocated batch buffer). Large frames are converted by a small thread pool while the decoder goes on (swscale and the copies release the
GIL). Batch buffers are recycled when the caller allows it (``DecodeOptions.reuse_buffers``) or
when they are only a pinned staging area for a CUDA device: a fresh 200 MB buffer per batch of
32 1080p frames costs more in page faults than the decoding itself.

Frame numbering (``FrameMeta.index``): the frame's position in the selected range, in
presentation order: 0, 1, 2, ... from the first frame at or after ``start`` (the first frame of
the stream without it), as FFmpeg's ``n`` counts (``ffmpeg -ss START -i FILE`` numbers from 0
too), on constant and variable frame rate alike; never derived from timestamps (see
:mod:`vidpipe.decode.timing`). ``FrameMeta.pts`` is the presentation time in seconds from the
start of the stream (the first frame of most files is at 0).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from vidpipe.decode.base import DecodeOptions, Decoder, StreamInfo, damaged_file
from vidpipe.decode.probe import discard_other_streams, open_input, probe, read_packets, to_fraction
from vidpipe.decode.rgb import FrameToRGB
from vidpipe.decode.timing import FrameNumbers, warn_timestamp_gaps
from vidpipe.errors import DecodeError
from vidpipe.sources.redact import redacted_cause
from vidpipe.types import FrameBatch, FrameMeta

if TYPE_CHECKING:
    import torch

__all__ = ["PyAVDecoder", "check", "create"]

logger = logging.getLogger(__name__)

_SMALL_FRAME = 1024 * 576  # at or below this many pixels swscale runs single-threaded


def check(info: StreamInfo, device: "torch.device") -> str | None:
    """``None`` when PyAV can decode ``info``'s stream (on any device), else the reason why not."""
    import av

    try:
        av.codec.Codec(info.codec, "r")
    except Exception as exc:  # noqa: BLE001 - unknown codec name in this FFmpeg build
        return f"this PyAV/FFmpeg build has no {info.codec} decoder ({exc})"
    return None


def create(info: StreamInfo, *, device: "torch.device", options: DecodeOptions) -> "PyAVDecoder":
    """Registry factory."""
    return PyAVDecoder(info, device=device, options=options)


class PyAVDecoder(Decoder):
    """Decode one video stream with PyAV into RGB :class:`FrameBatch` objects on ``device``.

    Args:
        source: a :class:`StreamInfo` from :func:`~vidpipe.decode.probe.probe`, or a path/URL
            (probed here).
        device: where batches go (``"cpu"``, ``"cuda"``, ``torch.device``). For CUDA, frames are
            written into pinned host memory and copied with ``non_blocking=True``.
        options: which frames to deliver (stride, count, time range).
        threads: FFmpeg decoder threads (0: one per core).
        convert_threads: threads converting frames to RGB in parallel with decoding (``None``: 1
            for frames up to 1024x576, else a quarter of the cores, at most 4).
        stream_id: written into every :class:`FrameMeta`.

    Counters: ``frames_decoded`` (frames the codec produced, kept or not), ``frames_delivered``,
    ``frames_corrupt`` (frames FFmpeg flagged as concealed), ``frames_missing`` (packets that
    gave no frame: damaged data), ``timestamp_gaps`` (frames a constant-rate stream's timestamps
    skip: missing from the file); see :mod:`vidpipe.decode.timing`.
    """

    name = "pyav"

    def __init__(
        self,
        source: StreamInfo | str | os.PathLike,
        *,
        device: "torch.device | str" = "cpu",
        options: DecodeOptions | None = None,
        threads: int = 0,
        convert_threads: int | None = None,
        stream_id: int | None = None,
    ) -> None:
        from vidpipe.decode.registry import BackendChoice
        from vidpipe.device import resolve_device

        self.choice = BackendChoice(self.name, "PyAVDecoder was created directly")
        self.info = source if isinstance(source, StreamInfo) else probe(source)
        self.device = resolve_device(device)
        self.options = options if options is not None else DecodeOptions()
        self.threads = int(threads)
        self.convert_threads = convert_threads
        self.stream_id = self.options.stream_id if stream_id is None else stream_id
        self.error: Exception | None = None
        self.frames_decoded = 0
        self.frames_delivered = 0
        self.frames_corrupt = 0
        self.frames_missing = 0
        self.timestamp_gaps = 0
        self._container: Any = None
        self._failure: BaseException | None = None
        self._bad_error: BaseException | None = None
        self._bad_packets = 0
        self._to_rgb = FrameToRGB(self.info)

    # ------------------------------------------------------------------------------- helpers

    def _open(self) -> tuple[Any, Any]:
        self.close()
        container, stream = open_input(self.info.location)
        self._container = container
        discard_other_streams(container, stream)
        cc = stream.codec_context
        cc.thread_type = "AUTO"  # frame + slice threads
        cc.thread_count = self.threads
        return container, stream

    def _converter(self, h: int, w: int) -> tuple[ThreadPoolExecutor | None, int]:
        """The conversion pool for ``h x w`` frames (``None``: convert inline) and swscale threads."""
        workers = self.convert_threads
        if workers is None:
            workers = 1 if h * w <= _SMALL_FRAME else max(1, min(4, (os.cpu_count() or 1) // 4))
        if workers <= 1:
            return None, (1 if h * w <= _SMALL_FRAME else 0)
        return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vidpipe-rgb"), 1

    def _finish(self, ring: "_BufferRing", buf: "torch.Tensor", metas: list[FrameMeta], pending: list) -> FrameBatch:
        for job in pending:
            job.result()  # re-raises a conversion error
        pending.clear()
        data = buf[: len(metas)]
        if self.device.type != "cpu":
            data = data.to(self.device, non_blocking=True)
        ring.used(buf, self.device)
        self.frames_delivered += len(metas)
        return FrameBatch(data=data, frames=tuple(metas))

    # ------------------------------------------------------------------------------ decoding

    def _decoded(self, container: Any, stream: Any, numbers: FrameNumbers, seconds: Any) -> Iterator[Any]:
        """Decoded frames in presentation order; every packet's time goes to ``numbers`` first.

        A packet the codec rejects is skipped and decoding goes on at the next one, as the
        ``ffmpeg`` tool does (FFmpeg conceals what it can; later keyframes decode again): the
        count and the first error are left in ``self._bad_packets`` / ``self._bad_error`` (an
        error while draining counts as one: PyAV cannot drain past it, the frames after it are
        lost). A demux error (a damaged or truncated container) ends the stream: the frames the
        codec still holds are drained and the error is left in ``self._failure``."""
        import av

        self._failure = self._bad_error = None
        self._bad_packets = 0
        try:
            for packet in read_packets(container, stream):  # not container.demux(): see read_packets
                if not packet.is_discard:  # frames of discarded packets never come out (edit lists)
                    numbers.packet(seconds(packet.pts))
                try:
                    frames = stream.decode(packet)
                except av.error.FFmpegError as exc:
                    self._bad_packets += 1
                    self._bad_error = self._bad_error or exc
                    continue
                yield from frames
        except av.error.FFmpegError as exc:  # demuxer error (truncated / damaged container)
            self._failure = exc
        try:
            yield from stream.decode(None)  # flush: frames still held for reordering / threads
        except av.error.FFmpegError as exc:  # PyAV cannot drain past an error: the rest is lost
            self._bad_packets += 1
            self._bad_error = self._bad_error or exc

    def _frames(self) -> Iterator[tuple[Any, int, float | None]]:
        """``(frame, index, pts seconds)`` of the frames to deliver, in order."""
        seek = bool(self.options.start)
        restart = yield from self._frames_from(seek=seek)
        if restart:  # the seek failed or overshot the start time: decode from the beginning instead
            logger.debug("%s: cannot seek to %.3fs; decoding from the start", self.info.source, self.options.start)
            self.frames_decoded = self.frames_corrupt = self.frames_missing = self.timestamp_gaps = 0
            yield from self._frames_from(seek=False)

    def _frames_from(self, *, seek: bool) -> Iterator[tuple[Any, int, float | None]]:
        """Body of :meth:`_frames`; returns ``True`` when a seek overshot and it must start over.

        Frames are numbered by :class:`~vidpipe.decode.timing.FrameNumbers`: their position in the
        selected range (from ``start``), never from their timestamps."""
        opts = self.options
        container, stream = self._open()
        tb = to_fraction(stream.time_base) or self.info.time_base
        start_pts = int(stream.start_time or 0)

        def seconds(ts: int | None) -> float | None:
            return None if ts is None else float((ts - start_pts) * tb)

        if seek:
            import av

            try:
                container.seek(start_pts + int(opts.start / tb), stream=stream, backward=True, any_frame=False)
            except av.error.FFmpegError:  # not seekable (a live stream, a pipe): read up to `start`
                return True
        numbers = FrameNumbers(opts.start)
        index, first, kept, times, past_end = -1, True, 0, [], False
        for frame in self._decoded(container, stream, numbers, seconds):
            self.frames_decoded += 1
            pts = seconds(frame.pts)
            if seek and first:
                first = False
                if pts is None or pts > opts.start + 1e-6:
                    return True  # no timestamp to start the range from, or landed after the start
            number = numbers.frame(pts)
            if number is None:
                continue  # before `start`
            index = number
            if pts is not None:
                times.append(pts)
            if frame.is_corrupt:
                self.frames_corrupt += 1
                if self.frames_corrupt == 1:
                    logger.warning("%s: frame %d is damaged (FFmpeg concealed errors)", self.info.source, index)
            want = opts.wants(index, pts)
            if want is None:
                past_end = True
                break
            if not want:
                continue
            yield frame, index, pts
            kept += 1
            if opts.max_frames is not None and kept >= opts.max_frames:
                return False
        if self._failure is not None:
            reason = getattr(self._failure, "strerror", None) or str(self._failure)
            self.error = DecodeError(
                f"{self.info.source}: decoding stopped at frame {index + 1} ({reason}); the {kept} frames "
                "delivered before it were kept; check the file with ffprobe or re-encode it with ffmpeg"
            )
            self.error.__cause__ = redacted_cause(self._failure)  # PyAV's message names the URL
            logger.warning("%s", self.error)
            return False
        self._note_missing(numbers, times, reached_end=not past_end)
        if self._bad_error is not None and index >= 0:
            self.error = _damaged(self.info.source, self._bad_packets, self._bad_error, kept)
            logger.warning("%s", self.error)
        elif not past_end:
            self._check_complete(index, times[-1] if times else None, kept)
        return False

    def _note_missing(self, numbers: FrameNumbers, times: list[float], *, reached_end: bool) -> None:
        """Warn about frames really missing: packets the decoder turned into no frame, and gaps in a
        constant-rate stream's timestamps (never variable frame rate by itself)."""
        lost = numbers.finish() if reached_end else numbers.lost
        if lost:
            logger.warning(
                "%s: %d frame(s) could not be decoded (damaged data), the first before t=%.3fs; "
                "their frame numbers are skipped",
                self.info.source, lost, numbers.lost_at or 0.0,
            )  # fmt: skip
        self.frames_missing = lost
        self.timestamp_gaps = warn_timestamp_gaps(self.info.source, times)

    def _check_complete(self, last_index: int, last_pts: float | None, kept: int) -> None:
        """Mark the result partial when a clean end of stream comes well before the end the
        container announced (a truncated file decodes to EOF without an FFmpeg error)."""
        info, fps = self.info, self.info.fps
        if not self.frames_decoded:
            self.error = DecodeError(
                f"{info.source}: no frame could be decoded ({info.codec} {info.width}x{info.height}); "
                "the file may be damaged; check it with ffprobe or re-encode it with ffmpeg"
            )
            logger.warning("%s", self.error)
            return
        if not fps or info.duration is None or last_pts is None:
            return
        shortfall = info.duration - (last_pts + 1 / fps)
        tolerance = max(2 / fps, 0.02 * info.duration)
        if info.frame_count_exact and info.frame_count and not self.options.start:
            short = info.frame_count - (last_index + 1) > max(2, 0.02 * info.frame_count)
        else:
            short, tolerance = True, max(tolerance, 0.5)
        if short and shortfall > tolerance:
            total = f" of {info.frame_count}" if info.frame_count_exact else ""
            self.error = DecodeError(
                f"{info.source}: the stream ended at frame {last_index + 1}{total} ({last_pts:.2f}s of "
                f"{info.duration:.2f}s); the file looks truncated; the {kept} frames "
                "delivered before the end were kept"
            )
            logger.warning("%s", self.error)

    def batches(self, batch_size: int) -> Iterator[FrameBatch]:
        """Yield RGB :class:`FrameBatch` objects: ``data`` is ``(B, 3, H, W)`` uint8 on
        :attr:`device`, ``B <= batch_size``; a change of frame size starts a new batch.

        Each call decodes from the start (or ``options.start``) again and resets the counters.
        """
        from vidpipe._validate import check_range

        batch_size = check_range("batch_size", batch_size, low=1, integer=True)
        self.error = None
        self.frames_decoded = self.frames_delivered = self.frames_corrupt = self.frames_missing = 0
        self.timestamp_gaps = 0
        reuse = self.options.reuse_buffers or self.device.type != "cpu"
        ring = _BufferRing(pinned=self.device.type == "cuda", reuse=reuse)
        buf, view, metas, size, pending = None, None, [], None, []
        pool, sws_threads = None, 0
        try:
            for frame, index, pts in self._frames():
                h, w = frame.height, frame.width
                if metas and (h, w) != size:
                    yield self._finish(ring, buf, metas, pending)
                    metas = []
                if not metas:
                    if (h, w) != size:
                        if pool is not None:
                            pool.shutdown()
                        pool, sws_threads = self._converter(h, w)
                    size = (h, w)
                    buf = ring.take((batch_size, 3, h, w))
                    view = buf.numpy()
                if pool is None:
                    self._to_rgb(frame, view[len(metas)], sws_threads)
                else:
                    pending.append(pool.submit(self._to_rgb, frame, view[len(metas)], sws_threads))
                metas.append(FrameMeta(self.info.source, self.stream_id, index, pts, h, w))
                if len(metas) == batch_size:
                    yield self._finish(ring, buf, metas, pending)
                    metas = []
            if metas:
                yield self._finish(ring, buf, metas, pending)
        finally:
            for job in pending:
                job.cancel()
            if pool is not None:
                pool.shutdown(wait=True)
            self.close()
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "%s: decoded %d frames, delivered %d", self.info.source, self.frames_decoded, self.frames_delivered
            )

    def close(self) -> None:
        """Close the file. Safe to call twice."""
        if self._container is not None:
            self._container.close()
            self._container = None


class _BufferRing:
    """Host batch buffers, recycled when allowed.

    With ``reuse`` a buffer is handed out again once the batch after next is requested (two in
    flight); for a CUDA device the upload from it must have finished first (an event per buffer).
    Without ``reuse`` every batch gets fresh memory (the caller may keep batches).
    """

    def __init__(self, *, pinned: bool, reuse: bool, depth: int = 2) -> None:
        self.pinned, self.reuse, self.depth = pinned, reuse, depth
        self._free: list[tuple[Any, Any]] = []  # (buffer, event or None), oldest first

    def take(self, shape: tuple[int, ...]) -> "torch.Tensor":
        import torch

        if self.reuse and len(self._free) >= self.depth:
            buf, event = self._free.pop(0)
            if event is not None:
                event.synchronize()
            if tuple(buf.shape) == shape:
                return buf
        return torch.empty(shape, dtype=torch.uint8, pin_memory=self.pinned)

    def used(self, buf: "torch.Tensor", device: Any) -> None:
        """``buf`` was handed out (and uploaded to ``device`` if not the CPU)."""
        if not self.reuse:
            return
        event = None
        if device.type == "cuda":
            import torch

            event = torch.cuda.Event()
            event.record(torch.cuda.current_stream(device))
        self._free.append((buf, event))


def _damaged(source: str, packets: int, first: BaseException, kept: int) -> DecodeError:
    """The error of a stream whose codec rejected ``packets`` packets (skipped, decoding went on)."""
    reason = getattr(first, "strerror", None) or str(first)
    error = damaged_file(source, f"{packets} packet(s) could not be decoded ({reason}) and the frames in them are lost",
                         kept)  # fmt: skip
    error.__cause__ = redacted_cause(first)
    return error

