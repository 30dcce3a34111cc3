"""Segment planning: which packets to decode, split at keyframes, and where each frame goes.

A demux scan (:func:`scan_stream`, nothing decoded) lists every packet of the video stream in
decode order with its timestamp and keyframe flag. From it, :func:`plan_decode` derives

- the **frame index** of every frame: its rank in presentation order (the sorted packet
  timestamps) counted from the first frame of the selected range (at or after ``start``), so a
  segment decoded anywhere knows the number of each frame it outputs, and the numbers equal the
  PyAV backend's for the same file (see :mod:`vidpipe.decode.timing`); timestamps never skip
  numbers, whatever the frame rate;
- which frames :class:`~vidpipe.decode.base.DecodeOptions` keep (stride, time range, count), and
  their **output positions** 0, 1, 2, ... (the order in which they are delivered);
- the **segments**: runs of GOPs (keyframe to keyframe, in presentation time) that contain at
  least one kept frame, cut into pieces of about ``target_frames`` decoded frames. GOPs without a
  kept frame are never decoded (large strides skip whole GOPs); a time range plans only the
  keyframes it needs.

A segment starts at a keyframe packet and is decoded by one session on its own; frames whose
timestamps fall in ``[lo_pts, hi_pts)`` belong to it. Its last packet is the one before the next
segment's keyframe, or, for open GOPs whose next keyframe is followed in decode order by frames
shown *before* it (leading pictures), the last of those (the next keyframe is then fed too, as
a reference).

When timestamps are missing or repeated the plan is ``exact=False``: one segment over the whole
stream, frames numbered in output order (see :class:`DecodePlan`).
"""

from __future__ import annotations

import bisect
import logging
import os
from dataclasses import dataclass, field
from fractions import Fraction

from vidpipe.decode.base import DecodeOptions
from vidpipe.errors import DecodeError

__all__ = ["StreamIndex", "Segment", "DecodePlan", "scan_stream", "plan_decode"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class StreamIndex:
    """The packets of one video stream in decode order, from a demux scan.

    Attributes:
        source: the input.
        time_base: unit of ``pts``.
        start_pts: the stream's first timestamp; times in seconds count from it.
        pts: presentation timestamp of every packet, decode order (``None`` when unknown).
        keyframes: packet numbers (decode order) of the keyframes.
        error: the :class:`~vidpipe.errors.DecodeError` that stopped the scan (truncated or
            damaged file; the packets before it are listed), else ``None``.
        dts: decode timestamp of every packet (empty when not recorded).
        pos, size: byte offset and length of every packet's data in the file, when the scan
            verified that the file holds each packet's bytes there, contiguous and unchanged
            (MP4/MOV, Matroska/WebM without lacing or header stripping); then workers read packets
            straight from the file (:mod:`vidpipe.decode.fileread`). Empty otherwise.
        block_headers: Matroska/WebM: ``pos`` is where a packet's block starts, and its bytes
            follow the block header (track number, timecode, flags; see
            :func:`~vidpipe.decode.fileread.block_header_size`).
        codec, extradata: the stream's codec name and header (avcC/hvcC/...), for readers that
            convert packets themselves.
        discarded: packet numbers the demuxer flags as discarded (MP4 edit lists: the part of
            a GOP before the edit's start, kept as references). Their frames are decoded but
            never shown, as FFmpeg drops them; they are not frames of the stream.
    """

    source: str
    time_base: Fraction
    start_pts: int
    pts: tuple[int | None, ...]
    keyframes: tuple[int, ...]
    error: Exception | None = field(default=None, compare=False)
    dts: tuple[int | None, ...] = field(default=(), repr=False)
    pos: tuple[int, ...] = field(default=(), repr=False)
    size: tuple[int, ...] = field(default=(), repr=False)
    block_headers: bool = False
    codec: str = ""
    extradata: bytes = field(default=b"", repr=False, compare=False)
    discarded: frozenset[int] = field(default=frozenset(), repr=False)

    @property
    def packets(self) -> int:
        return len(self.pts)

    @property
    def byte_ranges(self) -> bool:
        """Whether packets can be read straight from the file (``pos``/``size`` verified)."""
        return bool(self.pos) and len(self.pos) == len(self.pts)

    def seconds(self, pts: int | None) -> float | None:
        """``pts`` in seconds from the start of the stream."""
        return None if pts is None else float((pts - self.start_pts) * self.time_base)


def scan_stream(source: str | os.PathLike) -> StreamIndex:
    """Demux ``source`` once (no decoding) and list its video packets: see :class:`StreamIndex`.

    A read error part-way (truncated or damaged container) is kept in ``error``; the packets
    before it are returned. Errors opening the source propagate (:class:`~vidpipe.errors.SourceError`).
    For a local MP4/MOV or Matroska/WebM file the packets' byte ranges are recorded, and the bytes
    of the first packets and of every keyframe are checked against the demuxer's.
    """
    from vidpipe.decode.demux import Demuxer
    from vidpipe.decode.probe import is_url

    text = os.fspath(source)
    pts: list[int | None] = []
    dts: list[int | None] = []
    keys: list[int] = []
    discarded: list[int] = []
    pos: list[int] = []
    size: list[int] = []
    error: Exception | None = None
    with Demuxer(text) as dmx:
        fmt = dmx.container
        blocks = "matroska" in fmt
        ranges = not is_url(text) and os.path.isfile(text) and (blocks or fmt.startswith("mov"))
        fd = os.open(text, os.O_RDONLY) if ranges else -1
        try:
            try:
                for number, pkt in enumerate(dmx.raw_packets()):
                    pts.append(pkt.pts)
                    dts.append(pkt.dts)
                    key = pkt.is_keyframe
                    if key:
                        keys.append(number)
                    if pkt.is_discard:
                        discarded.append(number)
                    if ranges:
                        p = pkt.pos
                        if p is None or p < 0:
                            ranges = False
                            continue
                        pos.append(p)
                        size.append(pkt.size)
                        if (key or number < 4) and not _same_bytes(fd, p, pkt, blocks):
                            ranges = False
            except DecodeError as exc:
                error = exc
                logger.warning("%s: scan stopped after %d packets (%s)", text, len(pts), exc)
            ranges = ranges and _check_ranges(pos, size, os.fstat(fd).st_size)
        finally:
            if fd >= 0:
                os.close(fd)
        index = StreamIndex(
            text, dmx.time_base, dmx.start_pts, tuple(pts), tuple(keys), error, tuple(dts),
            tuple(pos) if ranges else (), tuple(size) if ranges else (), blocks and ranges,
            dmx.codec, dmx.extradata or b"", frozenset(discarded),
        )  # fmt: skip
    logger.debug("%s: scanned %d packets, %d keyframes (byte ranges: %s)", text, index.packets, len(keys), ranges)
    return index


def _same_bytes(fd: int, pos: int, pkt: object, blocks: bool) -> bool:
    """Whether the file holds ``pkt``'s bytes at ``pos`` (after a Matroska block header)."""
    from vidpipe.decode.fileread import block_header_size

    n = pkt.size  # type: ignore[attr-defined]
    skip = 0
    if blocks:
        skip = block_header_size(os.pread(fd, 16, pos))
        if skip is None:
            return False
    return os.pread(fd, n, pos + skip) == bytes(pkt)  # type: ignore[call-overload]


def _check_ranges(pos: list[int], size: list[int], file_size: int) -> bool:
    """Packets occupy disjoint byte ranges inside the file (laced or rewritten packets share or
    lose their offsets)."""
    if not pos:
        return False
    order = sorted(range(len(pos)), key=pos.__getitem__)
    end = 0
    for n in order:
        if pos[n] < end or size[n] <= 0:
            return False
        end = pos[n] + size[n]
    return end <= file_size


@dataclass(frozen=True, slots=True)
class Segment:
    """A keyframe-aligned piece of the stream that one decoder session decodes on its own.

    Attributes:
        number: 0-based, in stream order.
        first_packet: packet number (decode order) of the keyframe where decoding starts.
        last_packet: last packet number to feed (inclusive).
        key_pts: timestamp of the keyframe at ``first_packet`` (``None`` if unknown).
        lo_pts, hi_pts: frames with ``lo_pts <= pts < hi_pts`` belong to this segment (``None``:
            unbounded on that side).
        positions: ``(first, end)`` output positions of the frames it delivers.
    """

    number: int
    first_packet: int
    last_packet: int
    key_pts: int | None
    lo_pts: int | None
    hi_pts: int | None
    positions: tuple[int, int]

    @property
    def packets(self) -> int:
        return self.last_packet - self.first_packet + 1

    @property
    def count(self) -> int:
        """Frames this segment delivers."""
        return self.positions[1] - self.positions[0]

    def owns(self, pts: int) -> bool:
        return (self.lo_pts is None or pts >= self.lo_pts) and (self.hi_pts is None or pts < self.hi_pts)


@dataclass(frozen=True)
class DecodePlan:
    """What to decode and where every kept frame goes.

    Attributes:
        index: the scan the plan was made from.
        exact: ``True`` when every packet has a distinct timestamp, so frame numbers and output
            positions are known before decoding. ``False``: one segment over the whole stream,
            frames numbered in output order and selected as they come (``wanted``/``position_of``
            are empty).
        segments: in stream order; their ``positions`` tile ``[0, len(wanted))``.
        wanted: frame number of each output position.
        position_of: ``pts -> output position`` of every kept frame.
        index_of: ``pts -> frame number`` of every frame (its rank in presentation order from
            the first frame at or after ``start``; frames before it have negative numbers).
        frame_pts: timestamps of all frames in presentation order.
        decoded_packets: packets the segments feed to decoders in total.
    """

    index: StreamIndex
    exact: bool
    segments: tuple[Segment, ...]
    wanted: tuple[int, ...] = ()
    position_of: dict[int, int] = field(default_factory=dict, repr=False)
    index_of: dict[int, int] = field(default_factory=dict, repr=False)
    frame_pts: tuple[int, ...] = field(default=(), repr=False)
    decoded_packets: int = 0

    @property
    def total(self) -> int | None:
        """Frames the plan delivers (``None`` when not known in advance)."""
        return len(self.wanted) if self.exact else None

    def __repr__(self) -> str:
        return (
            f"DecodePlan(source={self.index.source!r}, exact={self.exact}, packets={self.index.packets}, "
            f"segments={len(self.segments)}, frames={self.total}, decoded_packets={self.decoded_packets})"
        )


def _inexact(index: StreamIndex) -> DecodePlan:
    last = index.packets - 1
    if last < 0:
        return DecodePlan(index, False, ())
    first = index.keyframes[0] if index.keyframes else 0
    seg = Segment(0, first, last, index.pts[first], None, None, (0, 0))
    return DecodePlan(index, False, (seg,), decoded_packets=last - first + 1)


def _numbers(index: StreamIndex, frame_pts: list[int], start: float | None) -> list[int]:
    """Frame numbers in presentation order: 0, 1, 2, ... from the first frame at or after
    ``start`` (seconds); the frames before it are numbered -1, -2, ... backwards."""
    first = 0
    if start is not None:
        while first < len(frame_pts) and (index.seconds(frame_pts[first]) or 0.0) < start:
            first += 1
    return [k - first for k in range(len(frame_pts))]


def _selection(index: StreamIndex, frame_pts: list[int], numbers: list[int], options: DecodeOptions) -> list[int]:
    """Positions (into ``frame_pts``) of the frames the options keep."""
    wanted: list[int] = []
    limit = options.max_frames
    for k, p in enumerate(frame_pts):
        keep = options.wants(numbers[k], index.seconds(p))
        if keep is None:
            break
        if keep:
            wanted.append(k)
            if limit is not None and len(wanted) >= limit:
                break
    return wanted


def plan_decode(
    index: StreamIndex,
    options: DecodeOptions | None = None,
    *,
    target_frames: int | None = None,
) -> DecodePlan:
    """Plan the segments that deliver the frames ``options`` keep.

    Args:
        index: from :func:`scan_stream`.
        options: stride, time range and frame count (``None``: every frame).
        target_frames: cut runs of needed GOPs into segments of at least this many frames (a
            segment always holds whole GOPs). ``None``: one segment per run (single session).

    Returns:
        A :class:`DecodePlan`; inexact (one segment, numbering at decode time) when timestamps
        are missing, repeated, or keyframe timestamps go backwards.
    """
    options = options if options is not None else DecodeOptions()
    pts = index.pts
    if not pts:
        return DecodePlan(index, True, ())
    if any(p is None for p in pts) or not index.keyframes:
        return _inexact(index)
    gone = index.discarded
    frame_pts = sorted(p for n, p in enumerate(pts) if n not in gone)  # type: ignore[type-var]
    if any(a == b for a, b in zip(frame_pts, frame_pts[1:])):
        return _inexact(index)
    key_pts = [pts[k] for k in index.keyframes]
    if any(b <= a for a, b in zip(key_pts, key_pts[1:])):
        return _inexact(index)
    numbers = _numbers(index, frame_pts, options.start)
    index_of = {p: numbers[k] for k, p in enumerate(frame_pts)}
    ranks = _selection(index, frame_pts, numbers, options)  # ranks in frame_pts of kept frames
    wanted = [numbers[k] for k in ranks]
    position_of = {frame_pts[k]: n for n, k in enumerate(ranks)}

    # GOP g = frames with key_pts[g] <= pts < key_pts[g+1]; frames before the first keyframe
    # (leading pictures at the very start) count to GOP 0.
    def gop_of(p: int) -> int:
        return max(0, bisect.bisect_right(key_pts, p) - 1)

    gop_frames = [0] * len(key_pts)
    for p in frame_pts:
        gop_frames[gop_of(p)] += 1
    needed = sorted({gop_of(frame_pts[k]) for k in ranks})

    # last packet (decode order) to feed for a segment ending before keyframe g: the largest
    # packet number among packets shown before key_pts[g].
    by_pts = sorted(range(len(pts)), key=lambda n: pts[n])  # type: ignore[arg-type,return-value]
    all_pts = [pts[n] for n in by_pts]  # discarded packets too: they are fed as references
    prefix_max: list[int] = []
    best = -1
    for n in by_pts:
        best = max(best, n)
        prefix_max.append(best)

    def last_before(g: int) -> int:
        if g >= len(key_pts):
            return len(pts) - 1
        k = bisect.bisect_left(all_pts, key_pts[g])  # packets with pts < key_pts[g]
        return prefix_max[k - 1] if k > 0 else index.keyframes[g] - 1

    runs: list[list[int]] = []
    for g in needed:
        if runs and runs[-1][-1] == g - 1:
            runs[-1].append(g)
        else:
            runs.append([g])
    groups: list[list[int]] = []
    for run in runs:
        if target_frames is None:
            groups.append(run)
            continue
        cur: list[int] = []
        size = 0
        for g in run:
            cur.append(g)
            size += gop_frames[g]
            if size >= target_frames:
                groups.append(cur)
                cur, size = [], 0
        if cur:
            if groups and size < target_frames // 2 and groups[-1][-1] == cur[0] - 1:
                groups[-1].extend(cur)  # fold a short tail into the previous piece of the run
            else:
                groups.append(cur)

    segments: list[Segment] = []
    decoded = 0
    for number, gops in enumerate(groups):
        a, b = gops[0], gops[-1]
        lo = None if a == 0 else key_pts[a]
        hi = key_pts[b + 1] if b + 1 < len(key_pts) else None
        first = index.keyframes[a]
        last = last_before(b + 1)
        p0 = bisect.bisect_left(ranks, bisect.bisect_left(frame_pts, lo) if lo is not None else 0)
        p1 = bisect.bisect_left(ranks, bisect.bisect_left(frame_pts, hi)) if hi is not None else len(ranks)
        segments.append(Segment(number, first, max(first, last), key_pts[a], lo, hi, (p0, p1)))
        decoded += max(first, last) - first + 1
    plan = DecodePlan(
        index=index,
        exact=True,
        segments=tuple(segments),
        wanted=tuple(wanted),
        position_of=position_of,
        index_of=index_of,
        frame_pts=tuple(frame_pts),
        decoded_packets=decoded,
    )
    logger.debug("%r", plan)
    return plan
