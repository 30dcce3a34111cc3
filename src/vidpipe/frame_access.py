"""Random access to the frames of a video file, by number and by time (what ``video[i]`` and
``video.get_frames_at(...)`` of :func:`vidpipe.open_video` use).

Frame numbers are FFmpeg's: frame ``i`` is the ``i``-th frame the decoder outputs, in
presentation order, ``0 .. N-1`` (what ``ffmpeg -vf select='eq(n,i)'`` and a plain
``container.decode(video=0)`` loop count), whatever the timestamps: a variable-rate stream is
numbered by rank, not by ``pts * fps``.

How: one demux scan (no decoding) lists every packet's timestamps and keyframe flag
(:func:`scan_frames` -> :class:`FrameTable`); the frames' presentation timestamps, sorted, give
each frame's number, and the keyframes give where decoding can start. A request seeks to the last
keyframe at or before the wanted frame and decodes forward (PyAV, on the CPU), continuing without
a new seek when the next wanted frame is ahead in the same GOP. Frames are converted to RGB with
the stream's colour matrix and range (:class:`~vidpipe.decode.rgb.FrameToRGB`, like the PyAV
backend) and then moved to the requested device. When timestamps are missing or repeated the
table is inexact and frames are counted as they are decoded from the start (slower, still right).
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from vidpipe.errors import ConfigError, DecodeError, UnsupportedError, VidpipeError
from vidpipe.sources.redact import redact_url

if TYPE_CHECKING:
    import torch

    from vidpipe.decode.base import StreamInfo
    from vidpipe.types import FrameBatch

__all__ = ["FrameTable", "FrameReader", "OutOfRangeError", "scan_frames"]

logger = logging.getLogger(__name__)

_LIVE_SCHEMES = ("rtsp", "rtsps", "rtmp", "rtmps", "srt", "udp", "tcp", "rtp")


class OutOfRangeError(VidpipeError, IndexError):
    """A frame number or a time outside the video."""


@dataclass(frozen=True)
class FrameTable:
    """The frames of one video stream, from a demux scan.

    Attributes:
        source: the input.
        time_base: unit of the timestamps; ``start_pts`` is the stream's first timestamp (times
            in seconds count from it, like :attr:`vidpipe.types.FrameMeta.pts`).
        pts: presentation timestamp of frame ``0 .. N-1`` (sorted).
        end_pts: where the last frame ends (its timestamp plus its duration).
        keyframes: numbers of the frames decoding can start from (sorted).
        seek_ts: per keyframe, the timestamp to seek to.
        exact: ``False`` when timestamps are missing or repeated: then ``pts`` is empty and
            frames are numbered while decoding from the start.
        count: number of frames (for an inexact table, the number of packets).
    """

    source: str
    time_base: Fraction
    start_pts: int
    pts: tuple[int, ...]
    end_pts: int | None
    keyframes: tuple[int, ...]
    seek_ts: tuple[int, ...]
    exact: bool
    count: int

    def __len__(self) -> int:
        return self.count

    def seconds(self, pts: int) -> float:
        return float((pts - self.start_pts) * self.time_base)

    @property
    def end_seconds(self) -> float | None:
        return None if self.end_pts is None else self.seconds(self.end_pts)

    def number_at(self, seconds: float) -> int:
        """The number of the frame shown at ``seconds`` (``pts <= seconds < next pts``)."""
        if not self.exact:
            raise UnsupportedError(
                f"{self.source}: the stream's timestamps are missing or repeated, so frames cannot be "
                "found by time; use frame numbers (video[i], get_frames_at)"
            )
        if not self.pts:
            raise OutOfRangeError(f"{self.source} has no frames")
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or seconds != seconds:
            raise ConfigError(f"invalid seconds={seconds!r}; expected a time in seconds")
        # in timestamp ticks; a thousandth of a tick absorbs the rounding of seconds as a float
        ts = self.start_pts + seconds / self.time_base + 1e-3
        if ts < self.pts[0] or (self.end_pts is not None and ts >= self.end_pts):
            first, end = self.seconds(self.pts[0]), self.end_seconds
            raise OutOfRangeError(
                f"no frame of {self.source} is shown at {seconds} s: its frames cover "
                f"[{first:.6g}, {end:.6g}) seconds from the start of the stream"
            )
        return max(0, bisect.bisect_right(self.pts, ts) - 1)


def scan_frames(source: str | os.PathLike) -> FrameTable:
    """Demux ``source`` once (nothing decoded) and build its :class:`FrameTable`.

    Packets FFmpeg marks as discarded (before an MP4 edit list's start) give no frame and are
    left out. A read error part-way keeps the packets before it.
    """
    from vidpipe.decode.demux import Demuxer

    text = os.fspath(source)
    rows: list[tuple[int | None, int | None, int, bool]] = []  # pts, dts, duration, key
    with Demuxer(text) as dmx:
        tb, start = dmx.time_base, dmx.start_pts
        try:
            for pkt in dmx.raw_packets():
                if pkt.is_discard:
                    continue
                rows.append((pkt.pts, pkt.dts, int(pkt.duration or 0), bool(pkt.is_keyframe)))
        except DecodeError as exc:
            logger.warning("%s: frame scan stopped after %d packets (%s)", text, len(rows), exc)
    pts = [r[0] for r in rows]
    keys = [r for r in rows if r[3]]
    exact = bool(keys) and None not in pts and len(set(pts)) == len(pts)
    if not exact:
        logger.debug("%s: timestamps missing or repeated; frames are numbered while decoding", text)
        return FrameTable(redact_url(text), tb, start, (), None, (), (), False, len(rows))
    order = sorted(rows, key=lambda r: r[0])  # type: ignore[arg-type,return-value]
    frame_pts = tuple(r[0] for r in order)  # type: ignore[misc]
    number = {p: n for n, p in enumerate(frame_pts)}
    last = order[-1]
    step = last[2] or (
        (frame_pts[-1] - frame_pts[0]) // (len(frame_pts) - 1) if len(frame_pts) > 1 else 0
    )
    keyframes, seek = [], []
    for p, _, _, _ in sorted(keys, key=lambda r: r[0]):  # type: ignore[arg-type,return-value]
        keyframes.append(number[p])
        seek.append(p)  # MP4 and Matroska seek by presentation time: to this keyframe
    end = frame_pts[-1] + step if step > 0 else None
    return FrameTable(redact_url(text), tb, start, frame_pts, end, tuple(keyframes), tuple(seek), True, len(frame_pts))


class FrameReader:
    """Decodes chosen frames of one file to RGB tensors on ``device``; keeps one PyAV container
    open between calls (:meth:`close` releases it). Not thread-safe.

    Args:
        info: the stream (from :func:`~vidpipe.decode.probe.probe`).
        device: where tensors are delivered (decoding runs on the CPU, then one copy).
        stream_id: written into the :class:`~vidpipe.types.FrameMeta` of each frame.
    """

    def __init__(self, info: "StreamInfo", device: "torch.device", *, stream_id: int = 0) -> None:
        from vidpipe.decode.probe import is_url
        from vidpipe.decode.rgb import FrameToRGB

        if is_url(info.source) and info.source.partition("://")[0].lower() in _LIVE_SCHEMES:
            raise UnsupportedError(
                f"{info.source}: frames of a live stream cannot be read by number or time; "
                "iterate it instead (video.batches(n))"
            )
        self.info, self.device, self.stream_id = info, device, stream_id
        self._to_rgb = FrameToRGB(info)
        self._table: FrameTable | None = None
        self._container: Any = None
        self._stream: Any = None
        self._frames: Iterator[tuple[int, Any]] | None = None  # the decoder's position
        self._last = -1  # number of the last frame the decoder gave
        self._from_start = False  # whether the decoder's position began at the start of the stream
        self._number: dict[int, int] | None = None  # pts -> frame number
        self.frames_decoded = 0  # frames the codec produced for frame access (a cost counter)

    @property
    def table(self) -> FrameTable:
        if self._table is None:
            self._table = scan_frames(self.info.location)
        return self._table

    def __len__(self) -> int:
        return len(self.table)

    # ----------------------------------------------------------------------------- numbering

    def normalize(self, index: Any, *, name: str = "index", end: bool = False) -> int:
        """``index`` as a frame number in ``0 .. N-1`` (negative counts from the end); with
        ``end``, an exclusive end of a range (``N`` allowed)."""
        import operator

        try:
            if isinstance(index, bool):
                raise TypeError
            i = operator.index(index)
        except TypeError:
            raise TypeError(f"invalid {name}={index!r}; expected an integer frame number") from None
        n = len(self.table)
        if not -n <= i < n + int(end):
            span = f"0..{n - 1}, or -{n}..-1 from the end" if n else "none"
            what = f"video[{i}]" if name == "key" else f"frame {name}={i}"
            raise OutOfRangeError(f"{what} is out of range: {self.info.source} has {n} frames ({span})")
        return i + n if i < 0 else i

    # ------------------------------------------------------------------------------ decoding

    def _open(self) -> None:
        from vidpipe.decode.probe import discard_other_streams, open_input

        self.close()
        self._container, self._stream = open_input(self.info.location)
        discard_other_streams(self._container, self._stream)
        self._stream.codec_context.thread_type = "AUTO"
        self._stream.codec_context.thread_count = 0

    def _decoded(self) -> Iterator[Any]:
        """Frames from the current position, in presentation order; damaged packets are skipped
        (as the ffmpeg command does), a demux error ends the stream."""
        import av

        from vidpipe.decode.probe import read_packets

        stream = self._stream
        try:
            for packet in read_packets(self._container, stream):  # not demux(): see read_packets
                try:
                    frames = stream.decode(packet)
                except av.error.FFmpegError as exc:
                    logger.debug("%s: packet skipped (%s)", self.info.source, exc)
                    continue
                self.frames_decoded += len(frames)
                yield from frames
        except av.error.FFmpegError as exc:
            logger.debug("%s: reading stopped (%s)", self.info.source, exc)
        try:
            frames = stream.decode(None)
        except av.error.FFmpegError:
            return
        self.frames_decoded += len(frames)
        yield from frames

    def _numbered(self, *, after_seek: bool) -> Iterator[tuple[int, Any]]:
        """``(frame number, frame)`` from the current position. After a seek, frames before
        the first keyframe the decoder outputs are dropped (the demuxer may land on a packet
        that is not a keyframe, e.g. MPEG-TS; leading pictures lack their references)."""
        table = self.table
        if not table.exact:  # counted from the start (the decoder was opened afresh)
            yield from enumerate(self._decoded())
            return
        if self._number is None:
            self._number = {p: n for n, p in enumerate(table.pts)}
        number = self._number
        synced = not after_seek
        for frame in self._decoded():
            synced = synced or bool(frame.key_frame)
            n = number.get(frame.pts)
            if synced and n is not None:
                yield n, frame

    def _keyframe_of(self, target: int) -> int:
        """Position in ``table.keyframes`` of the last keyframe at or before frame ``target``
        (``-1``: none, or an inexact table)."""
        table = self.table
        return bisect.bisect_right(table.keyframes, target) - 1 if table.exact else -1

    def _start_at(self, k: int) -> None:
        """Position the decoder at keyframe ``k`` (``k < 0`` or the first frame: the start)."""
        import av

        table = self.table
        self._from_start = k < 0 or table.keyframes[k] == 0
        if not self._from_start:
            if self._container is None:
                self._open()
            try:
                self._container.seek(table.seek_ts[k], stream=self._stream, backward=True, any_frame=False)
                self._stream.codec_context.flush_buffers()
            except av.error.FFmpegError:
                self._from_start = True
        if self._from_start:
            self._open()  # open afresh: nothing to seek, and an inexact table counts from here
        self._frames = self._numbered(after_seek=not self._from_start)
        self._last = -1

    def _next_until(self, target: int) -> Any | None:
        """Decode on to frame ``target``; ``None`` when the decoder passes it or ends first."""
        for n, frame in self._frames or ():
            self._last = n
            if n == target:
                return frame
            if n > target:
                return None
        self._frames = None
        return None

    def _get(self, target: int) -> Any:
        """The PyAV frame number ``target``: decodes on from the current position when the
        frame is ahead in the same run of GOPs, else seeks to its keyframe first. When a seek
        lands after the frame (demuxers that seek by byte position or by decode time), earlier
        keyframes are tried, then the start of the stream."""
        table = self.table
        k = self._keyframe_of(target)
        key = table.keyframes[k] if k >= 0 else 0
        if self._frames is not None and self._last < target and key <= self._last + 1:
            frame = self._next_until(target)
            if frame is not None:
                return frame
        attempts: list[int] = []
        for a in (k, k - 1, k - 4, -1):
            if max(a, -1) not in attempts:
                attempts.append(max(a, -1))
        frame = None
        for attempt in attempts:
            self._start_at(attempt)
            frame = self._next_until(target)
            if frame is not None or self._from_start:
                break
            logger.debug("%s: frame %d not found after a seek to keyframe %d", self.info.source, target, attempt)
        if frame is None:
            self._frames = None
            raise DecodeError(
                f"{self.info.source}: frame {target} could not be decoded (damaged or truncated file?); "
                "check it with ffprobe or re-encode it with ffmpeg"
            )
        return frame

    def read(self, numbers: Sequence[int]) -> "FrameBatch":
        """Frames ``numbers`` (valid frame numbers, any order, repeats allowed) as one RGB
        :class:`~vidpipe.types.FrameBatch`: ``(B, 3, H, W)`` uint8 on :attr:`device`, in the
        order asked. Each distinct frame is decoded once."""
        import numpy as np
        import torch

        from vidpipe.types import FrameBatch, FrameMeta

        table = self.table
        rgb: dict[int, tuple[np.ndarray, float | None]] = {}
        for n in sorted(set(numbers)):
            frame = self._get(n)
            out = np.empty((3, frame.height, frame.width), dtype=np.uint8)
            self._to_rgb(frame, out)
            pts = table.seconds(table.pts[n]) if table.exact else (
                None if frame.pts is None else float((frame.pts - table.start_pts) * table.time_base)
            )
            rgb[n] = (out, pts)
        sizes = {a.shape for a, _ in rgb.values()}
        if len(sizes) > 1:
            raise UnsupportedError(
                f"{self.info.source}: the frames asked for have different sizes "
                f"({', '.join(f'{s[2]}x{s[1]}' for s in sorted(sizes))}); ask for each size separately"
            )
        h, w = next(iter(sizes))[1:] if sizes else (self.info.height, self.info.width)
        data = torch.empty((len(numbers), 3, h, w), dtype=torch.uint8)
        metas = []
        for row, n in enumerate(numbers):
            a, pts = rgb[n]
            data[row] = torch.from_numpy(a)
            metas.append(FrameMeta(self.info.source, self.stream_id, n, pts, h, w))
        if self.device.type != "cpu":
            data = data.to(self.device)
        return FrameBatch(data=data, frames=tuple(metas))

    def close(self) -> None:
        """Close the file (the frame table is kept). Safe to call twice."""
        self._frames = None
        if self._container is not None:
            self._container.close()
            self._container = None
            self._stream = None
