"""Decoder sessions: one codec instance that decodes one segment at a time, driven by one thread.

A session is fed :class:`~vidpipe.types.Packet` objects of a segment (from its keyframe on) and
returns the frames the codec outputs as :class:`FrameRef` objects, in presentation order.
:meth:`Session.finish` drains the codec at the end of a segment and leaves it ready for the next
one (possibly elsewhere in the stream). A :class:`FrameRef` is valid only until the next
``feed``/``finish`` call: copy what you keep with :meth:`FrameRef.copy_into` before that.

Sessions differ in what they output (``layout``):

- ``"yuv"``: NV12 rows ``(H*3/2, W)`` (``uint8``), or P016 (``uint16``, samples in the high
  bits) for more than 8 bits, the layout of ``FrameBatch`` formats ``"nv12"``/``"p010"``;
- ``"rgb"``: ``(3, H, W)`` ``uint8`` RGB, converted with the stream's colour matrix and range.

This module has the PyAV session (CPU); the NVDEC session lives in :mod:`vidpipe.decode.nvdec`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal, Protocol

from vidpipe.decode.base import StreamInfo
from vidpipe.errors import DecodeError

if TYPE_CHECKING:
    import numpy as np
    import torch

    from vidpipe.decode.segments import Segment
    from vidpipe.types import Packet

__all__ = ["FrameRef", "Session", "PyAVSession", "yuv_frame_to_nv12"]

logger = logging.getLogger(__name__)

Layout = Literal["yuv", "rgb"]


class FrameRef(Protocol):
    """A decoded frame, valid until its session's next ``feed``/``finish``."""

    pts: int | None

    def copy_into(self, dst: "torch.Tensor") -> int:
        """Copy the frame into ``dst`` (a row of a batch buffer, the session's layout); returns
        the bytes moved from host to device (0 for a device-to-device copy)."""


class Session(Protocol):
    """One decoder instance; owned by one thread at a time."""

    kind: str
    layout: Layout
    stream: Any  # the CUDA stream its copies run on (None for CPU copies)

    def start(self, segment: "Segment") -> None: ...

    def feed(self, packet: "Packet") -> Iterable[FrameRef]: ...

    def finish(self) -> Iterable[FrameRef]: ...

    def close(self) -> None: ...


def yuv_frame_to_nv12(frame: Any) -> Any:
    """A PyAV 4:2:0 frame as an NV12 (8 bit) or P016 (10 bit, MSB-aligned) ``(H*3/2, W)`` array."""
    import numpy as np

    name = frame.format.name
    h, w = frame.height, frame.width
    if name in ("yuv420p", "yuvj420p"):
        planar = frame.to_ndarray()  # (H*3/2, W) I420
        out = np.empty((h * 3 // 2, w), dtype=np.uint8)
        out[:h] = planar[:h]
        u = planar[h : h + h // 4].reshape(h // 2, w // 2)
        v = planar[h + h // 4 :].reshape(h // 2, w // 2)
    elif name == "yuv420p10le":
        planar = frame.to_ndarray()  # (H*3/2, W) uint16, 10-bit values
        out = np.empty((h * 3 // 2, w), dtype=np.uint16)
        out[:h] = planar[:h] << 6
        u = (planar[h : h + h // 4] << 6).reshape(h // 2, w // 2)
        v = (planar[h + h // 4 :] << 6).reshape(h // 2, w // 2)
    else:
        raise DecodeError(f"cannot convert a {name} frame to NV12 (4:2:0, 8 or 10 bit only)")
    uv = out[h:].reshape(h // 2, w // 2, 2)
    uv[..., 0] = u
    uv[..., 1] = v
    return out


class _AVFrameRef:
    __slots__ = ("pts", "_frame", "_session")

    def __init__(self, frame: Any, session: "PyAVSession") -> None:
        self.pts = frame.pts
        self._frame = frame
        self._session = session

    def copy_into(self, dst: "torch.Tensor") -> int:
        return self._session._copy(self._frame, dst)


class PyAVSession:
    """Decode packets with an FFmpeg codec context (CPU).

    Args:
        info: the stream.
        layout: ``"rgb"`` (via the PyAV backend's conversion, same colours as
            :class:`~vidpipe.decode.pyav.PyAVDecoder`) or ``"yuv"`` (NV12/P016 rows, for the
            NVDEC path's retries).
        annexb: the packets are Annex-B (H.264/HEVC passed through ``*_mp4toannexb``): the
            codec reads parameter sets in-band, so the container's extradata is not used.
        extradata: the container's codec header, used when ``annexb`` is false.
        threads: FFmpeg decoder threads (0: one per core).
        stream: CUDA stream for uploads when ``dst`` lives on the GPU (``None``: current).
    """

    kind = "pyav"

    def __init__(
        self,
        info: StreamInfo,
        *,
        layout: Layout = "rgb",
        annexb: bool = False,
        extradata: bytes | None = None,
        threads: int = 1,
        stream: Any = None,
    ) -> None:
        import av

        self.info = info
        self.layout = layout
        self.stream = stream
        self._cc = av.CodecContext.create(info.codec, "r")
        if extradata and not annexb:
            self._cc.extradata = extradata
        self._cc.thread_type = "AUTO"
        self._cc.thread_count = int(threads)
        self._converter: Any = None
        self.bytes_h2d = 0
        self.packets_rejected = 0

    def start(self, segment: "Segment") -> None:
        return None

    def _decode(self, packet: Any) -> list[_AVFrameRef]:
        """Decode one packet; a packet FFmpeg rejects as invalid is dropped and counted (the
        frames after it decode or are concealed, as FFmpeg does within a packet), so damage
        costs frames, not the segment."""
        import av

        try:
            frames = self._cc.decode(packet)
        except av.error.InvalidDataError as exc:
            self.packets_rejected += 1
            if self.packets_rejected == 1:
                logger.warning("%s: PyAV rejected a damaged packet (%s); going on", self.info.source, exc)
            return []
        except av.error.FFmpegError as exc:
            raise DecodeError(f"{self.info.source}: PyAV could not decode a packet ({exc})") from exc
        return [_AVFrameRef(f, self) for f in frames]

    def feed(self, packet: "Packet") -> list[_AVFrameRef]:
        import av

        pkt = av.Packet(packet.data)
        pkt.pts = packet.pts
        pkt.dts = packet.dts
        return self._decode(pkt)

    def finish(self) -> list[_AVFrameRef]:
        try:
            return self._decode(None)
        finally:
            self._cc.flush_buffers()

    def _copy(self, frame: Any, dst: Any) -> int:
        """Write ``frame`` into ``dst``: a row of a batch (a tensor on the CPU or a GPU, a
        decoder process's row of a GPU ring) or a NumPy array (a decoder process's row of a CPU
        ring: no PyTorch there)."""
        import numpy as np

        if isinstance(dst, np.ndarray):
            self._write_host(frame, dst)
            return 0
        import torch

        from vidpipe.decode.ipc_memory import as_torch

        dst = as_torch(dst)  # (a decoder process's row of the parent's GPU ring)
        if dst.device.type == "cpu":
            self._write_host(frame, dst.numpy())
            return 0
        if self.layout == "rgb":
            src = torch.empty(tuple(dst.shape), dtype=torch.uint8)
            self._write_host(frame, src.numpy())
        else:
            src = torch.from_numpy(self._nv12(frame, tuple(dst.shape), str(dst.dtype).removeprefix("torch.")))
        if self.stream is not None:
            with torch.cuda.stream(self.stream):
                dst.copy_(src)
        else:
            dst.copy_(src)
        n = src.numel() * src.element_size()
        self.bytes_h2d += n
        return n

    def _write_host(self, frame: Any, out: "np.ndarray") -> None:
        """``frame`` into the host array ``out`` in this session's layout (RGB ``(3, H, W)``
        uint8, or NV12/P016 ``(H*3/2, W)``); a frame that does not fit is a DecodeError."""
        if self.layout == "rgb":
            if self._converter is None:
                from vidpipe.decode.rgb import FrameToRGB

                self._converter = FrameToRGB(self.info)
            if (frame.height, frame.width) != tuple(out.shape[1:]):
                raise DecodeError(
                    f"{self.info.source}: frame size changed to {frame.width}x{frame.height} "
                    f"(expected {out.shape[2]}x{out.shape[1]}); decode this file with decoder='pyav'"
                )
            self._converter(frame, out)
            return
        out[...] = self._nv12(frame, out.shape, out.dtype.name)

    def _nv12(self, frame: Any, shape: tuple[int, ...], dtype: str) -> "np.ndarray":
        """``frame`` as an NV12/P016 array that must have ``shape`` and ``dtype`` (a row's)."""
        src = yuv_frame_to_nv12(frame)
        if src.shape != tuple(shape) or src.dtype.name != dtype:
            raise DecodeError(
                f"{self.info.source}: frame {src.shape} {src.dtype} does not fit the batch "
                f"row {tuple(shape)} {dtype} (size change mid-stream?)"
            )
        return src

    def close(self) -> None:
        self._cc = None
