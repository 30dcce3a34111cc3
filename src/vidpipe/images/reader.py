"""Reading image files on a thread pool, ahead of decoding, in order.

Each file is read, sniffed, its header checked (size limit, truncation, JPEG variant) and then
either handed on as encoded bytes for the batched GPU decoder, or decoded right there on the
worker thread (CPU decoders release the GIL, so the pool decodes in parallel) and, when the
output size is known, resized there too (one PyTorch thread per worker: see
:mod:`vidpipe.images.threads`), so the batch assembly only places finished images. Failures
become a :class:`SkippedImage`; nothing raised by one file stops the run.
"""

from __future__ import annotations

import io
import logging
import os
import struct
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vidpipe.images.batch import SkippedImage
from vidpipe.images.decode_cpu import decode_cpu
from vidpipe.images.formats import ImageFormatError, JpegInfo, describe_unknown, parse_jpeg_header, sniff
from vidpipe.images.listing import has_image_extension
from vidpipe.images.resize import resize_one_cpu, target_size

if TYPE_CHECKING:
    import torch

__all__ = ["MAX_FILE_BYTES", "Prepared", "ReadAhead", "ReadOptions", "read_image"]

logger = logging.getLogger(__name__)

#: Files larger than this are refused before being read (no supported image within
#: ``max_pixels`` needs more).
MAX_FILE_BYTES = 2**31 - 1
#: Files up to this size are read in one call; larger ones are sniffed from their head first.
_READ_WHOLE_BYTES = 64 * 2**20
_HEAD = 64


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """How the reader treats each file.

    ``gpu_jpeg``: hand JPEGs nvJPEG decodes well (8-bit baseline, grey or YCbCr) to the batched
    GPU decoder as bytes; all other files are decoded on the reading thread.
    ``target``: ``(size, mode)`` the images will be resized to: images decoded on the CPU are
    resized on the reading thread (and huge JPEGs decoded at reduced scale); ``None`` for
    native size.
    """

    gpu_jpeg: bool
    max_pixels: int
    target: tuple[tuple[int, int], str] | None = None


@dataclass(slots=True)
class Prepared:
    """A file read and checked. Exactly one of ``encoded`` (GPU route) and ``image`` is set.

    ``size`` is the source ``(height, width)`` after EXIF orientation; ``image`` (when decoded on
    the CPU) is ``(3, h, w)`` uint8, oriented, already resized to its place in the output when
    :attr:`ReadOptions.target` is set (else native size, or smaller for a reduced-scale JPEG).
    """

    index: int
    path: str
    format: str
    size: tuple[int, int]
    encoded: torch.Tensor | None = None
    image: torch.Tensor | None = None
    jpeg: JpegInfo | None = None
    mislabelled: bool = False


def read_image(index: int, path: str, opts: ReadOptions) -> Prepared | SkippedImage:
    """Read, sniff, check and (CPU route) decode one file. Never raises for a bad file."""

    def skip(reason: str, detail: str) -> SkippedImage:
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("skipping %s: %s: %s", path, reason, detail)
        return SkippedImage(path=path, index=index, reason=reason, detail=detail)  # type: ignore[arg-type]

    try:
        with open(path, "rb", buffering=0) as f:
            size = os.fstat(f.fileno()).st_size
            # Small files are read whole in one call and sniffed after; bigger ones are sniffed
            # from their first bytes before the rest is read (a misnamed video is never read).
            whole = size <= _READ_WHOLE_BYTES
            data = _uninitialised(max(size, _HEAD) if whole else _HEAD)
            view = memoryview(data.numpy())
            got = _read_into(f, view)
            if not got:
                return skip("empty", "the file is empty (0 bytes)")
            head = bytes(view[: min(got, _HEAD)])
            fmt = sniff(head)
            if fmt is None:
                return skip("not_image", describe_unknown(head))
            if size > MAX_FILE_BYTES:
                return skip(
                    "too_large",
                    f"the file is {size / 2**30:.1f} GiB, over the 2 GiB read limit",
                )
            if not whole:
                data = _uninitialised(size)
                view = memoryview(data.numpy())
                view[:got] = head
                got += _read_into(f, view[got:])
            if got < len(data):  # a short file (or one that shrank while we read it)
                data, view = data[:got], view[:got]
    except FileNotFoundError:
        return skip("missing", "no such file")
    except IsADirectoryError:
        return skip("unreadable", "is a directory")
    except OSError as exc:
        return skip("unreadable", f"{exc.strerror or exc}")
    except MemoryError:
        return skip("too_large", "not enough memory to read it")
    mislabelled = has_image_extension(path) and not _extension_matches(path, fmt)
    try:
        if fmt == "jpeg":
            info = parse_jpeg_header(view)
            h, w = info.oriented_size
            _check_pixels(info.width, info.height, opts.max_pixels)
            if opts.gpu_jpeg and info.gpu_friendly:
                return Prepared(
                    index,
                    path,
                    fmt,
                    (h, w),
                    encoded=data,
                    jpeg=info,
                    mislabelled=mislabelled,
                )
            target = _target_size(opts, h, w)
            image = _fit(decode_cpu(view, fmt, jpeg=info, target=target), target)
            return Prepared(
                index,
                path,
                fmt,
                (h, w),
                image=image,
                jpeg=info,
                mislabelled=mislabelled,
            )
        _check_pixels(*_pil_size(view, fmt), opts.max_pixels)
        image = decode_cpu(view, fmt)
        h, w = image.shape[1], image.shape[2]
        image = _fit(image, _target_size(opts, h, w))
        return Prepared(index, path, fmt, (h, w), image=image, mislabelled=mislabelled)
    except ImageFormatError as exc:
        return skip(exc.kind, str(exc))
    except MemoryError:
        return skip("too_large", "not enough memory to decode it")
    except Exception as exc:  # noqa: BLE001 - one odd file must never stop a run of 200,000
        logger.warning("unexpected %s while decoding %s: %s", type(exc).__name__, path, exc)
        return skip("corrupt", f"decode failed: {type(exc).__name__}: {exc}")


def _uninitialised(n: int) -> torch.Tensor:
    """A 1-D uint8 CPU tensor of ``n`` bytes, not zeroed: ``bytearray(n)`` zeroes its memory while
    holding the GIL (about 60 us for a 450 KB photo), which the other reader threads and the
    decoder's thread then wait for."""
    import torch

    try:
        return torch.empty(n, dtype=torch.uint8)
    except RuntimeError as exc:  # PyTorch's CPU allocator reports a failed allocation this way
        raise MemoryError(str(exc)) from exc


def _read_into(f, view: memoryview) -> int:
    """Fill ``view`` from the unbuffered file ``f``; the bytes read (fewer at the end of the file)."""
    got = 0
    while got < len(view):
        n = f.readinto(view[got:])
        if not n:
            break
        got += n
    return got


def _check_pixels(width: int, height: int, max_pixels: int) -> None:
    if width * height > max_pixels:
        raise ImageFormatError(
            "too_large",
            f"{width}x{height} = {width * height / 1e6:.1f} Mpx, over max_pixels={max_pixels:,} "
            "(checked from the header, nothing decoded); raise max_pixels to decode it",
        )


def _pil_size(buf: memoryview, fmt: str) -> tuple[int, int]:
    """Width and height from the header (PNG's IHDR directly; PIL reads only the header)."""
    from PIL import Image

    if fmt == "png" and len(buf) >= 24 and buf[12:16] == b"IHDR":
        return struct.unpack_from(">II", buf, 16)

    try:
        with Image.open(io.BytesIO(buf)) as im:
            return im.size
    except Image.DecompressionBombError as exc:
        raise ImageFormatError("too_large", f"PIL refuses it as a decompression bomb: {exc}") from exc
    except Exception as exc:
        kind = "truncated" if "truncat" in str(exc).lower() else "corrupt"
        raise ImageFormatError(kind, f"{fmt.upper()} header unreadable: {exc}") from exc


def _fit(image: torch.Tensor, target: tuple[int, int] | None) -> torch.Tensor:
    """Resize to ``target`` on this thread, or (native size) make the planes contiguous here."""
    return image.contiguous() if target is None else resize_one_cpu(image, target)


def _target_size(opts: ReadOptions, h: int, w: int) -> tuple[int, int] | None:
    if opts.target is None:
        return None
    size, mode = opts.target
    return target_size(h, w, size, mode)


_EXT_FORMAT = {
    ".jpg": "jpeg", ".jpeg": "jpeg", ".jpe": "jpeg", ".jfif": "jpeg", ".png": "png", ".webp": "webp",
    ".bmp": "bmp", ".dib": "bmp", ".tif": "tiff", ".tiff": "tiff",
}  # fmt: skip


def _extension_matches(path: str, fmt: str) -> bool:
    return _EXT_FORMAT.get(os.path.splitext(path)[1].lower()) == fmt


class ReadAhead:
    """Apply ``fn`` to ``jobs`` on ``threads`` threads, at most ``depth`` ahead, yielding results
    in job order. Jobs for which ``bypass(job)`` is true are yielded as ``(job,)`` untouched.
    ``initializer`` runs once on each worker thread. ``close()`` (also on exhaustion) cancels
    what has not started."""

    def __init__(
        self,
        jobs: Iterable[Any],
        fn: Callable[[Any], Any],
        *,
        threads: int,
        depth: int,
        bypass: Callable[[Any], bool] | None = None,
        initializer: Callable[[], None] | None = None,
    ) -> None:
        self._jobs = iter(jobs)
        self._fn = fn
        self._depth = max(1, depth)
        self._bypass = bypass
        self._pool = ThreadPoolExecutor(
            max_workers=max(1, threads), thread_name_prefix="vidpipe-read", initializer=initializer
        )
        self._pending: deque[Future | tuple] = deque()

    def _fill(self) -> None:
        while len(self._pending) < self._depth:
            try:
                job = next(self._jobs)
            except StopIteration:
                return
            if self._bypass is not None and self._bypass(job):
                self._pending.append((job,))
            else:
                self._pending.append(self._pool.submit(self._fn, job))

    def __iter__(self) -> Iterator[Any]:
        try:
            self._fill()
            while self._pending:
                head = self._pending.popleft()
                self._fill()
                yield head.result() if isinstance(head, Future) else head
        finally:
            self.close()

    def close(self) -> None:
        for fut in self._pending:
            if isinstance(fut, Future):
                fut.cancel()
        self._pending.clear()
        self._pool.shutdown(wait=False, cancel_futures=True)
