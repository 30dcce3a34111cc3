"""Read a segment's packets straight from the file, by the byte ranges the scan recorded.

For MP4/MOV and Matroska/WebM files the demux scan (:func:`~vidpipe.decode.segments.scan_stream`)
records where every packet's bytes lie and checks a sample of them against what the demuxer
returns (``StreamIndex.byte_ranges``). A worker of a segment-parallel run then reads its segment
with a few ``os.pread`` calls (runs of packets up to :data:`CHUNK_BYTES` at once) and, for H.264
and HEVC, converts each packet to Annex-B in Python (:class:`~vidpipe.decode.annexb.AnnexB`,
byte-identical to FFmpeg's filters). No demuxer, no seeking, no bitstream-filter calls: a packet
costs a few microseconds of one thread's time, and the GIL is released once per chunk instead of
several times per packet, which is what let a dozen NVDEC sessions run dry behind one demuxing
thread.

Same contract as :class:`~vidpipe.decode.routing.DemuxReader`: :meth:`FileReader.steps` yields a
segment's packets ``first_packet .. last_packet`` in decode order, then an end marker (with the
error if the file could not be read, e.g. it shrank since the scan). A packet the converter
rejects as damaged is dropped, as the bitstream filter's rejections are.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from vidpipe.decode.routing import MAX_REJECTED, Routed
from vidpipe.errors import DecodeError

if TYPE_CHECKING:
    from vidpipe.decode.annexb import AnnexB
    from vidpipe.decode.segments import DecodePlan, Segment

__all__ = ["FileReader", "CHUNK_BYTES", "block_header_size"]

logger = logging.getLogger(__name__)

#: most bytes read at once (a run of consecutive packets)
CHUNK_BYTES = 8 << 20
#: room for a Matroska block header after a packet's range (track number up to 8 bytes + 3)
_HEADER_ROOM = 11


def block_header_size(head: bytes | memoryview) -> int | None:
    """Bytes of the Matroska (Simple)Block header at the start of ``head`` (track number as an
    EBML variable-length integer, 16-bit timecode, flags), or ``None`` when the block is laced
    (several frames in one block) or the header is invalid: then its bytes are not one packet."""
    if len(head) < 4 or not head[0]:
        return None
    width = 8 - head[0].bit_length() + 1  # leading zero bits + 1
    if len(head) < width + 3 or head[width + 2] & 0x06:
        return None
    return width + 3


class NotVerbatim(Exception):
    """Internal: a segment's bytes are not its packets (a laced block): read it with PyAV."""


class FileReader:
    """The packets of the segments one worker decodes, read with ``os.pread``.

    Args:
        plan: an exact plan whose index has byte ranges.
        converter: Annex-B conversion (``None``: packets as stored).
        stream_id: written into every packet.
        keyframes: packet numbers of the keyframes (shared by the workers).
        fallback: makes the :class:`~vidpipe.decode.routing.DemuxReader` used from the first
            segment whose bytes turn out not to be verbatim packets (a laced Matroska block).

    One thread at a time; segments in any order. A segment is read whole before its first
    packet is handed out (its bytes are checked first).
    """

    def __init__(
        self,
        plan: "DecodePlan",
        *,
        converter: "AnnexB | None" = None,
        stream_id: int = 0,
        keyframes: frozenset[int] | None = None,
        fallback: "Callable[[], Any] | None" = None,
    ) -> None:
        index = plan.index
        if not plan.exact or not index.byte_ranges:
            raise ValueError("FileReader needs an exact plan with byte ranges")
        self.plan = plan
        self.converter = converter
        self.stream_id = stream_id
        self.keyframes = keyframes if keyframes is not None else frozenset(index.keyframes)
        self.rejected = 0
        self.reads = 0
        self._fallback_factory = fallback
        self._fallback: Any = None
        self._fd = os.open(index.source, os.O_RDONLY)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._fallback is not None:
            self._fallback.close()

    def steps(self, seg: "Segment") -> Iterator[Routed]:
        """The packets of ``seg`` (decode order), then its end marker."""
        if self._fallback is not None:
            yield from self._fallback.steps(seg)
            return
        try:
            pieces, error = self._read(seg)
        except NotVerbatim as exc:
            if self._fallback_factory is None:
                raise DecodeError(f"{self.plan.index.source}: {exc}") from exc
            logger.info("%s: %s; reading with PyAV from now on", self.plan.index.source, exc)
            self._fallback = self._fallback_factory()
            yield from self._fallback.steps(seg)
            return
        yield from self._packets(seg, pieces)
        if error is not None:
            logger.warning("%s", error)
        yield Routed((seg.number,), None, error)

    def _read(self, seg: "Segment") -> "tuple[list[memoryview], Exception | None]":
        """Each packet's stored bytes (first..last, or up to where the file ends early)."""
        index = self.plan.index
        pos, size = index.pos, index.size
        blocks = index.block_headers
        room = _HEADER_ROOM if blocks else 0
        buf = memoryview(b"")
        b0 = b1 = 0  # file range held in buf
        out: list[memoryview] = []
        for n in range(seg.first_packet, seg.last_packet + 1):
            p, sz = pos[n], size[n]
            if p < b0 or p + sz + room > b1:
                b0, b1 = self._span(n, seg.last_packet, room)
                buf = memoryview(os.pread(self._fd, b1 - b0, b0))
                self.reads += 1
                b1 = b0 + len(buf)
            at = p - b0
            if blocks:
                skip = block_header_size(buf[at : at + 16])
                if skip is None:
                    raise NotVerbatim(f"packet {n} is not stored as one Matroska block")
                at += skip
            if at + sz > len(buf):
                return out, DecodeError(
                    f"{index.source}: the file ends before packet {n} that the scan listed; "
                    "the file may have changed or be damaged"
                )
            out.append(buf[at : at + sz])
        return out, None

    def _packets(self, seg: "Segment", pieces: "list[memoryview]") -> Iterator[Routed]:
        from vidpipe.types import Packet

        index = self.plan.index
        pts = index.pts
        dts = index.dts or (None,) * len(pts)
        tb, sid, keys, conv = index.time_base, self.stream_id, self.keyframes, self.converter
        mine = (seg.number,)
        if conv is not None:
            conv.reset()  # a segment starts a stream (as the filter's flush after a seek)
        n = seg.first_packet
        for raw in pieces:
            if conv is None:
                data = bytes(raw)
            else:
                try:
                    data = conv.convert(raw, start=n == seg.first_packet)
                except DecodeError as exc:
                    self.rejected += 1
                    if self.rejected > MAX_REJECTED:
                        raise DecodeError(f"{index.source}: too many damaged packets ({exc})") from exc
                    log = logger.warning if self.rejected == 1 else logger.debug
                    log("%s: dropped damaged packet %d (%s)", index.source, n, exc)
                    n += 1
                    continue
            yield Routed(mine, Packet(data, pts[n], dts[n], tb, n in keys, sid))
            n += 1

    def _span(self, n: int, last: int, room: int) -> tuple[int, int]:
        """The file range of packets ``n, n+1, ...`` (up to ``last``) that fits one read."""
        pos, size = self.plan.index.pos, self.plan.index.size
        start = pos[n]
        end = start + size[n] + room
        m = n + 1
        while m <= last:
            p, e = pos[m], pos[m] + size[m] + room
            if p < start or e - start > CHUNK_BYTES:
                break
            end = max(end, e)
            m += 1
        return start, end
