"""Display rotation: frames delivered upright, as players and the ``ffmpeg`` tool show them.

A phone video is usually stored sideways with a *display matrix* saying how to turn it (MP4/MOV
``tkhd``, Matroska projection). FFmpeg reports it as the rotation angle counter-clockwise
(``av_display_rotation_get``; ``ffprobe`` prints ``rotation=90``) and the ``ffmpeg`` tool turns
the frames by default (autorotate: ``transpose=cclock`` for 90, ``transpose=clock`` for 270,
``hflip,vflip`` for 180). vidpipe does the same for every backend, after decoding:
:func:`rotate_batch` turns a :class:`~vidpipe.types.FrameBatch` (RGB, NV12 or P010, on any
device) and :class:`RotatedDecoder` applies it to every batch of a decoder
(:func:`~vidpipe.decode.registry.open_decoder` wraps backends with it). Frame sizes in
:class:`~vidpipe.types.FrameMeta`, and so box coordinates, are those of the upright frame;
``StreamInfo.width``/``height`` stay the coded size.

Reading the angle: PyAV 19 exposes the stream's display matrix; PyAV 18 (what Python 3.11 gets)
does not, but FFmpeg attaches it to every decoded frame, so :func:`stream_rotation` decodes the
first frame when the stream-level value is not available. A matrix that mirrors the picture, or
turns it by an angle that is not a multiple of 90 degrees, is reported with a warning and not
applied.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import struct
from collections.abc import Iterator
from typing import Any

from vidpipe.decode.base import Decoder
from vidpipe.types import FrameBatch

__all__ = ["matrix_rotation", "frame_rotation", "stream_rotation", "rotate_batch", "RotatedDecoder"]

logger = logging.getLogger(__name__)

#: packets read at most while looking for the first frame's display matrix
_PROBE_PACKETS = 64


def matrix_rotation(raw: bytes) -> tuple[float, bool] | None:
    """``(angle counter-clockwise in degrees, mirrored)`` of an FFmpeg display matrix (nine
    little-endian int32, 16.16 fixed point; ``av_display_rotation_get``), ``None`` if degenerate."""
    if len(raw) < 36:
        return None
    m = [v / 65536.0 for v in struct.unpack("<9i", bytes(raw[:36]))]
    s0, s1 = math.hypot(m[0], m[3]), math.hypot(m[1], m[4])
    if s0 == 0 or s1 == 0:
        return None
    angle = -math.degrees(math.atan2(m[1] / s1, m[0] / s0))
    mirrored = m[0] * m[4] - m[1] * m[3] < 0
    return angle, mirrored


def frame_rotation(frame: Any) -> tuple[float, bool] | None:
    """The display matrix attached to a decoded PyAV frame (``None``: the frame has none)."""
    side = getattr(frame, "side_data", None)
    if side is None:
        return None
    try:
        for item in list(iter(side)):  # PyAV 18 iterates SideData objects; others may iterate keys
            sd = item if hasattr(item, "type") else side[item]
            if "DISPLAYMATRIX" in str(getattr(sd, "type", "")).upper():
                return matrix_rotation(bytes(sd))
    except Exception:  # noqa: BLE001 - a PyAV whose side data cannot be read this way: unknown
        return None
    return None


def _first_frame_rotation(container: Any, stream: Any) -> tuple[bool, tuple[float, bool] | None]:
    """Decode up to the first frame of ``stream``: ``(a frame was decoded, its display matrix)``."""
    import av

    from vidpipe.decode.probe import read_packets

    cc = stream.codec_context
    cc.thread_type = "SLICE"  # frame threads would hold the first frame back until they are all busy
    cc.thread_count = 1
    try:
        frames: list = []
        for n, packet in enumerate(read_packets(container, stream)):
            try:
                frames = stream.decode(packet)
            except av.error.FFmpegError:  # a damaged packet: try the next one
                frames = []
            if frames or n >= _PROBE_PACKETS:
                break
        if not frames:
            frames = stream.decode(None)
    except Exception:  # noqa: BLE001 - best effort (no decoder for the codec, a damaged file): unknown
        return False, None
    return (True, frame_rotation(frames[0])) if frames else (False, None)


def stream_rotation(container: Any, stream: Any, *, stream_level: int | None, decode: bool) -> tuple[int, bool]:
    """``(rotation to apply, known)``: degrees counter-clockwise in {0, 90, 180, 270}.

    ``stream_level``: the angle PyAV gave for the stream (``None``: this PyAV cannot say). A
    non-zero value is used; otherwise, with ``decode``, the first frame's display matrix decides
    (the container is read from its current position: open it for this). The ``rotate`` tag of
    older FFmpeg builds is the last resort. ``known`` is ``False`` when PyAV cannot give the
    stream's matrix and ``decode`` is off or the first frame could not be decoded.
    """
    if stream_level:
        return _applicable(float(stream_level), False), True
    found, decoded = None, False
    if decode:
        decoded, found = _first_frame_rotation(container, stream)
    if found is not None:
        return _applicable(*found), True
    tag = (stream.metadata or {}).get("rotate")
    if tag is not None:
        try:
            return _applicable(-float(tag), False), True  # the tag is clockwise
        except ValueError:
            pass
    return 0, stream_level is not None or decoded


def _applicable(angle: float, mirrored: bool) -> int:
    quarter = round(angle / 90.0)
    if mirrored or abs(angle - 90.0 * quarter) > 1.0:
        logger.warning(
            "the video's display matrix %s%.1f degrees; vidpipe applies rotations by multiples of 90 "
            "degrees only, so the frames are delivered as stored",
            "mirrors the picture and turns it by " if mirrored else "turns the picture by ", angle,
        )  # fmt: skip
        return 0
    return (quarter * 90) % 360


def rotate_batch(batch: FrameBatch, degrees: int) -> FrameBatch:
    """``batch`` turned ``degrees`` (a multiple of 90) counter-clockwise, on its own device.

    RGB ``(B, 3, H, W)`` and YUV ``nv12``/``p010`` ``(B, H*3/2, W)`` batches are supported (the
    interleaved chroma plane turns as pairs). Returns a new contiguous tensor (a copy); 0 returns
    ``batch`` itself.
    """
    import torch

    k = (int(degrees) // 90) % 4
    if k == 0 or not len(batch):
        return batch
    data = batch.data
    if batch.format == "rgb":
        out = torch.rot90(data, k, dims=(2, 3)).contiguous()
        h, w = out.shape[2], out.shape[3]
    else:
        b, rows, width = data.shape
        height = rows * 2 // 3
        luma = torch.rot90(data[:, :height], k, dims=(1, 2))
        chroma = data[:, height:].reshape(b, height // 2, width // 2, 2)
        chroma = torch.rot90(chroma, k, dims=(1, 2))
        h, w = luma.shape[1], luma.shape[2]
        out = torch.cat([luma, chroma.reshape(b, h // 2, w)], dim=1)
    frames = tuple(dataclasses.replace(m, height=h, width=w) for m in batch.frames)
    return FrameBatch(data=out, frames=frames, format=batch.format, color=batch.color)


class RotatedDecoder(Decoder):
    """A decoder whose batches are turned upright by ``degrees`` counter-clockwise.

    Everything else (``info``, ``choice``, ``error``, counters, ``close``) is the wrapped
    decoder's: attributes are read from it.
    """

    def __init__(self, inner: Decoder, degrees: int) -> None:
        self.inner = inner
        self.degrees = int(degrees) % 360
        self.name = inner.name

    def batches(self, batch_size: int) -> Iterator[FrameBatch]:
        for batch in self.inner.batches(batch_size):
            yield rotate_batch(batch, self.degrees)

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:  # only called for attributes not found here
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def error(self) -> Exception | None:  # type: ignore[override]
        return self.inner.error

    @property
    def frames_decoded(self) -> int:  # type: ignore[override]
        return self.inner.frames_decoded

    @property
    def frames_delivered(self) -> int:  # type: ignore[override]
        return self.inner.frames_delivered

    def __repr__(self) -> str:
        return f"RotatedDecoder({self.inner!r}, degrees={self.degrees})"
