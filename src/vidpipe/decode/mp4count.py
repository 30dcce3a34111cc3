"""The frame count of an MP4/MOV file's first video track, read from its sample table.

``vidpipe detect`` decides at its first step, before it imports PyTorch, whether to start decoder
processes (:mod:`vidpipe.decode.prestart`), from the lengths of its input files. PyAV reads them in
a thread, but its import (the FFmpeg libraries) competes for the GIL with PyTorch's import in the
main thread, and the children then start later: on an H200, with the 4,800-frame 1080p file, the
default command's run took 1.63 s against 1.41 s for ``--decoder-processes 4``, which starts them
at once (``docs/bench/h200/command-processes``). An MP4 or MOV file says its video track's number
of samples in the ``stsz`` box of its index (``moov``), a few kilobytes read with the standard
library in a millisecond or two. This module reads that number and nothing else; anything it does
not find where ISO/IEC 14496-12 puts it (another container, a fragmented MP4 whose samples are in
``moof`` boxes, a missing or damaged index, no video track) is ``None``, and the caller asks PyAV.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator

__all__ = ["mp4_video_frames"]

#: an index larger than this is not read here (PyAV reads it): 64 MiB, hours of video
MAX_INDEX_BYTES = 64 << 20
#: top-level boxes looked through for the index (an MP4 has a handful)
MAX_TOP_BOXES = 1024


def mp4_video_frames(path: str | os.PathLike) -> int | None:
    """The number of samples (frames) of the first video track of the MP4/MOV file ``path``, from
    its ``stsz``/``stz2`` box; ``None`` when the file is not such a file or that number is not
    there (see the module docstring). Never raises."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if f.read(8)[4:8] != b"ftyp":
                return None
            found = _top_box(f, size, b"moov")
            if found is None or found[1] > MAX_INDEX_BYTES:
                return None
            f.seek(found[0])
            index = f.read(found[1])
    except OSError:
        return None
    if len(index) != found[1]:
        return None
    return _video_samples(index)


def _header(head: bytes, room: int) -> tuple[bytes, int, int] | None:
    """(type, header length, box length) of the box starting with the bytes ``head`` (8 or more),
    with ``room`` bytes from its start to its parent's end; ``None``: a size that does not fit."""
    length, box = struct.unpack_from(">I4s", head)
    header = 8
    if length == 1:  # a 64-bit size follows
        if len(head) < 16:
            return None
        length, header = struct.unpack_from(">Q", head, 8)[0], 16
    elif length == 0:  # to the parent's end
        length = room
    if length < header or length > room:
        return None
    return box, header, length


def _top_box(f, size: int, kind: bytes) -> tuple[int, int] | None:
    """(payload offset, payload length) of the first top-level box ``kind``, walking the box
    headers from the file's start."""
    pos = 0
    for _ in range(MAX_TOP_BOXES):
        if pos + 8 > size:
            return None
        f.seek(pos)
        found = _header(f.read(16), size - pos)
        if found is None:
            return None
        box, header, length = found
        if box == kind:
            return pos + header, length - header
        pos += length
    return None


def _boxes(data: bytes, start: int = 0, end: int | None = None) -> Iterator[tuple[bytes, int, int]]:
    """(type, payload start, payload end) of the boxes in ``data[start:end]``; stops at the first
    box whose size does not fit."""
    end = len(data) if end is None else end
    pos = start
    while pos + 8 <= end:
        found = _header(data[pos : pos + 16], end - pos)
        if found is None:
            return
        box, header, length = found
        yield box, pos + header, pos + length
        pos += length


def _child(data: bytes, start: int, end: int, kind: bytes) -> tuple[int, int] | None:
    for box, lo, hi in _boxes(data, start, end):
        if box == kind:
            return lo, hi
    return None


def _video_samples(moov: bytes) -> int | None:
    kinds = [box for box, _, _ in _boxes(moov)]
    if b"mvex" in kinds:  # fragmented: the samples are counted in the moof boxes
        return None
    for box, lo, hi in _boxes(moov):
        if box != b"trak":
            continue
        mdia = _child(moov, lo, hi, b"mdia")
        hdlr = mdia and _child(moov, *mdia, b"hdlr")
        # hdlr: version and flags (4), pre_defined (4), handler_type (4)
        if not hdlr or hdlr[1] - hdlr[0] < 12 or moov[hdlr[0] + 8 : hdlr[0] + 12] != b"vide":
            continue
        minf = _child(moov, *mdia, b"minf")
        stbl = minf and _child(moov, *minf, b"stbl")
        if not stbl:
            return None
        for kind in (b"stsz", b"stz2"):
            table = _child(moov, *stbl, kind)
            # stsz: version and flags (4), sample_size (4), sample_count (4); stz2: version and
            # flags (4), reserved (3) and field_size (1), sample_count (4)
            if table and table[1] - table[0] >= 12:
                count = struct.unpack_from(">I", moov, table[0] + 8)[0]
                return count or None
        return None
    return None
