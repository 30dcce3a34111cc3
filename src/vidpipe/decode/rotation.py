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
first frame when the stream-level value is not available. A matrix may also mirror the picture
(eight orientations in all, as EXIF's); it is applied as a turn then a left-right flip, as the
``ffmpeg`` tool applies it. A turn by an angle that is not a multiple of 90 degrees is reported
with a warning and not applied.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import struct
from collections.abc import Iterator
from typing import Any

from vidpipe.decode.base import Decoder, DecoderWrapper
from vidpipe.types import FrameBatch

__all__ = [
    "Orientation",
    "matrix_rotation",
    "matrix_orientation",
    "frame_matrix",
    "stream_orientation",
    "rotate_batch",
    "RotatedDecoder",
]

logger = logging.getLogger(__name__)

#: packets read at most while looking for the first frame's display matrix
_PROBE_PACKETS = 64


@dataclasses.dataclass(frozen=True, slots=True)
class Orientation:
    """How to show the stored frames: turn ``degrees`` counter-clockwise (0, 90, 180, 270), then
    flip left-right if ``mirror``."""

    degrees: int = 0
    mirror: bool = False

    def __bool__(self) -> bool:
        return bool(self.degrees or self.mirror)


def _matrix(raw: bytes | None) -> list[float] | None:
    if raw is None or len(raw) < 36:
        return None
    return [v / 65536.0 for v in struct.unpack("<9i", bytes(raw[:36]))]


def _scaled_matrix(raw: bytes) -> tuple[Any, float, float] | None:
    """The display matrix's elements and its two column scales, ``None`` if degenerate."""
    m = _matrix(raw)
    if m is None:
        return None
    s0, s1 = math.hypot(m[0], m[3]), math.hypot(m[1], m[4])
    if s0 == 0 or s1 == 0:
        return None
    return m, s0, s1


def matrix_rotation(raw: bytes) -> tuple[float, bool] | None:
    """``(angle counter-clockwise in degrees, mirrored)`` of an FFmpeg display matrix (nine
    little-endian int32, 16.16 fixed point; ``av_display_rotation_get``), ``None`` if degenerate."""
    scaled = _scaled_matrix(raw)
    if scaled is None:
        return None
    m, s0, s1 = scaled
    angle = -math.degrees(math.atan2(m[1] / s1, m[0] / s0))
    mirrored = m[0] * m[4] - m[1] * m[3] < 0
    return angle, mirrored


def matrix_orientation(raw: bytes) -> Orientation | None:
    """The :class:`Orientation` of an FFmpeg display matrix; ``None`` (with a warning) when it
    turns by an angle that is not a multiple of 90 degrees, or is degenerate.

    The matrix maps a stored pixel ``(x, y)`` (x right, y down) to ``(a*x + c*y, b*x + d*y)`` on
    screen (``a, b, c, d``: elements 0, 1, 3, 4). Which of the eight turn-and-flip operations
    does that is found by applying both to a small asymmetric grid.
    """
    scaled = _scaled_matrix(raw)
    if scaled is None:
        return None
    m, s0, s1 = scaled
    exact = (m[0] / s0, m[1] / s1, m[3] / s0, m[4] / s1)
    q = tuple(round(v) for v in exact)
    if any(abs(v - r) > 0.02 for v, r in zip(exact, q)):
        angle, mirrored = matrix_rotation(raw) or (0.0, False)
        logger.warning(
            "the video's display matrix turns the picture by %.1f degrees%s; vidpipe applies turns by "
            "multiples of 90 degrees only, so the frames are delivered as stored",
            angle, " and mirrors it" if mirrored else "",
        )  # fmt: skip
        return None
    return _dihedral(*q)


def _dihedral(a: int, b: int, c: int, d: int) -> Orientation:
    import numpy as np

    grid = np.arange(6).reshape(2, 3)  # stored: 2 rows, 3 columns
    ys, xs = np.mgrid[0:2, 0:3]
    x2, y2 = a * xs + c * ys, b * xs + d * ys
    shown = np.empty((y2.max() - y2.min() + 1, x2.max() - x2.min() + 1), dtype=grid.dtype)
    shown[y2 - y2.min(), x2 - x2.min()] = grid
    for k in range(4):
        for mirror in (False, True):
            turned = np.rot90(grid, k)
            if mirror:
                turned = turned[:, ::-1]
            if turned.shape == shown.shape and (turned == shown).all():
                return Orientation(90 * k, mirror)
    raise ValueError(f"display matrix {(a, b, c, d)} is not a turn or a flip")  # singular: not reached


def frame_matrix(frame: Any) -> bytes | None:
    """The display matrix attached to a decoded PyAV frame (``None``: the frame has none)."""
    side = getattr(frame, "side_data", None)
    if side is None:
        return None
    try:
        for item in list(iter(side)):  # PyAV 18 iterates SideData objects; others may iterate keys
            sd = item if hasattr(item, "type") else side[item]
            if "DISPLAYMATRIX" in str(getattr(sd, "type", "")).upper():
                return bytes(sd)
    except Exception:  # noqa: BLE001 - a PyAV whose side data cannot be read this way: unknown
        return None
    return None


def _first_frame_matrix(container: Any, stream: Any) -> tuple[bool, bytes | None]:
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
    return (True, frame_matrix(frames[0])) if frames else (False, None)


def stream_orientation(
    container: Any, stream: Any, *, stream_matrix: bytes | None, decode: bool
) -> tuple[Orientation, bool]:
    """``(orientation to apply, known)`` of ``stream``.

    ``stream_matrix``: the stream's display matrix as PyAV gives it (``None``: this PyAV cannot
    give it, or the stream has none). Without one, and with ``decode``, the first frame's display
    matrix decides (the container is read from its current position: open it for this). The
    ``rotate`` tag of older FFmpeg builds is the last resort. ``known`` is ``False`` when no
    matrix was read and no frame could be decoded to look for one.
    """
    raw, known = stream_matrix, stream_matrix is not None
    if raw is None and decode:
        known, raw = _first_frame_matrix(container, stream)
    if raw is not None:
        return matrix_orientation(raw) or Orientation(), True
    tag = (stream.metadata or {}).get("rotate")
    if tag is not None:
        try:
            return Orientation(round(-float(tag) / 90.0) * 90 % 360), True  # the tag is clockwise
        except ValueError:
            pass
    return Orientation(), known


def rotate_batch(batch: FrameBatch, degrees: int, *, mirror: bool = False) -> FrameBatch:
    """``batch`` turned ``degrees`` (a multiple of 90) counter-clockwise, then flipped left-right
    if ``mirror``, on its own device.

    RGB ``(B, 3, H, W)`` and YUV ``nv12``/``p010`` ``(B, H*3/2, W)`` batches are supported (the
    interleaved chroma plane turns as pairs). Returns a new contiguous tensor (a copy); no turn
    and no flip returns ``batch`` itself.
    """
    import torch

    k = (int(degrees) // 90) % 4
    if (k == 0 and not mirror) or not len(batch):
        return batch

    def turn(t: "torch.Tensor", dims: tuple[int, int]) -> "torch.Tensor":
        t = torch.rot90(t, k, dims=dims) if k else t
        return torch.flip(t, dims=(dims[1],)) if mirror else t

    data = batch.data
    if batch.format == "rgb":
        out = turn(data, (2, 3)).contiguous()
        h, w = out.shape[2], out.shape[3]
    else:
        b, rows, width = data.shape
        height = rows * 2 // 3
        luma = turn(data[:, :height], (1, 2))
        chroma = turn(data[:, height:].reshape(b, height // 2, width // 2, 2), (1, 2))
        h, w = luma.shape[1], luma.shape[2]
        out = torch.cat([luma, chroma.reshape(b, h // 2, w)], dim=1)
    frames = tuple(dataclasses.replace(m, height=h, width=w) for m in batch.frames)
    return FrameBatch(data=out, frames=frames, format=batch.format, color=batch.color)


class RotatedDecoder(DecoderWrapper):
    """A decoder whose batches are turned upright: ``degrees`` counter-clockwise, then flipped
    left-right if ``mirror`` (see :class:`Orientation`).

    Everything else (``info``, ``choice``, ``error``, counters, ``close``) is the wrapped
    decoder's: attributes are read from it.
    """

    def __init__(self, inner: Decoder, degrees: int, *, mirror: bool = False) -> None:
        super().__init__(inner)
        self.degrees = int(degrees) % 360
        self.mirror = bool(mirror)

    def batches(self, batch_size: int) -> Iterator[FrameBatch]:
        for batch in self.inner.batches(batch_size):
            yield rotate_batch(batch, self.degrees, mirror=self.mirror)

    def __repr__(self) -> str:
        return f"RotatedDecoder({self.inner!r}, degrees={self.degrees}, mirror={self.mirror})"
