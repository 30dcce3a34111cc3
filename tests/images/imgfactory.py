"""Test images made with PIL: smooth, asymmetric content (so orientation mistakes show and
GPU/CPU JPEG decoders agree closely), EXIF orientation, grey/CMYK/progressive JPEGs, every
supported format, and each kind of bad file."""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import numpy as np
from PIL import Image


def pattern(h: int, w: int, seed: int = 0) -> np.ndarray:
    """``(h, w, 3)`` uint8: gradients plus a bright block in the top-left corner (asymmetric)."""
    rng = np.random.default_rng(seed)
    y = np.linspace(0, 1, h, dtype=np.float32)[:, None]
    x = np.linspace(0, 1, w, dtype=np.float32)[None, :]
    base = rng.uniform(0.2, 0.8, size=3).astype(np.float32)
    img = np.stack([base[0] * 255 * x + 0 * y, base[1] * 255 * y + 0 * x, 128 + 60 * np.sin(6 * x + 3 * y)], axis=-1)
    img = np.broadcast_to(img, (h, w, 3)).copy()
    img[: max(1, h // 4), : max(1, w // 3)] = (250, 250, 40)
    return img.clip(0, 255).astype(np.uint8)


def encode(arr: np.ndarray, fmt: str = "JPEG", *, mode: str | None = None, orientation: int | None = None,
           **save) -> bytes:  # fmt: skip
    """Encode ``arr`` (HWC uint8 RGB) with PIL; ``mode`` converts first ("L", "CMYK", "RGBA", "P");
    ``orientation`` writes an EXIF orientation tag."""
    im = Image.fromarray(arr)
    if mode is not None:
        im = im.convert(mode)
    if orientation is not None:
        exif = Image.Exif()
        exif[0x0112] = orientation
        save["exif"] = exif.tobytes()
    buf = io.BytesIO()
    if fmt == "JPEG":
        save.setdefault("quality", 92)
    im.save(buf, format=fmt, **save)
    return buf.getvalue()


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def reference(data: bytes) -> np.ndarray:
    """PIL's decode with EXIF orientation applied, as HWC uint8 RGB."""
    from PIL import ImageOps

    im = ImageOps.exif_transpose(Image.open(io.BytesIO(data)))
    return np.array(im.convert("RGB"))


def jpeg_segments(data: bytes) -> list[tuple[int, int, int]]:
    """``(marker, start, end)`` of each header segment before the scan data."""
    out, pos = [], 2
    while pos < len(data):
        marker = data[pos + 1]
        (length,) = struct.unpack(">H", data[pos + 2 : pos + 4])
        out.append((marker, pos, pos + 2 + length))
        if marker == 0xDA:
            break
        pos += 2 + length
    return out


def drop_segments(data: bytes, marker: int) -> bytes:
    """The JPEG without its ``marker`` segments (e.g. 0xDB: quantisation tables -> undecodable)."""
    out, last = bytearray(), 0
    for m, start, end in jpeg_segments(data):
        if m == marker:
            out += data[last:start]
            last = end
    return bytes(out + data[last:])


def with_jpeg_size(data: bytes, width: int, height: int) -> bytes:
    """The JPEG with its frame header claiming ``width x height`` (a decompression-bomb header)."""
    for m, start, _ in jpeg_segments(data):
        if m in (0xC0, 0xC1, 0xC2):
            b = bytearray(data)
            struct.pack_into(">HH", b, start + 5, height, width)
            return bytes(b)
    raise ValueError("no SOF segment")


def png_header_only(width: int, height: int) -> bytes:
    """A PNG signature and a valid IHDR claiming ``width x height``, then an empty IDAT and IEND."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b"")


def bad_files(folder: Path) -> dict[str, str]:
    """Write one file of each bad kind into ``folder``; returns ``{name: expected reason}``."""
    good = encode(pattern(48, 64, seed=9))
    files = {
        "b_corrupt.jpg": (b"\xff\xd8\xff\xe0" + bytes(range(256)) * 8, "corrupt"),
        "c_truncated.jpg": (good[: len(good) // 2], "truncated"),
        "d_empty.jpg": (b"", "empty"),
        "e_text.jpg": (b"this is not an image, just text\n" * 10, "not_image"),
        "f_huge.jpg": (with_jpeg_size(good, 30000, 20000), "too_large"),
        "g_huge.png": (png_header_only(40000, 30000), "too_large"),
        "h_no_tables.jpg": (drop_segments(good, 0xDB), "corrupt"),
        "i_broken.png": (encode(pattern(32, 32), "PNG")[:60], "truncated"),
    }
    for name, (data, _) in files.items():
        write(folder / name, data)
    return {name: reason for name, (_, reason) in files.items()}
