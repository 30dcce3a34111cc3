"""Frames to a video file or a live stream: :class:`VideoWriter` (PyAV, on a thread of its own).

The caller's thread does only what must happen there: on CUDA, the RGB -> YUV 4:2:0 conversion
(:func:`~vidpipe.encode.yuv.rgb_to_yuv420`, kernels queued on the current stream) and an
asynchronous copy of the 1.5 bytes a pixel into a pinned host buffer; on the CPU, a copy of the
frame (so the caller may reuse its tensor). The writer's thread waits for the copy, converts CPU
frames with swscale, encodes (FFmpeg releases the GIL while it works) and muxes. ``write``
blocks only while ``queue_frames`` frames wait to be encoded (``report()["blocked_writes"]``
counts those waits).

Timestamps: every stream is written on a 1/90000 s time base, which holds the frames' ``pts``
exactly for every common rate (24, 25, 30, 50, 60 fps; 30000/1001 is 3003 ticks) and for variable
frame rates. The output starts at 0 with the first frame written: a frame's time is its ``pts``
(seconds, the source's timeline) minus the first frame's ``pts`` (``report()["origin_s"]``), so
the spacing of the source's frames is kept exactly (variable rates too) and a trimmed run
(``--start 60``) does not begin with a minute of nothing; the source's audio is shifted by the
same amount. A frame whose ``pts`` does not come after the previous frame's (a duplicate, or out
of order) is nudged to one tick after it (``report()["pts_nudged"]``), so no frame is lost and the
output's timestamps strictly increase. Without ``pts`` a frame comes ``1/fps`` after the previous
one.

MP4, MOV and FLV are written without B-frames: a fragmented MP4 has no edit list and FLV shifts
negative decode times, so B-frames' reordering delay would shift every timestamp (the first
frame would start two frames late).

Colour: limited range, BT.709 for a height >= 720, else BT.601; the stream is tagged with it.
Odd sizes are padded to even by repeating the last row/column (4:2:0 needs even sizes).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from vidpipe.encode._handoff import STOP, Handoff
from vidpipe.encode._output import (TIME_BASE, add_copied_stream, add_video_stream, check_writer_args, checked_frame,
                                    checked_planes, connect_error, gop_frames, open_container, start_encoding, why)
from vidpipe.encode.nvenc import NVENC_CODECS, NvencEncoder
from vidpipe.encode.targets import Target, parse_target
from vidpipe.encode.yuv import AV_COLORSPACE, AV_RANGE_LIMITED, matrix_for_height, rgb_to_yuv420
from vidpipe.errors import ConfigError, SinkError

if TYPE_CHECKING:
    import torch

__all__ = ["VideoWriter", "TIME_BASE"]

logger = logging.getLogger(__name__)



class VideoWriter:
    """Write ``(3, H, W)`` uint8 RGB frames to ``target``, encoded on a background thread.

    Args:
        target: a file (``.mp4``, ``.mov``, ``.mkv``, ``.flv``, ``.ts``, ...; MP4/MOV fragmented
            so a killed run leaves a playable file) or a live URL (``rtmp://`` published as FLV,
            ``rtsp://`` over TCP). Credentials in a URL are never shown.
        width, height: the frames' size in pixels (odd sizes are padded to even).
        fps: the nominal frame rate (the keyframe interval, and the gap between frames written
            without ``pts``).
        codec: a PyAV/FFmpeg video encoder: ``"libx264"`` (default) or ``"libx265"``; others
            are passed through. ``"h264_nvenc"`` / ``"hevc_nvenc"``: the GPU's NVENC through
            PyNvVideoCodec, frames never leaving the GPU (:mod:`vidpipe.encode.nvenc`; not
            verified on NVENC hardware, which the H100/H200 lack).
        audio_from: a media file whose first audio track is copied into the output (or
            transcoded to AAC when the container cannot hold it); ``None``: no audio.
        options: encoder options overriding the defaults (``preset=veryfast``, ``crf=23`` for
            x264; live targets add ``tune=zerolatency``; for NVENC, PyNvVideoCodec's
            ``CreateEncoder`` settings).
        queue_frames: frames that may wait for the encoder before ``write`` blocks.
        timeout_s: how long opening (connecting) and each network write may take before
            failing; files ignore it.

    Raises:
        ConfigError: a bad argument (size, fps, codec, target).
        SinkError: the target cannot be opened (a missing folder, a server that refuses or does
            not answer within ``timeout_s``).
        SourceError: ``audio_from`` cannot be opened.
        BackendUnavailableError: an NVENC codec where NVENC cannot encode (no PyNvVideoCodec, no
            CUDA, a GPU without NVENC).
    """

    def __init__(
        self,
        target: str | os.PathLike,
        *,
        width: int,
        height: int,
        fps: float | Fraction,
        codec: str = "libx264",
        audio_from: str | None = None,
        options: Mapping[str, str] | None = None,
        queue_frames: int = 8,
        timeout_s: float = 10.0,
    ) -> None:
        self.width, self.height, self.fps, self.queue_frames = check_writer_args(
            width=width, height=height, fps=fps, codec=codec, queue_frames=queue_frames, timeout_s=timeout_s)
        self.codec = codec
        self.target: Target = parse_target(target, codec=codec)
        self.name = self.target.name
        self.enc_width, self.enc_height = self.width + self.width % 2, self.height + self.height % 2
        self.matrix = matrix_for_height(self.enc_height)
        self._nvenc: NvencEncoder | None = None
        if codec in NVENC_CODECS:
            self._nvenc = NvencEncoder(width=self.enc_width, height=self.enc_height, codec=codec, fps=self.fps,
                                       gop=gop_frames(self.fps), options=options)
        self._pending: deque[int] = deque()  # the ticks of frames NVENC holds
        self._out = open_container(self.target, timeout_s)
        failure: BaseException | None = None
        try:
            if self._nvenc is not None:
                self._stream = add_copied_stream(self._out, self._nvenc.codec, self._nvenc.sequence, fps=self.fps,
                                                 width=self.enc_width, height=self.enc_height, matrix=self.matrix)
            else:
                self._stream = add_video_stream(self._out, self.target, codec=codec, fps=self.fps,
                                                width=self.enc_width, height=self.enc_height, matrix=self.matrix,
                                                options=options)
            self._audio = None
            if audio_from is not None:
                from vidpipe.encode.audio import AudioTrack

                supported = set(self._out.supported_codecs)
                self._audio = AudioTrack(os.fspath(audio_from), self._out,
                                         copyable=lambda c: self.target.audio_copyable(c, supported))
            start_encoding(self._out, self.target, timeout_s)  # opens the encoders, connects, writes the header
        except BaseException as exc:
            try:
                self._out.close()
            except Exception:  # noqa: BLE001 - already failing
                pass
            from vidpipe.errors import SourceError

            if isinstance(exc, (ConfigError, SinkError, SourceError)) or not isinstance(exc, Exception):
                raise
            failure = SinkError(connect_error(self.name, exc, timeout_s) if self.target.live
                                else f"{self.name}: cannot start writing ({why(exc)})")
        if failure is not None:
            raise failure  # outside the except block: PyAV's error (it names the URL) is not chained
        self._timeout_s = float(timeout_s)
        self._progress = time.monotonic()  # the writer thread's last step (a stalled live target)
        self._handoff = Handoff(self.queue_frames, check=self._raise_failure, failed=lambda: self._error is not None,
                                waiting=self._check_stall)
        self._lock = threading.Lock()
        self._error: BaseException | None = None
        self._closed = False
        self._raised = False
        # counters (written by the caller's thread: frames_in, blocked; by the writer's: the rest)
        self.frames_in = 0
        self.frames = 0
        self.pts_nudged = 0
        self.encode_s = 0.0
        self.device_frames = 0
        self._last_tick: int | None = None
        self._origin: float | None = None
        self._end_s = 0.0
        self._thread = threading.Thread(target=self._run, name=f"vidpipe-encode-{self.name}", daemon=True)
        self._thread.start()

    # ---------------------------------------------------------------- the caller's side
    def write(self, image: "torch.Tensor", *, pts: float | None = None) -> None:
        """Queue one frame: ``(3, height, width)`` uint8 RGB on any device; ``pts`` in seconds.

        Blocks only while ``queue_frames`` frames wait for the encoder.

        Raises:
            ValueError: the image is not ``(3, height, width)`` uint8.
            SinkError: the writer failed (the server went away, the disk is full) or is closed.
        """
        import torch

        if self._closed:
            raise SinkError(f"{self.name}: write() after close()")
        self._raise_failure()
        image = checked_frame(self.name, image, pts, height=self.height, width=self.width,
                              padded=(self.enc_height, self.enc_width))
        if self._nvenc is not None:  # YUV on the device, encoded there
            item = _on_device(rgb_to_yuv420(image.to(self._nvenc.device), matrix=self.matrix))
        elif image.is_cuda:  # YUV on the device, then an asynchronous copy into a pinned buffer
            item = self._handoff.to_host(rgb_to_yuv420(image, matrix=self.matrix))
        else:
            item = (image.clone(memory_format=torch.contiguous_format), None, None)  # the caller may reuse its tensor
        self._handoff.put((item, None if pts is None else float(pts)))
        self.frames_in += 1

    def write_yuv420(self, planes: Any, *, pts: float | None = None) -> None:
        """Queue one frame already in YUV 4:2:0 (Y, then U, then V; limited range, :attr:`matrix`):
        ``planes`` a ``(enc_height * 3 // 2, enc_width)`` uint8 tensor on any device (e.g. one
        frame of :func:`~vidpipe.encode.yuv.rgb_to_yuv420` run on a whole batch; not modified until
        copied, as :meth:`write`'s frames), or a C-contiguous numpy array of that shape, which the
        writer owns from now on (the entry of the encoder process, :mod:`vidpipe.encode.child`).

        Raises:
            ValueError: a tensor of another shape or type.
            SinkError: the writer failed or is closed.
        """
        if self._closed:
            raise SinkError(f"{self.name}: write() after close()")
        self._raise_failure()
        import numpy as np

        if isinstance(planes, np.ndarray) and self._nvenc is None:
            item = (None, planes, None)
        else:
            import torch

            if isinstance(planes, np.ndarray):
                planes = torch.from_numpy(planes)
            planes = checked_planes(self.name, planes, pts, height=self.enc_height, width=self.enc_width)
            if self._nvenc is not None:
                item = _on_device(planes.to(self._nvenc.device))
            else:
                item = self._handoff.to_host(planes) if planes.is_cuda else (None, planes.numpy().copy(), None)
        self._handoff.put((item, None if pts is None else float(pts)))
        self.frames_in += 1

    @property
    def blocked_writes(self) -> int:
        """Times ``write`` waited (a full queue, or no free pinned buffer)."""
        return self._handoff.blocked_writes

    def _check_stall(self) -> None:
        """A live target whose writer thread made no progress for ``timeout_s`` (the server stopped
        reading; PyAV's RTMP writes have no timeout) fails instead of blocking the caller."""
        if self.target.live and self._error is None and time.monotonic() - self._progress > self._timeout_s:
            self._error = TimeoutError(f"nothing could be sent for {self._timeout_s:g} s; the server stopped "
                                       "taking the stream")

    def _raise_failure(self) -> None:
        if self._error is not None and not self._raised:
            self._raised = True
            raise SinkError(f"{self.name}: writing failed: {why(self._error)}") from None
        if self._error is not None:
            raise SinkError(f"{self.name}: the writer has failed (see the first error)")

    # ---------------------------------------------------------------- the writer's thread
    def _run(self) -> None:
        try:
            while True:
                item = self._handoff.queue.get()
                if item is STOP:
                    break
                if self._error is None:
                    self._encode(*item)
                else:
                    self._handoff.recycle(item[0])
            if self._error is None:
                self._finish()
        except BaseException as exc:  # noqa: BLE001 - reported by write()/close()
            self._error = exc
            self._handoff.drain(lambda: self._closed)
        finally:
            try:
                self._out.close()
            except Exception as exc:  # noqa: BLE001
                if self._error is None:
                    self._error = exc
            if self._audio is not None:
                self._audio.close()

    def _tick(self, pts: float | None) -> int:
        step = round(TIME_BASE.denominator / self.fps)
        if self._origin is None:
            self._origin = pts if pts is not None else 0.0
            if self._audio is not None:
                self._audio.start(self._origin)
        if pts is None:
            tick = 0 if self._last_tick is None else self._last_tick + step
        else:
            tick = round((pts - self._origin) * TIME_BASE.denominator)
        if self._last_tick is not None and tick <= self._last_tick:
            tick = self._last_tick + 1
            self.pts_nudged += 1
        self._last_tick = tick
        return tick

    def _frame(self, data: tuple) -> Any:
        import av

        rgb, buf, event = data
        if buf is not None and event is None:  # planes handed over by write_yuv420
            frame = av.VideoFrame.from_ndarray(buf, format="yuv420p")
            self.device_frames += 1
        elif buf is not None:
            event.synchronize()
            frame = av.VideoFrame.from_ndarray(buf.numpy(), format="yuv420p")
            self._handoff.recycle(data)  # from_ndarray copied it
            self.device_frames += 1
        else:
            frame = _planar_rgb(av, rgb).reformat(
                format="yuv420p", dst_colorspace=AV_COLORSPACE[self.matrix], dst_color_range=AV_RANGE_LIMITED)
        frame.colorspace = AV_COLORSPACE[self.matrix]
        frame.color_range = AV_RANGE_LIMITED
        return frame

    def _encode(self, data: tuple, pts: float | None) -> None:
        t0 = time.perf_counter()
        tick = self._tick(pts)
        source_s = self._origin + tick / TIME_BASE.denominator  # on the source's timeline
        self._end_s = source_s + float(1 / self.fps)
        if self._nvenc is not None:
            self._pending.append(tick)
            self._mux_pictures(self._nvenc.encode(data[0], data[2]))
            self.device_frames += 1
        else:
            frame = self._frame(data)
            frame.pts = tick
            frame.time_base = TIME_BASE
            for packet in self._stream.encode(frame):
                self._out.mux(packet)
            self.frames += 1
        if self._audio is not None:
            self._audio.mux_until(self._out, source_s)
        self._progress = time.monotonic()
        self.encode_s += time.perf_counter() - t0

    def _mux_pictures(self, pictures: list[bytes]) -> None:
        """NVENC's finished pictures, oldest first, muxed with the times of the frames they are
        (no B-frames: pictures come out in the order frames went in). The audio goes in by the
        frames' times as they are queued, as with libx264 (whose pictures come late too)."""
        import av

        from vidpipe.encode.bitstream import is_keyframe

        for data in pictures:
            if not self._pending:
                raise RuntimeError("NVENC returned more pictures than frames went in")
            packet = av.Packet(data)
            packet.pts = packet.dts = self._pending.popleft()
            packet.time_base = TIME_BASE
            packet.stream = self._stream
            packet.is_keyframe = is_keyframe(data, self._nvenc.codec)
            self._out.mux(packet)
            self.frames += 1

    def _finish(self) -> None:
        t0 = time.perf_counter()
        if self._nvenc is not None:
            self._mux_pictures(self._nvenc.flush())
        else:
            for packet in self._stream.encode(None):
                self._out.mux(packet)
        if self._audio is not None:
            self._audio.finish(self._out, self._end_s)
        self.encode_s += time.perf_counter() - t0

    # ---------------------------------------------------------------- ending
    def close(self) -> None:
        """Encode what is queued, flush the encoder, finish the file (or stream). Idempotent.

        Raises:
            SinkError: the writer's thread failed (raised once).
        """
        if self._closed:
            return
        self._closed = True
        self._handoff.finish(self._thread.is_alive)
        if self.target.live:
            # the flush may block in a dead connection: give it the timeout, then leave it
            self._thread.join(self._timeout_s + max(2.0, self._handoff.queue.qsize() / float(self.fps)))
            if self._thread.is_alive() and self._error is None:
                self._error = TimeoutError(f"the stream could not be finished within {self._timeout_s:g} s")
        else:
            self._thread.join()
        if self._error is not None and not self._raised:
            self._raised = True
            raise SinkError(f"{self.name}: writing failed: {why(self._error)}") from None

    def report(self) -> dict[str, Any]:
        """What was written: ``target`` (credentials masked), ``frames``, ``width``/``height``
        (encoded), ``fps``, ``codec``, ``matrix``, ``encode_ms_per_frame`` (the writer thread's time
        per frame: conversion on the CPU path, encoding, muxing), ``device_yuv`` (frames converted on
        the GPU), ``blocked_writes``/``blocked_ms`` (waits in ``write`` for a full queue),
        ``pts_nudged``, ``origin_s`` (the source time of the output's 0), ``audio`` (``"copy"``, ``"aac"`` or ``None``) and ``audio_packets``."""
        audio = self._audio
        return {
            "target": self.name,
            "frames": self.frames,
            "width": self.enc_width,
            "height": self.enc_height,
            "fps": float(self.fps),
            "codec": self.codec,
            "matrix": self.matrix,
            "encode_ms_per_frame": round(self.encode_s * 1000 / self.frames, 3) if self.frames else None,
            "device_yuv": self.device_frames,
            "blocked_writes": self._handoff.blocked_writes,
            "blocked_ms": round(self._handoff.blocked_s * 1000, 1),
            "pts_nudged": self.pts_nudged,
            "origin_s": self._origin,
            "audio": audio.mode if audio is not None else None,
            "audio_packets": audio.packets if audio is not None else 0,
        }

    def __enter__(self) -> "VideoWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"VideoWriter({self.name!r}, {self.enc_width}x{self.enc_height}, fps={float(self.fps):g}, "
                f"codec={self.codec!r}, frames={self.frames})")


def _on_device(planes: "torch.Tensor") -> tuple:
    """A queue item of planes the writer's thread encodes on the device: ``(planes, None, event)``,
    the event recorded after the work that made them on the current stream."""
    import torch

    if not planes.is_cuda:
        return (planes, None, None)
    event = torch.cuda.Event()
    event.record()
    return (planes, None, event)


def _planar_rgb(av: Any, rgb: "torch.Tensor") -> Any:
    """A ``gbrp`` frame of a contiguous ``(3, H, W)`` RGB tensor, plane by plane (no interleaving
    copy: 1080p converts in ~5 ms instead of ~18 ms through ``rgb24``; swscale gives the same
    bytes); ``rgb24`` when the frame's rows are padded."""
    _, h, w = rgb.shape
    frame = av.VideoFrame(w, h, "gbrp")
    if all(p.line_size == w for p in frame.planes):
        a = rgb.numpy()
        for plane, channel in zip(frame.planes, (1, 2, 0)):  # gbrp: G, B, R
            plane.update(a[channel])
        return frame
    return av.VideoFrame.from_ndarray(rgb.permute(1, 2, 0).contiguous().numpy(), format="rgb24")
