"""Decoding one image on a CPU thread, and EXIF orientation of decoded tensors (any device).

JPEG goes through torchvision (libjpeg-turbo; greyscale and CMYK/YCCK converted to RGB), with
PIL as a second opinion when torchvision refuses a file. PNG, WebP, BMP and TIFF go through PIL,
which releases the GIL while decoding, so a thread pool decodes in parallel.
"""

from __future__ import annotations

import io
import logging
import struct
import warnings
from typing import TYPE_CHECKING

from vidpipe.images.formats import ImageFormatError, JpegInfo

if TYPE_CHECKING:
    import torch

__all__ = ["DRAFT_MIN_PIXELS", "apply_orientation", "decode_cpu", "error_text", "quiet_torchvision_deprecation"]

logger = logging.getLogger(__name__)

#: JPEGs above this many pixels are decoded at a reduced scale (1/2, 1/4 or 1/8, libjpeg's DCT
#: scaling) on the CPU when the output is much smaller anyway: bounds time and memory for huge
#: photos. Smaller images decode at full size, like on the GPU, so both paths give the same pixels.
DRAFT_MIN_PIXELS = 16_000_000


def quiet_torchvision_deprecation() -> None:
    """Silence torchvision 0.29's DeprecationWarning on its image decoders (one targeted filter;
    idempotent). vidpipe calls them on purpose and on every image."""
    warnings.filterwarnings(
        "ignore", message="The image decoding and encoding capabilities of TorchVision", category=DeprecationWarning
    )


def apply_orientation(img: torch.Tensor, orientation: int) -> torch.Tensor:
    """Apply EXIF orientation ``1..8`` to ``(..., H, W)`` (a view; works on any device).

    The result is how a viewer shows the photo (PIL's ``ImageOps.exif_transpose``): 2 mirror,
    3 rotate 180, 4 flip vertically, 5 transpose, 6 rotate 90 clockwise, 7 transverse,
    8 rotate 90 counter-clockwise.
    """
    if orientation == 2:
        return img.flip(-1)
    if orientation == 3:
        return img.flip(-1).flip(-2)
    if orientation == 4:
        return img.flip(-2)
    if orientation == 5:
        return img.transpose(-1, -2)
    if orientation == 6:
        return img.transpose(-1, -2).flip(-1)
    if orientation == 7:
        return img.transpose(-1, -2).flip(-1).flip(-2)
    if orientation == 8:
        return img.transpose(-1, -2).flip(-2)
    return img


def decode_cpu(
    data: bytearray | bytes | memoryview,
    fmt: str,
    *,
    jpeg: JpegInfo | None = None,
    target: tuple[int, int] | None = None,
) -> torch.Tensor:
    """Decode one image to ``(3, h, w)`` uint8 RGB on the CPU, EXIF orientation applied.

    Args:
        data: the whole file.
        fmt: its sniffed format (``"jpeg"``, ``"png"``, ``"webp"``, ``"bmp"``, ``"tiff"``).
        jpeg: the parsed header of a JPEG (orientation comes from it).
        target: ``(height, width)`` (oriented) the image will be resized to, if known; a JPEG over
            :data:`DRAFT_MIN_PIXELS` at least twice that size is decoded at a reduced scale.

    Raises:
        ImageFormatError: ``kind`` ``"truncated"``, ``"corrupt"``, ``"unsupported"`` or ``"too_large"``.
    """
    if fmt == "jpeg":
        if jpeg is None:
            raise ValueError("decode_cpu: a JPEG needs its parsed header (jpeg=)")
        return _decode_jpeg(data, jpeg, target)
    return _decode_pil(data, fmt)


def _decode_jpeg(data: bytearray | bytes | memoryview, info: JpegInfo, target: tuple[int, int] | None) -> torch.Tensor:
    import torch

    from vidpipe._tvops import decode_jpeg

    if target is not None and info.width * info.height > DRAFT_MIN_PIXELS:
        img = _decode_jpeg_draft(data, info, target)
        if img is not None:
            return img
    writable = isinstance(data, bytearray) or (isinstance(data, memoryview) and not data.readonly)
    buf = data if writable else bytearray(data)
    try:
        img = decode_jpeg(torch.frombuffer(buf, dtype=torch.uint8))
    except RuntimeError as exc:
        # libjpeg-turbo via torchvision refused it; PIL (its own libjpeg build) sometimes copes.
        logger.debug("torchvision could not decode a JPEG (%s); trying PIL", exc)
        try:
            return _decode_pil(data, "jpeg", orientation=info.orientation)
        except ImageFormatError:
            raise ImageFormatError(_kind_of(str(exc)), f"JPEG decode failed: {error_text(exc)}") from exc
    return apply_orientation(img, info.orientation)


def _decode_jpeg_draft(data: bytearray | bytes, info: JpegInfo, target: tuple[int, int]) -> torch.Tensor | None:
    """Decode at 1/2, 1/4 or 1/8 scale with libjpeg's DCT scaling (via PIL), keeping the result
    at least ``target`` in size. ``None`` when no reduction applies or PIL refuses the file."""
    from PIL import Image

    th, tw = target if info.orientation not in (5, 6, 7, 8) else (target[1], target[0])  # stored axes
    if info.width < 2 * tw or info.height < 2 * th:
        return None
    try:
        with Image.open(io.BytesIO(data)) as im:
            im.draft("RGB", (tw, th))
            im.load()
            return _pil_to_tensor(im, info.orientation)
    except Exception as exc:  # noqa: BLE001 - fall back to the full-size decoder, which reports
        logger.debug("draft JPEG decode failed (%s); decoding at full size", exc)
        return None


def _decode_pil(data: bytearray | bytes | memoryview, fmt: str, *, orientation: int | None = None) -> torch.Tensor:
    from PIL import Image, ImageOps

    try:
        with Image.open(io.BytesIO(data)) as im:
            im.load()
            if orientation is not None:
                return _pil_to_tensor(im, orientation)
            try:
                im = ImageOps.exif_transpose(im)
            except Exception as exc:  # noqa: BLE001 - a broken EXIF block must not lose the image
                logger.debug("ignoring unreadable EXIF orientation: %s", exc)
            return _pil_to_tensor(im, 1)
    except Image.DecompressionBombError as exc:
        raise ImageFormatError("too_large", f"PIL refuses it as a decompression bomb: {exc}") from exc
    except (OSError, SyntaxError, ValueError, EOFError, struct.error) as exc:
        raise ImageFormatError(_kind_of(str(exc)), f"{fmt.upper()} decode failed: {error_text(exc)}") from exc


def _pil_to_tensor(im, orientation: int) -> torch.Tensor:
    import numpy as np
    import torch

    mode = im.mode
    if mode.startswith("I;16") or mode == "I":
        # 16-bit greyscale (PNG, TIFF): scale 0..65535 to 0..255 rather than clipping at 255.
        grey = (np.clip(np.asarray(im).astype(np.int64), 0, 65535) // 257).astype(np.uint8)
        rgb = np.repeat(grey[:, :, None], 3, axis=2)
    else:
        rgb = np.asarray(im if mode == "RGB" else im.convert("RGB"))
    if not rgb.flags.writeable:  # PIL hands out read-only buffers; torch wants writable memory
        rgb = rgb.copy()
    t = torch.from_numpy(np.ascontiguousarray(rgb)).permute(2, 0, 1)
    return apply_orientation(t, orientation)


def _kind_of(message: str) -> str:
    m = message.lower()
    if "truncat" in m or "premature end" in m or "incomplete" in m:
        return "truncated"
    if "unsupported" in m or "not supported" in m:
        return "unsupported"
    return "corrupt"


def error_text(exc: BaseException) -> str:
    """One line of an exception's message, without C++ source locations."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if ".cpp:" in text and ", " in text:
        text = text.split(", ", 2)[-1]  # "decode_jpeg, /path/file.cpp:171, message" -> message
    return text[:300]
