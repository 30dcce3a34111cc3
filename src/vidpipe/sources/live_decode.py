"""Decoding of a live stream's packets, one frame at a time: NVDEC on CUDA, PyAV otherwise.

A live connection has one container; its packets go to one decoder, created per connection:

- :class:`PyAVLiveDecoder`: the stream's own FFmpeg codec context (CPU; slice threads only, so
  no frame waits for a frame-thread pipeline to fill), frames converted to RGB by
  :class:`~vidpipe.decode.rgb.FrameToRGB` (the PyAV backend's colours) into a ``(1, 3, H, W)``
  uint8 tensor, uploaded from pinned memory on a CUDA device;
- :class:`NvdecLiveDecoder`: a pooled :class:`~vidpipe.decode.nvdec.NvdecSession` fed Annex-B
  packets (:class:`~vidpipe.decode.annexb.AnnexB`, a no-op for streams that already are, like
  RTSP and MPEG-TS; RTMP/FLV carry avcC), from the first keyframe on; each frame is copied on
  the session's CUDA stream into a ``(1, H*3/2, W)`` NV12 (or P016) tensor that the calling
  thread's current stream then waits for (no host synchronization). Frames leave as soon as
  decoded (``LiveOptions.decode_latency``: NVDEC's ``zero`` latency for streams without B-frames,
  their timestamps taken from the packets fed; ``low`` for the others).

:func:`open_live_decoder` picks one for ``PipelineConfig.decoder``: ``"auto"`` takes NVDEC on a
CUDA device where it can decode the stream, else PyAV with the reason; ``"nvdec"`` requires it;
``"pyav"`` (and any other backend name: file backends do not take packets) uses PyAV. With
``strict_gpu`` a CPU fallback on a CUDA device is an error.

Decode errors (a packet the codec rejects) are counted in ``errors`` and skipped: the frames
after them decode or are concealed, as with FFmpeg; a decoder that stops producing frames is
caught by the stall watchdog. Compressed packets are never dropped to catch up.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
from typing import TYPE_CHECKING, Any

from vidpipe.errors import DecodeError, GpuFallbackError, UnsupportedError
from vidpipe.sources.redact import redact_text
from vidpipe.types import FrameBatch, FrameMeta

if TYPE_CHECKING:
    import torch

    from vidpipe.pipeline_config import PipelineConfig
    from vidpipe.sources.connect import Connection

__all__ = ["PyAVLiveDecoder", "NvdecLiveDecoder", "open_live_decoder"]

logger = logging.getLogger(__name__)


class PyAVLiveDecoder:
    """FFmpeg decoding on the CPU; see the module docstring. ``decode(packet)`` returns
    ``[(pts, frame)]``; :meth:`batch` turns one frame into an RGB :class:`FrameBatch`."""

    name = "pyav"
    gpu_bound = False  # batch(): RGB conversion on the CPU, then one upload

    def __init__(self, conn: "Connection", device: "torch.device", reason: str) -> None:
        self.conn = conn
        self.device = device
        self.reason = reason
        self.info = conn.info
        cc = conn.stream.codec_context
        cc.thread_type = "SLICE"  # frame threads would hold frames back (latency)
        cc.thread_count = 2
        self._cc = cc
        self._rgb: Any = None
        self.errors = 0  # packets rejected (the live source logs the first one per stream)
        self.last_error: str | None = None
        self._keyed = False  # a keyframe packet was fed

    def decode(self, packet: Any) -> list[tuple[int | None, Any]]:
        """Decode one packet. Every packet is fed (a stream that never flags keyframes still
        decodes), but errors before the connection's first keyframe are not counted: joining a
        stream mid-GOP (RTMP servers start there) makes them, they are not damage."""
        import av

        self._keyed = self._keyed or bool(packet.is_keyframe)
        try:
            frames = self._cc.decode(packet)
        except av.error.FFmpegError as exc:
            if not self._keyed:
                return []
            self.errors += 1
            self.last_error = redact_text(str(getattr(exc, "strerror", None) or exc))
            return []
        return [(f.pts, f) for f in frames]

    def flush(self) -> list[tuple[int | None, Any]]:
        import av

        try:
            return [(f.pts, f) for f in self._cc.decode(None)]
        except av.error.FFmpegError:
            return []

    def frame_shape(self, frame: Any) -> tuple[tuple[int, ...], "torch.dtype", str]:
        """``(shape, dtype, format)`` of ``frame`` as :meth:`batch` writes it: ``(3, H, W)`` uint8 RGB."""
        import torch

        return (3, int(frame.height), int(frame.width)), torch.uint8, "rgb"

    def batch(self, frame: Any, meta: FrameMeta, *, out: "torch.Tensor | None" = None) -> FrameBatch:
        """``(1, 3, H, W)`` uint8 RGB on the device (CUDA: async upload from pinned memory).
        ``out``: a ``(3, H, W)`` buffer on the device to write the frame into instead of new
        memory."""
        import torch

        from vidpipe.decode.probe import color_from_tags
        from vidpipe.decode.rgb import FrameToRGB

        h, w = frame.height, frame.width
        if self._rgb is None or (self.info.height, self.info.width) != (h, w):
            if (self.info.height, self.info.width) != (h, w):  # unknown at open, or changed
                color, specified = color_from_tags(
                    int(frame.colorspace), int(frame.color_range), frame.format.name, h
                )
                self.info = dataclasses.replace(self.info, width=w, height=h, color=color, color_specified=specified)
            self._rgb = FrameToRGB(self.info)
        cuda = self.device.type == "cuda"
        if out is not None and not cuda:  # straight into the buffer
            self._rgb(frame, out.numpy(), 1)
            return FrameBatch(data=out.unsqueeze(0), frames=(meta,))
        host = torch.empty((1, 3, h, w), dtype=torch.uint8, pin_memory=cuda)
        self._rgb(frame, host.numpy()[0], 1)
        if out is not None:
            out.copy_(host[0], non_blocking=True)
            return FrameBatch(data=out.unsqueeze(0), frames=(meta,))
        data = host.to(self.device, non_blocking=True) if cuda else host
        return FrameBatch(data=data, frames=(meta,))

    def close(self) -> None:
        self._cc = None


class NvdecLiveDecoder:
    """NVDEC decoding of one live connection (CUDA only); see the module docstring.

    Raises :class:`~vidpipe.errors.UnsupportedError` (with the reason) when NVDEC cannot take
    this stream, :class:`~vidpipe.errors.BackendUnavailableError` when it is missing here."""

    name = "nvdec"
    gpu_bound = True  # batch(): a copy on the GPU

    def __init__(self, conn: "Connection", device: "torch.device", latency: str = "auto") -> None:
        from vidpipe.decode import nvdec  # raises BackendUnavailableError without PyNvVideoCodec
        from vidpipe.decode.annexb import AnnexB
        from vidpipe.decode.nvdec_caps import canonical_codec

        info = conn.info
        codec = canonical_codec(info.codec)
        if not info.width or not info.height:
            raise UnsupportedError("the stream's frame size was not known when it opened")
        if codec in nvdec._PREPEND_EXTRADATA:
            raise UnsupportedError(f"{codec} needs its container header in-band, which live NVDEC does not do")
        why = nvdec.check(info, device)
        if why is not None:
            raise UnsupportedError(why)
        self.conn = conn
        self.device = device
        self.info = info
        extradata = conn.stream.codec_context.extradata
        self._annexb = AnnexB(codec, bytes(extradata) if extradata else None) if codec in ("h264", "hevc") else None
        if latency == "auto":  # frames as soon as decoded, unless the stream reorders them
            latency = "zero" if info.extra.get("reorder") == 0 else "low"
        self.latency = latency
        self.reason = f"NVDEC (PyNvVideoCodec) on the GPU, latency {latency!r}"
        self._session = nvdec.NvdecSession.acquire(info, device, latency=latency)  # type: ignore[arg-type]
        self._session.start(None)  # type: ignore[arg-type]
        self._started = False  # decoding starts at the first keyframe
        self._deep = info.bit_depth > 8
        self._last_pts: int | None = None
        self._fed: collections.deque[int | None] = collections.deque()  # "zero": timestamps of packets fed, not yet out
        self._lag: int | None = None  # "zero": packets between a picture's and its frame's way out
        self._reordered = False  # "zero" but frames came out of order: "low" from the next keyframe
        self._retired: Any = None  # the "zero" session after a switch (its last frames may be in use)
        self.errors = 0
        self.last_error: str | None = None

    def decode(self, packet: Any) -> list[tuple[int | None, Any]]:
        from vidpipe.types import Packet

        if not self._started and not packet.is_keyframe:
            return []  # nothing before the first keyframe can be decoded
        try:
            data = bytes(packet)
            if self._annexb is not None:
                data = self._annexb.convert(data, start=not self._started)
        except DecodeError as exc:
            self.errors += 1
            self.last_error = str(exc)
            return []
        out: list[tuple[int | None, Any]] = []
        if self._reordered and packet.is_keyframe and self._started:
            out = self._to_low()
        self._started = True
        refs = self._session.feed(
            Packet(data, packet.pts, packet.dts, self.info.time_base, bool(packet.is_keyframe))
        )
        if self.latency != "zero":
            out.extend((ref.pts, ref) for ref in refs)
            return out
        self._fed.append(packet.pts)
        new = self._in_decode_order(refs)
        if not self._reordered:
            self._check_order(new)
        return out + new

    def _in_decode_order(self, refs: list[Any]) -> list[tuple[int | None, Any]]:
        """``"zero"`` frames leave in decode order without their timestamps (NVDEC hands back
        0), each once its picture is complete: with the packet that holds it, or, where the
        parser waits for the next picture's start, one packet later. That lag is measured at
        the first frame; then the ``n`` frames out now are the ``n`` oldest of the last ``n +
        lag`` packets fed (a packet that gave no frame is forgotten, so it cannot shift the
        others' timestamps)."""
        if not refs and self._lag is None:
            return []  # the first frame is not out yet: the lag is not known
        if self._lag is None:
            self._lag = max(0, len(self._fed) - len(refs))
        keep = len(refs) + self._lag
        while len(self._fed) > keep:
            self._fed.popleft()
        return [(self._fed.popleft() if self._fed else None, ref) for ref in refs]

    def _check_order(self, frames: list[tuple[int | None, Any]]) -> None:
        """``"zero"`` hands frames out in decode order: a timestamp that goes back means the
        stream reorders frames (B-frames) after all; switch to ``"low"`` at the next keyframe."""
        for pts, _ in frames:
            if pts is None:
                continue
            if self._last_pts is not None and pts < self._last_pts:
                self._reordered = True
                logger.warning("%s: the stream reorders frames (B-frames); NVDEC latency 'low' from its next "
                               "keyframe", self.info.source)  # fmt: skip
                return
            self._last_pts = pts

    def _to_low(self) -> list[tuple[int | None, Any]]:
        """Drain the ``"zero"`` session (its last frames) and go on with a ``"low"`` one. The
        frames returned stay valid: the old session is released only after they are copied
        (:meth:`batch` is called on them before the next :meth:`decode`)."""
        from vidpipe.decode import nvdec

        old = self._session
        tail = self._in_decode_order(old.finish())
        self._fed.clear()
        self._retired = old  # closed by close(), after its last frames were taken (one switch at most)
        self._session = nvdec.NvdecSession.acquire(self.info, self.device, latency="low")
        self._session.start(None)  # type: ignore[arg-type]
        self.latency = "low"
        self._reordered = False
        return tail

    def flush(self) -> list[tuple[int | None, Any]]:
        if not self._started:
            return []
        self._started = False  # drained: close() need not drain again
        refs = self._session.finish()
        if self.latency == "zero":
            out = self._in_decode_order(refs)
            self._fed.clear()
            return out
        return [(ref.pts, ref) for ref in refs]

    def frame_shape(self, ref: Any) -> tuple[tuple[int, ...], "torch.dtype", str]:
        """``(shape, dtype, format)`` of a frame as :meth:`batch` writes it: ``(H*3/2, W)``."""
        import torch

        h, w = self.info.height, self.info.width
        return (h * 3 // 2, w), (torch.uint16 if self._deep else torch.uint8), ("p010" if self._deep else "nv12")

    def batch(self, ref: Any, meta: FrameMeta, *, out: "torch.Tensor | None" = None) -> FrameBatch:
        """``(1, H*3/2, W)`` NV12 (P016: uint16) on the GPU, ordered before the calling thread's
        current CUDA stream (which the buffer was allocated on). ``out``: a ``(H*3/2, W)``
        buffer of :meth:`frame_shape` to write the frame into instead of new memory."""
        import torch

        h, w = self.info.height, self.info.width
        if (meta.height, meta.width) != (h, w):
            meta = dataclasses.replace(meta, height=h, width=w)
        dtype = torch.uint16 if self._deep else torch.uint8
        consumer = torch.cuda.current_stream(self.device)
        buf = torch.empty((1, h * 3 // 2, w), dtype=dtype, device=self.device) if out is None else out.unsqueeze(0)
        sess_stream = self._session.stream
        sess_stream.wait_stream(consumer)  # the buffer's memory may still be read by earlier work
        with torch.cuda.stream(sess_stream):
            ref.copy_into(buf[0])
        consumer.wait_stream(sess_stream)
        if out is None:
            buf.record_stream(sess_stream)
        return FrameBatch(
            data=buf, frames=(meta,), format="p010" if self._deep else "nv12", color=self.info.color
        )

    def close(self) -> None:
        retired, self._retired = self._retired, None
        if retired is not None:
            retired.close()
        sess, self._session = self._session, None
        if sess is None:
            return
        try:
            if self._started:
                sess.finish()
        except Exception as exc:  # noqa: BLE001 - a broken session is destroyed by close()
            logger.debug("%s: draining NVDEC: %s", self.info.source, exc)
        sess.close()


def open_live_decoder(
    conn: "Connection", device: "torch.device", config: "PipelineConfig"
) -> "PyAVLiveDecoder | NvdecLiveDecoder":
    """The decoder for one connection (see the module docstring for the choice)."""
    choice = config.decoder
    if device.type == "cuda" and choice in ("auto", "nvdec"):
        try:
            return NvdecLiveDecoder(conn, device, config.live.decode_latency)
        except Exception as exc:  # noqa: BLE001 - any NVDEC failure to start falls back (or raises, below)
            why = redact_text(str(exc) or type(exc).__name__)
            if choice == "nvdec":
                raise UnsupportedError(f"decoder='nvdec' cannot decode {conn.info.source}: {why}") from None
            if config.strict_gpu:
                raise GpuFallbackError(
                    f"{conn.info.source}: NVDEC cannot decode this stream ({why}) and strict_gpu forbids "
                    "the CPU fallback"
                ) from None
            return PyAVLiveDecoder(conn, device, f"NVDEC unavailable ({why}); PyAV on the CPU")
    if choice == "nvdec":
        raise UnsupportedError(f"decoder='nvdec' needs a CUDA device; {conn.info.source} runs on {device}")
    if choice not in ("auto", "pyav"):
        return PyAVLiveDecoder(conn, device, f"decoder={choice!r} reads files only; live streams decode with PyAV")
    return PyAVLiveDecoder(conn, device, "PyAV (FFmpeg) on the CPU")
