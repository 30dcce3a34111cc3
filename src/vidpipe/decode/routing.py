"""Read one segment's packets with PyAV: a worker's own demuxer, seeks, and the routing rules.

Each worker of a segment-parallel run reads the packets of the segments it decodes itself
(:class:`DemuxReader`), so demuxing scales with the workers instead of one reader thread feeding
them all (a single reader, contending for the GIL with a dozen decoder threads, could not keep
NVDEC busy). Files whose packets lie verbatim in the file are read without a demuxer
(:mod:`vidpipe.decode.fileread`); this module serves every other container (MPEG-TS, AVI, FLV,
...) and streams without an index.

The rules, for an exact plan (see :mod:`vidpipe.decode.segments`):

- packets are identified by timestamp (unique in an exact plan), so the position in the file is
  known again right after a seek; packets not in the scan (after damage) are ignored;
- a segment gets the packets numbered ``first_packet .. last_packet`` in decode order. A keyframe
  may belong to two segments (the start of one and, for open GOPs, the reference of the previous
  one's leading pictures): each segment reads it;
- the reader reads on when the segment starts at most :data:`SEEK_GAP` packets ahead, else it
  seeks to the segment's keyframe. A seek that lands *after* the keyframe (inexact container
  index) is retried from earlier times, and at worst from the start of the file; after such an
  overshoot the reader stops seeking forward (it reads on, and goes back to the start only
  when a segment lies behind it);
- packets the Annex-B filter rejects (damage) are dropped, up to :data:`MAX_REJECTED`;
- every segment ends with an end marker, carrying the read error if reading stopped early.

An inexact plan has one segment: every packet of the stream, in order, from the start.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from vidpipe.errors import DecodeError

if TYPE_CHECKING:
    from vidpipe.decode.segments import DecodePlan, Segment
    from vidpipe.types import Packet

__all__ = ["PacketReader", "Routed", "DemuxReader", "SEEK_GAP", "MAX_REJECTED"]

logger = logging.getLogger(__name__)

#: seek instead of reading on when the segment starts at least this many packets ahead
SEEK_GAP = 96
#: damaged packets the Annex-B filter may reject before reading gives up
MAX_REJECTED = 64
#: when a seek overshoots the keyframe, seek again this many seconds earlier (then the start)
_BACKOFF_S = (2.0, 10.0, 60.0)


@dataclass(frozen=True, slots=True)
class Routed:
    """One step of a segment's packets: a packet, or the end of the segment.

    ``packet`` is ``None`` for the end marker; ``error`` (end markers only) is why the segment
    ended early (read error), else ``None``. ``segments`` holds the segment's number.
    """

    segments: tuple[int, ...]
    packet: "Packet | None" = None
    error: Exception | None = None


class PacketReader(Protocol):
    """What a worker reads its segments' packets with: :class:`DemuxReader` (PyAV), or
    :class:`~vidpipe.decode.fileread.FileReader` (byte ranges straight from the file)."""

    def steps(self, seg: "Segment") -> Iterator[Routed]:
        """The packets of ``seg`` in decode order, then its end marker (``packet=None``)."""
        ...

    def close(self) -> None:
        """Release the file (idempotent)."""
        ...


class DemuxReader:
    """The packets of the segments one worker decodes, from its own :class:`Demuxer`.

    Args:
        plan: the decode plan.
        source: the file or URL.
        annexb: H.264/HEVC as Annex-B (``h264_mp4toannexb``/``hevc_mp4toannexb``).
        stream_id: written into every packet.
        packet_of: ``pts -> packet number`` of the plan's scan (shared by the workers).
        seek_gap: see :data:`SEEK_GAP`.
        start_prefix: H.264 Annex-B parameter sets (SPS/PPS) put before a segment's first packet
            when it carries none: a keyframe that is not an IDR picture (open GOP) gets none from
            the filter, and a fresh decoder could not start there.

    Segments must be asked for in increasing order for reading on to pay off; any order works.
    One thread at a time.
    """

    def __init__(
        self,
        plan: "DecodePlan",
        *,
        source: str,
        annexb: bool,
        stream_id: int = 0,
        packet_of: dict[int, int] | None = None,
        seek_gap: int = SEEK_GAP,
        start_prefix: bytes = b"",
    ) -> None:
        from vidpipe.sources.redact import redact_url

        self.plan = plan
        self.location = source  # opens the input; ``source`` (credentials masked) is shown
        self.source = redact_url(source)
        self.annexb = annexb
        self.stream_id = stream_id
        self.packet_of = packet_of if packet_of is not None else packet_numbers(plan)
        self.seek_gap = seek_gap
        self.start_prefix = start_prefix
        self.seeks = 0
        self.rejected = 0
        self._dmx: Any = None
        self._it: Iterator[Any] | None = None
        self._last: int | None = None  # number of the last packet read (None: unknown, after a seek)
        self._pending: tuple[int, Any] | None = None  # read past the previous segment's end
        self._seek_forward = True  # False once a seek overshot: read on instead

    # ------------------------------------------------------------------------------ lifetime

    def _open(self) -> None:
        from vidpipe.decode.demux import Demuxer

        self._dmx = Demuxer(self.location, annexb=self.annexb, stream_id=self.stream_id)
        self._it = self._dmx.packets()
        self._last = -1
        self._pending = None

    def close(self) -> None:
        if self._dmx is not None:
            self._dmx.close()
            self._dmx = None
            self._it = None

    # ------------------------------------------------------------------------------- reading

    def _next(self) -> Any | None:
        """The next packet of the stream (``None`` at its end); drops rejected packets."""
        while True:
            try:
                return next(self._it)  # type: ignore[arg-type]
            except StopIteration:
                return None
            except DecodeError:
                raise
            except Exception as exc:  # noqa: BLE001 - the bitstream filter rejected a damaged packet
                self.rejected += 1
                if self.rejected > MAX_REJECTED:
                    raise DecodeError(f"{self.source}: too many damaged packets ({exc})") from exc
                log = logger.warning if self.rejected == 1 else logger.debug
                log("%s: dropped a packet the bitstream filter rejected (%s)", self.source, exc)
                self._it = self._dmx.packets()  # the demuxer reads on after the damaged packet

    def _seek(self, seconds: float) -> None:
        self._dmx.seek(max(0.0, seconds))
        self._it = self._dmx.packets()
        self._last = None
        self._pending = None
        self.seeks += 1

    def steps(self, seg: "Segment") -> Iterator[Routed]:
        """The packets of ``seg`` (decode order), then its end marker."""
        if self._dmx is None:
            try:
                self._open()
            except Exception as exc:  # noqa: BLE001 - the segment ends with the reason
                yield Routed((seg.number,), None, exc)
                return
        if not self.plan.exact:
            yield from self._all(seg)
            return
        error: Exception | None = None
        try:
            yield from self._exact(seg)
        except DecodeError as exc:  # the container could not be read on (truncated / damaged)
            logger.warning("%s", exc)
            error = exc
            self._last = None  # position unknown: the next segment seeks
            self._pending = None
        yield Routed((seg.number,), None, error)

    def _exact(self, seg: "Segment") -> Iterator[Routed]:
        first, last = seg.first_packet, seg.last_packet
        key_s = self.plan.index.seconds(seg.key_pts) or 0.0
        here = self._pending[0] if self._pending is not None else (None if self._last is None else self._last + 1)
        targets: list[float] = []  # where to seek (seconds), next one after an overshoot
        landed = True
        if here is None or here > first or (first - here > self.seek_gap and self._seek_forward):
            if here is not None and here > first and not self._seek_forward:
                targets = [0.0]  # behind us, and seeking is unreliable here: from the start
            else:
                targets = [key_s] + [key_s - b for b in _BACKOFF_S if key_s - b > 0.0] + [0.0]
            self._seek(targets.pop(0))
            landed = False
        mine = (seg.number,)
        while True:
            if self._pending is not None:
                n, pkt = self._pending
                self._pending = None
            else:
                pkt = self._next()
                if pkt is None:
                    raise DecodeError(
                        f"{self.source}: the stream ended before packet {max(first, (self._last or -1) + 1)} "
                        "that the scan listed; the file may have changed or be damaged"
                    )
                n = self.packet_of.get(pkt.pts) if pkt.pts is not None else None
                if n is None:
                    continue  # not in the scan (e.g. appeared after a damaged stretch)
                self._last = n
            if not landed:
                landed = True
                if n > first:  # the seek went past the keyframe: try from earlier
                    self._seek_forward = False
                    if not targets:
                        raise DecodeError(f"{self.source}: cannot reach packet {first} (reading starts at {n})")
                    logger.debug("%s: seek overshot packet %d (landed at %d); seeking earlier", self.source, first, n)
                    self._seek(targets.pop(0))
                    landed = False
                    continue
            if n < first:
                continue
            if n > last:
                self._pending = (n, pkt)  # the next segment may start here
                return
            if n == first and self.start_prefix and not _has_sps(pkt.data):
                pkt = dataclasses.replace(pkt, data=self.start_prefix + pkt.data)
            yield Routed(mine, pkt)
            if n == last:
                return

    def _all(self, seg: "Segment") -> Iterator[Routed]:
        """Inexact plans: every packet from the start of the stream."""
        if self._last != -1:
            self._seek(0.0)
        self._last = None
        error: Exception | None = None
        mine = (seg.number,)
        try:
            while (pkt := self._next()) is not None:
                yield Routed(mine, pkt)
        except DecodeError as exc:
            error = exc
            logger.warning("%s", exc)
        yield Routed(mine, None, error)


def _has_sps(data: bytes) -> bool:
    """Whether an H.264 Annex-B access unit holds a sequence parameter set."""
    i = data.find(b"\x00\x00\x01")
    while 0 <= i < len(data) - 3:
        if data[i + 3] & 0x1F == 7:
            return True
        i = data.find(b"\x00\x00\x01", i + 3)
    return False


def packet_numbers(plan: "DecodePlan") -> dict[int, int]:
    """``pts -> packet number`` (decode order) of an exact plan's scan."""
    return {p: n for n, p in enumerate(plan.index.pts) if p is not None}
