"""Annex-B H.264/HEVC byte streams as a hardware encoder hands them out: NAL units, access units
(one coded picture each), keyframes and parameter sets, so that each picture can be muxed as a
packet of its own with its own time.

An encoder call may return several pictures in one buffer (a flush) or none; the boundaries
follow the standards' rules for the first NAL unit of an access unit: an access unit delimiter,
a parameter set or SEI after a picture's slices, or a slice that starts a new picture
(H.264: ``first_mb_in_slice == 0``; HEVC: ``first_slice_segment_in_pic_flag``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

__all__ = ["Codec", "access_units", "is_keyframe", "parameter_sets"]

Codec = Literal["h264", "hevc"]

# H.264 NAL unit types
_H264_SLICES = range(1, 6)  # non-IDR .. IDR slices
_H264_IDR = 5
_H264_PREFIX = {6, 7, 8, 9, 14, 15}  # SEI, SPS, PPS, AUD, prefix NAL, subset SPS: open a new access unit
_H264_PARAMS = {7, 8}
# HEVC NAL unit types
_HEVC_SLICES = range(0, 32)  # VCL
_HEVC_IRAP = range(16, 24)
_HEVC_PREFIX = {32, 33, 34, 35, 39}  # VPS, SPS, PPS, AUD, prefix SEI
_HEVC_PARAMS = {32, 33, 34}


def _spans(data: bytes) -> Iterator[tuple[int, int, int]]:
    """``(start, body, end)`` of each NAL unit: where its start code begins, where its header
    begins, where it ends."""
    n = len(data)
    pos = data.find(b"\x00\x00\x01")
    while pos != -1 and pos + 3 < n:
        start = pos - 1 if pos > 0 and data[pos - 1] == 0 else pos
        body = pos + 3
        nxt = data.find(b"\x00\x00\x01", body)
        end = n if nxt == -1 else (nxt - 1 if data[nxt - 1] == 0 else nxt)
        if body < end:
            yield start, body, end
        pos = nxt


def _type(codec: Codec, data: bytes, body: int) -> int:
    return data[body] & 0x1F if codec == "h264" else (data[body] >> 1) & 0x3F


def _starts_picture(codec: Codec, data: bytes, body: int, end: int) -> bool:
    """A slice that is the first of its picture (the first bit of its slice header is 1:
    ``first_mb_in_slice`` = ue(v) 0 in H.264, ``first_slice_segment_in_pic_flag`` in HEVC)."""
    first = body + (1 if codec == "h264" else 2)
    return first < end and bool(data[first] & 0x80)


def access_units(data: bytes, codec: Codec) -> list[bytes]:
    """``data`` (Annex-B, whole access units) split into one buffer per coded picture."""
    slices = _H264_SLICES if codec == "h264" else _HEVC_SLICES
    prefix = _H264_PREFIX if codec == "h264" else _HEVC_PREFIX
    units: list[bytes] = []
    begin: int | None = None
    seen_slice = False
    for start, body, end in _spans(data):
        kind = _type(codec, data, body)
        new = (kind in prefix and seen_slice) or (kind in slices and seen_slice
                                                  and _starts_picture(codec, data, body, end))
        if begin is None:
            begin = start
        elif new:
            units.append(data[begin:start])
            begin, seen_slice = start, False
        if kind in slices:
            seen_slice = True
    if begin is not None:
        units.append(data[begin:])
    return units


def is_keyframe(unit: bytes, codec: Codec) -> bool:
    """Whether an access unit is a random access point (an H.264 IDR picture, an HEVC IRAP)."""
    keys = (_H264_IDR,) if codec == "h264" else _HEVC_IRAP
    return any(_type(codec, unit, body) in keys for _, body, _ in _spans(unit))


def parameter_sets(data: bytes, codec: Codec) -> bytes:
    """The SPS/PPS (and HEVC's VPS) NAL units of ``data``, with their start codes, in order."""
    keep = _H264_PARAMS if codec == "h264" else _HEVC_PARAMS
    return b"".join(data[s:e] for s, body, e in _spans(data) if _type(codec, data, body) in keep)
