"""Read a stream once, in file order, and route each packet to the segments that need it.

:func:`route_packets` walks a :class:`~vidpipe.decode.segments.DecodePlan`: it demuxes packets in
decode order, tags each with the segments whose packet range covers it (a keyframe can belong to
two: the start of one segment and the reference for the previous one's leading pictures), drops
packets no segment needs, seeks over long stretches nobody needs (large strides, a late start),
and says when a segment has received all its packets. One reader serves every decoder session,
so a file is opened and demuxed once however many sessions decode it.

Packets are identified by timestamp (unique in an exact plan), so the position in the file is
known again right after a seek.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vidpipe.errors import DecodeError

if TYPE_CHECKING:
    from vidpipe.decode.demux import Demuxer
    from vidpipe.decode.segments import DecodePlan
    from vidpipe.types import Packet

__all__ = ["Routed", "route_packets", "SEEK_GAP"]

logger = logging.getLogger(__name__)

#: seek instead of reading on when the next needed packet is at least this many packets ahead
SEEK_GAP = 96
#: damaged packets the Annex-B filter may reject before reading gives up
MAX_REJECTED = 64


@dataclass(frozen=True, slots=True)
class Routed:
    """One step of the reader: a packet for some segments, or the end of a segment's packets.

    ``packet`` is ``None`` for an end marker; then ``segments`` holds the one segment that ended.
    ``error`` (end markers only) is why the segment ended early (read error), else ``None``.
    """

    segments: tuple[int, ...]
    packet: "Packet | None" = None
    error: Exception | None = None


def route_packets(demuxer: "Demuxer", plan: "DecodePlan", *, seek_gap: int = SEEK_GAP) -> Iterator[Routed]:
    """Yield :class:`Routed` steps for ``plan`` from ``demuxer`` (positioned anywhere).

    Every segment gets exactly one end marker, after its last packet, also when reading stops
    early (then with the read error). An inexact plan's single segment gets every packet.
    """
    segs = plan.segments
    if not segs:
        return
    if not plan.exact:
        yield from _route_all(demuxer, plan)
        return
    packet_of = {p: n for n, p in enumerate(plan.index.pts)}
    first = segs[0].first_packet
    nxt = 0  # next segment not yet ended
    error: Exception | None = None
    seeked_for = -1  # the segment the last seek aimed at (never seek twice for one)
    rejected = 0
    check_landing = False
    if first > seek_gap:
        _seek(demuxer, plan, 0)
        seeked_for, check_landing = 0, True
    packets = demuxer.packets()
    try:
        while nxt < len(segs):
            try:
                pkt = next(packets)
            except StopIteration:
                break
            except DecodeError:
                raise
            except Exception as exc:  # noqa: BLE001 - the bitstream filter rejected a damaged packet
                rejected += 1
                if rejected > MAX_REJECTED:
                    raise DecodeError(f"{plan.index.source}: too many damaged packets ({exc})") from exc
                log = logger.warning if rejected == 1 else logger.debug
                log("%s: dropped a packet the bitstream filter rejected (%s)", plan.index.source, exc)
                packets = demuxer.packets()  # the demuxer reads on after the damaged packet
                continue
            n = packet_of.get(pkt.pts) if pkt.pts is not None else None
            if n is None:
                continue  # not in the scan (e.g. appeared after a damaged stretch)
            if check_landing:
                check_landing = False
                if n > segs[nxt].first_packet:  # the seek went past the keyframe: read from the start
                    logger.debug(
                        "%s: seek overshot packet %d (at %d); reading from the start",
                        plan.index.source,
                        segs[nxt].first_packet,
                        n,
                    )
                    demuxer.seek(0.0)
                    packets = demuxer.packets()
                    seek_gap = len(plan.index.pts) + 1  # no more seeking
                    continue
            while nxt < len(segs) and segs[nxt].last_packet < n:
                yield Routed((nxt,))
                nxt += 1
            if nxt >= len(segs):
                break
            covering = tuple(
                s for s in range(nxt, min(nxt + 3, len(segs))) if segs[s].first_packet <= n <= segs[s].last_packet
            )
            if covering:
                yield Routed(covering, pkt)
                if n == segs[nxt].last_packet:
                    yield Routed((nxt,))
                    nxt += 1
            elif segs[nxt].first_packet - n > seek_gap and seeked_for != nxt:
                _seek(demuxer, plan, nxt)
                seeked_for, check_landing = nxt, True
                packets = demuxer.packets()
    except DecodeError as exc:  # the container could not be read on (truncated / damaged)
        error = exc
        logger.warning("%s", exc)
    if error is None and nxt < len(segs):
        missing = segs[nxt].first_packet
        error = DecodeError(
            f"{plan.index.source}: the stream ended before packet {missing} that the scan listed; "
            "the file may have changed or be damaged"
        )
    for s in range(nxt, len(segs)):
        yield Routed((s,), None, error)


def _seek(demuxer: "Demuxer", plan: "DecodePlan", segment: int) -> None:
    seg = plan.segments[segment]
    seconds = plan.index.seconds(seg.key_pts) or 0.0
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug("%s: seek to segment %d (packet %d, %.3fs)", plan.index.source, segment, seg.first_packet, seconds)
    demuxer.seek(seconds)


def _route_all(demuxer: "Demuxer", plan: "DecodePlan") -> Iterator[Routed]:
    error: Exception | None = None
    try:
        for pkt in demuxer.packets():
            yield Routed((0,), pkt)
    except DecodeError as exc:
        error = exc
        logger.warning("%s", exc)
    yield Routed((0,), None, error)
