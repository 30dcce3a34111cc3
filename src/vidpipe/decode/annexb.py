"""MP4/Matroska H.264 and HEVC packets to Annex-B, in Python, the way FFmpeg's filters do it.

NVDEC parses Annex-B byte streams (start codes, parameter sets in-band). Containers store
H.264/HEVC as length-prefixed NAL units with the parameter sets in the codec header (avcC/hvcC).
:class:`AnnexB` converts one packet at a time with the same rules, and the same output bytes, as
FFmpeg's ``h264_mp4toannexb`` and ``hevc_mp4toannexb`` bitstream filters:

- H.264: every NAL unit gets a start code (4 bytes for the first of a packet and for parameter
  sets, 3 otherwise); the header's SPS/PPS are inserted before the first IDR slice of an IDR
  picture (or before a buffering-period SEI) unless the stream carries them in-band;
- HEVC: 4-byte start codes; the header's VPS/SPS/PPS/SEI are inserted before the first IRAP NAL
  unit of a packet.

Why not PyAV's ``BitStreamFilterContext``: each packet through it releases and re-takes the GIL
several times, which starves the decoding threads of a segment-parallel run of their packets
(see :mod:`vidpipe.decode.workers`). This runs in the worker's thread, a few microseconds per
packet, without leaving the GIL.

Streams whose header is already Annex-B (or missing) pass through unchanged, as with FFmpeg.
:meth:`AnnexB.reset` is the filter's flush: call it at every segment start (after a seek).
"""

from __future__ import annotations

from vidpipe.errors import DecodeError, UnsupportedError

__all__ = ["AnnexB"]

_SC4 = b"\x00\x00\x00\x01"
_SC3 = b"\x00\x00\x01"
# H.264 NAL unit types
_SLICE, _IDR, _SEI, _SPS, _PPS = 1, 5, 6, 7, 8
# HEVC: IRAP pictures (BLA_W_LP .. RSV_IRAP_VCL23); parameter sets and SEI allowed in hvcC
_IRAP = range(16, 24)
_HVCC_TYPES = {32, 33, 34, 39, 40}


def _looks_annexb(extradata: bytes) -> bool:
    return extradata[:3] == b"\x00\x00\x01" or extradata[:4] == _SC4


class AnnexB:
    """Per-stream converter (one per reading thread; it keeps the filter's state between packets).

    Args:
        codec: ``"h264"`` or ``"hevc"``.
        extradata: the container's codec header (avcC / hvcC); ``None``/empty or Annex-B already:
            packets pass through.

    Raises:
        UnsupportedError: a header FFmpeg's filter would reject too.
    """

    def __init__(self, codec: str, extradata: bytes | None) -> None:
        if codec not in ("h264", "hevc"):
            raise UnsupportedError(f"no Annex-B conversion for {codec}")
        self.codec = codec
        ext = bytes(extradata or b"")
        self.passthrough = not ext or _looks_annexb(ext)
        self.length_size = 4
        self.sps = self.pps = self.header = b""
        if not self.passthrough:
            if codec == "h264":
                self._parse_avcc(ext)
            else:
                self._parse_hvcc(ext)
        self.reset()

    # --------------------------------------------------------------------------- the header

    def _parse_avcc(self, ext: bytes) -> None:
        if len(ext) < 7:
            raise UnsupportedError(f"invalid avcC header ({len(ext)} bytes)")
        self.length_size = (ext[4] & 3) + 1
        pos = 5
        groups: list[bytes] = []
        for count_mask in (0x1F, 0xFF):  # SPS, then PPS
            if pos >= len(ext):
                raise UnsupportedError("truncated avcC header")
            count = ext[pos] & count_mask
            pos += 1
            out = []
            for _ in range(count):
                size = int.from_bytes(ext[pos : pos + 2], "big")
                pos += 2
                if pos + size > len(ext):
                    raise UnsupportedError("truncated avcC header")
                out += (_SC4, ext[pos : pos + size])
                pos += size
            groups.append(b"".join(out))
        self.sps, self.pps = groups

    def _parse_hvcc(self, ext: bytes) -> None:
        if len(ext) < 23:
            raise UnsupportedError(f"invalid hvcC header ({len(ext)} bytes)")
        self.length_size = (ext[21] & 3) + 1
        arrays = ext[22]
        pos = 23
        out: list[bytes] = []
        for _ in range(arrays):
            if pos + 3 > len(ext):
                raise UnsupportedError("truncated hvcC header")
            kind = ext[pos] & 0x3F
            count = int.from_bytes(ext[pos + 1 : pos + 3], "big")
            pos += 3
            if kind not in _HVCC_TYPES:
                raise UnsupportedError(f"invalid NAL unit type {kind} in the hvcC header")
            for _ in range(count):
                size = int.from_bytes(ext[pos : pos + 2], "big")
                pos += 2
                if pos + size > len(ext):
                    raise UnsupportedError("truncated hvcC header")
                out += (_SC4, ext[pos : pos + size])
                pos += size
        self.header = b"".join(out)

    # ------------------------------------------------------------------------------ packets

    def reset(self) -> None:
        """Forget the previous packets (FFmpeg's flush): the next packet starts a stream."""
        self._new_idr = True
        self._sps_seen = False
        self._pps_seen = False

    def convert(self, data: bytes | memoryview, *, start: bool = False) -> bytes:
        """One packet in Annex-B form (``bytes``). Raises :class:`~vidpipe.errors.DecodeError`
        for a damaged packet (a NAL length past its end), which FFmpeg's filter rejects too.

        ``start``: the packet starts a segment (a keyframe where a decoder may begin). H.264
        keyframes that are not IDR pictures (open GOPs) get the header's SPS/PPS in front when
        they carry none, so a fresh decoder can start there; FFmpeg's filter adds them to IDR
        pictures only. Otherwise the output is FFmpeg's byte for byte."""
        if self.passthrough:
            return bytes(data)
        if self.codec == "h264":
            return self._h264(data, start)
        return self._hevc(data)

    def _units(self, data: bytes | memoryview):
        """``(start, end)`` of each NAL unit; zero-length units are skipped."""
        n, ls = len(data), self.length_size
        i = 0
        while i < n:
            if n - i < ls:
                raise DecodeError(f"damaged {self.codec} packet: {n - i} trailing bytes")
            size = int.from_bytes(data[i : i + ls], "big")
            i += ls
            if size > n - i:
                raise DecodeError(f"damaged {self.codec} packet: NAL unit of {size} bytes, {n - i} left")
            if size:
                yield i, i + size
            i += size

    def _h264(self, data: bytes | memoryview, start: bool = False) -> bytes:
        mv = memoryview(data)
        out: list = []
        has_ps = False
        new_idr, sps_seen, pps_seen = self._new_idr, self._sps_seen, self._pps_seen
        sps, pps = self.sps, self.pps
        for a, b in self._units(mv):
            kind = mv[a] & 0x1F
            if kind == _SPS:
                sps_seen = new_idr = has_ps = True
            elif kind == _PPS:
                pps_seen = new_idr = True
                if not sps_seen and sps:  # a PPS without its SPS: the header's goes first
                    out.append(sps)
                    sps_seen = has_ps = True
            if not new_idr and kind == _IDR and b - a > 1 and mv[a + 1] & 0x80:
                new_idr = True  # first_mb_in_slice == 0: a new IDR picture right after another
            if kind == _SEI and b - a > 1 and mv[a + 1] == 0 and not sps_seen and not pps_seen:
                if sps:  # buffering-period SEI without parameter sets before it
                    out.append(sps)
                    sps_seen = has_ps = True
                if pps:
                    out.append(pps)
                    pps_seen = True
            if new_idr and kind == _IDR and not sps_seen and not pps_seen:
                if sps:
                    out.append(sps)
                    has_ps = True
                if pps:
                    out.append(pps)
                new_idr = False
            elif new_idr and kind == _IDR and sps_seen and not pps_seen and pps:
                out.append(pps)
            out.append(_SC4 if (not out or kind in (_SPS, _PPS)) else _SC3)
            out.append(mv[a:b])
            if not new_idr and kind == _SLICE:
                new_idr, sps_seen, pps_seen = True, False, False
        self._new_idr, self._sps_seen, self._pps_seen = new_idr, sps_seen, pps_seen
        if start and not has_ps and sps and out:  # a non-IDR keyframe starting a segment
            out[:0] = [sps, pps]  # (the first NAL unit already has a 4-byte start code)
        return b"".join(out)

    def _hevc(self, data: bytes | memoryview) -> bytes:
        mv = memoryview(data)
        out: list = []
        got_irap = False
        for a, b in self._units(mv):
            kind = (mv[a] >> 1) & 0x3F
            if kind in _IRAP and not got_irap:
                got_irap = True
                if self.header:
                    out.append(self.header)
            out.append(_SC4)
            out.append(mv[a:b])
        return b"".join(out)
