"""What an image file is, from its bytes: magic-byte sniffing and a JPEG header parser.

The file extension is only used to *list* files; the content decides the decoder, so a PNG named
``.jpg`` goes to the PNG decoder and a text file named ``.jpg`` is skipped as "not an image".

:func:`parse_jpeg_header` walks the JPEG markers up to the first scan (a few hundred bytes in
practice) and returns what routing needs before any pixel is decoded: size, number of components
(1 grey, 3 YCbCr, 4 CMYK/YCCK), bit depth, coding process (baseline, progressive, ...), the EXIF
orientation, and whether the file has its end-of-image marker (truncation check).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = [
    "EXTENSIONS",
    "SUPPORTED_FORMATS",
    "ImageFormatError",
    "JpegInfo",
    "describe_unknown",
    "parse_exif_orientation",
    "parse_jpeg_header",
    "sniff",
]

#: File extensions (lower case) picked up when listing folders and globs.
EXTENSIONS = frozenset({".jpg", ".jpeg", ".jpe", ".jfif", ".png", ".webp", ".bmp", ".dib", ".tif", ".tiff"})

#: Formats vidpipe decodes, as returned by :func:`sniff`.
SUPPORTED_FORMATS = ("jpeg", "png", "webp", "bmp", "tiff")

# Recognised but not supported: named in the skip reason so the user knows what the file is.
_OTHER_SIGNATURES = (
    (b"GIF87a", "GIF"),
    (b"GIF89a", "GIF"),
    (b"%PDF", "PDF"),
    (b"PK\x03\x04", "ZIP archive"),
    (b"\x1f\x8b", "gzip data"),
    (b"\x00\x00\x00\x0cjP  ", "JPEG 2000"),
    (b"\xff\x4f\xff\x51", "JPEG 2000 codestream"),
    (b"8BPS", "Photoshop PSD"),
    (b"\x1aE\xdf\xa3", "Matroska/WebM video"),
)


class ImageFormatError(ValueError):
    """A header that cannot be parsed. ``kind`` is ``"truncated"``, ``"corrupt"`` or ``"unsupported"``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def sniff(head: bytes) -> str | None:
    """Format of a file from its first bytes (16 are enough), or ``None`` when not supported.

    Returns one of :data:`SUPPORTED_FORMATS`.
    """
    if head[:3] == b"\xff\xd8\xff":
        return "jpeg"
    if head[:8] == b"\x89PNG\r\n\x1a\n":
        return "png"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp"
    if head[:4] in (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"):
        return "tiff"
    if head[:2] == b"BM" and len(head) >= 18:
        # DIB header sizes of the BMP versions PIL reads; rules out text that starts with "BM".
        (dib,) = struct.unpack_from("<I", head, 14)
        if dib in (12, 16, 40, 52, 56, 64, 108, 124):
            return "bmp"
    return None


def describe_unknown(head: bytes) -> str:
    """A short human description of content :func:`sniff` rejected (for skip reasons)."""
    for sig, name in _OTHER_SIGNATURES:
        if head.startswith(sig):
            return f"{name}, not a supported image (JPEG, PNG, WebP, BMP, TIFF)"
    if head[4:8] == b"ftyp":
        brand = head[8:12].decode("ascii", "replace")
        return f"ISO media file (brand {brand!r}: HEIC/AVIF/MP4), not a supported image"
    sample = head[:8]
    if sample and all(32 <= b < 127 or b in (9, 10, 13) for b in sample):
        return f"not an image: looks like text ({sample.decode('ascii')!r}...)"
    return f"not an image: unrecognised content (first bytes {sample.hex(' ')})"


@dataclass(frozen=True, slots=True)
class JpegInfo:
    """Header facts of a JPEG file.

    ``width``/``height`` are as stored (before EXIF orientation); ``oriented_size`` is
    ``(height, width)`` after it. ``process`` is ``"baseline"``, ``"extended"``, ``"progressive"``,
    ``"lossless"``, ``"arithmetic"`` or ``"hierarchical"``. ``sampling`` holds each component's
    ``(horizontal, vertical)`` sampling factors from the frame header.
    """

    width: int
    height: int
    components: int
    precision: int
    process: str
    orientation: int = 1
    adobe_transform: int | None = None
    sampling: tuple[tuple[int, int], ...] = ()

    @property
    def oriented_size(self) -> tuple[int, int]:
        if self.orientation in (5, 6, 7, 8):
            return (self.width, self.height)
        return (self.height, self.width)

    @property
    def gpu_friendly(self) -> bool:
        """True for what nvJPEG's batched decoder handles well: 8-bit Huffman, non-progressive,
        greyscale or YCbCr. Everything else (CMYK, progressive, 12-bit, arithmetic) is decoded on
        CPU threads."""
        return self.precision == 8 and self.components in (1, 3) and self.process in ("baseline", "extended")

    @property
    def hw_friendly(self) -> bool:
        """True for what the hardware JPEG engines (A100/H100/H200) decode: baseline 8-bit,
        greyscale or YCbCr 4:4:4, 4:2:2, 4:2:0 or 4:4:0 (not 4:1:1/4:1:0 or unusual factors)."""
        if self.precision != 8 or self.process != "baseline":
            return False
        if self.components == 1:
            return True
        if self.components != 3 or len(self.sampling) != 3 or self.sampling[1] != self.sampling[2]:
            return False
        (yh, yv), (ch, cv) = self.sampling[0], self.sampling[1]
        if ch == 0 or cv == 0 or yh % ch or yv % cv:
            return False
        return (yh // ch, yv // cv) in ((1, 1), (2, 1), (1, 2), (2, 2))


_SOF_PROCESS = {
    0xC0: "baseline", 0xC1: "extended", 0xC2: "progressive", 0xC3: "lossless",
    0xC5: "hierarchical", 0xC6: "hierarchical", 0xC7: "hierarchical",
    0xC9: "arithmetic", 0xCA: "arithmetic", 0xCB: "arithmetic",
    0xCD: "arithmetic", 0xCE: "arithmetic", 0xCF: "arithmetic",
}  # fmt: skip
_STANDALONE = frozenset({0x01, 0xD0, 0xD1, 0xD2, 0xD3, 0xD4, 0xD5, 0xD6, 0xD7, 0xD8})


def parse_jpeg_header(data: bytes | bytearray | memoryview) -> JpegInfo:
    """Parse the markers of a JPEG file up to its first scan and check it is complete.

    ``data`` is the whole file (any bytes-like object; a memoryview is read in place, not copied).

    Raises :class:`ImageFormatError` (``kind`` ``"truncated"`` or ``"corrupt"``) when the markers
    are malformed, the header ends early, or no end-of-image marker follows the scan data.
    """
    mv = memoryview(data)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B") if mv.c_contiguous else memoryview(mv.tobytes())
    n = len(mv)
    if n < 4 or mv[0] != 0xFF or mv[1] != 0xD8:
        raise ImageFormatError("corrupt", "not a JPEG stream (no start-of-image marker)")
    pos = 2
    orientation, adobe, sof, has_dqt = 1, None, None, False
    while True:
        if pos >= n:
            raise ImageFormatError("truncated", f"file ends in the JPEG header (at byte {pos})")
        if mv[pos] != 0xFF:
            raise ImageFormatError("corrupt", f"invalid JPEG marker at byte {pos} (0x{mv[pos]:02x})")
        while pos < n and mv[pos] == 0xFF:  # fill bytes
            pos += 1
        if pos >= n:
            raise ImageFormatError("truncated", "file ends in the JPEG header")
        marker = mv[pos]
        pos += 1
        if marker in _STANDALONE:
            continue
        if marker == 0xD9:
            raise ImageFormatError("corrupt", "end-of-image marker before any image data")
        if pos + 2 > n:
            raise ImageFormatError("truncated", "file ends in the JPEG header")
        seg_len = (mv[pos] << 8) | mv[pos + 1]
        end = pos + seg_len
        if seg_len < 2:
            raise ImageFormatError("corrupt", f"invalid JPEG segment length {seg_len} at byte {pos}")
        if end > n:
            raise ImageFormatError("truncated", "file ends in the JPEG header")
        body = mv[pos + 2 : end]
        if marker == 0xE1 and body[:6] == b"Exif\x00\x00":
            orientation = parse_exif_orientation(body[6:])
        elif marker == 0xEE and body[:5] == b"Adobe" and len(body) >= 12:
            adobe = body[11]
        elif marker in _SOF_PROCESS and sof is None:
            if len(body) < 6:
                raise ImageFormatError("corrupt", "JPEG frame header (SOF) too short")
            precision, height, width, comps = struct.unpack_from(">BHHB", body, 0)
            factors = tuple((body[7 + 3 * c] >> 4, body[7 + 3 * c] & 15) for c in range(comps) if 8 + 3 * c < len(body))
            sof = (_SOF_PROCESS[marker], precision, height, width, comps, factors)
        elif marker == 0xDB:
            has_dqt = True
        elif marker == 0xDA:  # start of scan: the header is over
            break
        pos = end
    if sof is None:
        raise ImageFormatError("corrupt", "no JPEG frame header (SOF) before the image data")
    if not has_dqt:
        # libjpeg rejects it; nvJPEG would decode garbage without an error: refuse it here.
        raise ImageFormatError("corrupt", "no quantization table (DQT) before the image data")
    process, precision, height, width, comps, factors = sof
    if width == 0 or height == 0:
        raise ImageFormatError("unsupported", f"JPEG frame header gives size {width}x{height}")
    if comps not in (1, 3, 4):
        raise ImageFormatError("unsupported", f"JPEG with {comps} colour components")
    # A complete file has EOI after its scan data (trailing bytes after EOI are allowed). Most
    # files end with it; only the others are searched (a copy of what follows the header).
    if not (n - end >= 2 and mv[n - 2] == 0xFF and mv[n - 1] == 0xD9) and mv[end:].tobytes().rfind(b"\xff\xd9") < 0:
        raise ImageFormatError("truncated", "no end-of-image marker: the file is truncated")
    return JpegInfo(width, height, comps, precision, process, orientation, adobe, factors)


def parse_exif_orientation(tiff: bytes | memoryview) -> int:
    """EXIF orientation (1..8) from the TIFF structure of an APP1 ``Exif`` segment; 1 if absent
    or malformed (a broken EXIF block never makes an image unreadable)."""
    t = bytes(tiff[:65536])
    if len(t) < 8:
        return 1
    if t[:4] == b"II*\x00":
        e = "<"
    elif t[:4] == b"MM\x00*":
        e = ">"
    else:
        return 1
    (ifd,) = struct.unpack_from(e + "I", t, 4)
    if ifd + 2 > len(t):
        return 1
    (count,) = struct.unpack_from(e + "H", t, ifd)
    for i in range(min(count, 512)):
        off = ifd + 2 + 12 * i
        if off + 12 > len(t):
            break
        tag, typ = struct.unpack_from(e + "HH", t, off)
        if tag == 0x0112:
            if typ == 3:  # SHORT
                (value,) = struct.unpack_from(e + "H", t, off + 8)
            elif typ == 4:  # LONG (seen in some writers)
                (value,) = struct.unpack_from(e + "I", t, off + 8)
            else:
                return 1
            return value if 1 <= value <= 8 else 1
    return 1
