"""Turn a folder, a glob pattern, a file or a list of files into an ordered list of image paths."""

from __future__ import annotations

import glob
import logging
import os
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path

from vidpipe.errors import SourceError
from vidpipe.images.formats import EXTENSIONS

__all__ = ["ImageInputs", "has_image_extension", "list_images"]

logger = logging.getLogger(__name__)

#: What :func:`list_images` accepts: one path-like or a sequence of them.
ImageInputs = str | os.PathLike | Sequence[str | os.PathLike]

_GLOB_CHARS = frozenset("*?[")


def has_image_extension(path: str) -> bool:
    """True if ``path`` ends in one of :data:`~vidpipe.images.formats.EXTENSIONS` (any case)."""
    return os.path.splitext(path)[1].lower() in EXTENSIONS


def list_images(inputs: ImageInputs, *, recursive: bool = True) -> list[str]:
    """The image files named by ``inputs``, in a deterministic order.

    - a folder: its files with an image extension (JPEG, PNG, WebP, BMP, TIFF; any case),
      recursively unless ``recursive=False``, sorted by path; hidden files and folders (name
      starting with ``.``, e.g. macOS ``._IMG.jpg`` resource forks) are left out;
    - a glob pattern (``photos/**/*.jpg``; ``**`` spans folders): matching files with an image
      extension, sorted;
    - a file: taken as is, whatever its extension (its content decides how it is decoded);
    - a sequence of any of these: concatenated in the given order.

    A single path that does not exist, a folder without images and a pattern that matches
    nothing raise :class:`SourceError`. Within a sequence, a file that does not exist is kept
    (it is skipped and reported when read), so one stale line in a long list does not stop a run.
    """
    if isinstance(inputs, (str, os.PathLike)):
        return _expand(os.fspath(inputs), recursive=recursive, strict=True)
    if not isinstance(inputs, Iterable):
        raise SourceError(f"images: expected a path or a list of paths, got {type(inputs).__name__}")
    out: list[str] = []
    for item in inputs:
        if not isinstance(item, (str, os.PathLike)):
            raise SourceError(f"images: expected paths, got {type(item).__name__} ({item!r})")
        out.extend(_expand(os.fspath(item), recursive=recursive, strict=False))
    if not out:
        raise SourceError("images: the list of inputs is empty")
    return out


def _expand(path: str, *, recursive: bool, strict: bool) -> list[str]:
    try:  # one stat per entry (a list of 200,000 files is 200,000 of them)
        is_dir, exists = stat.S_ISDIR(os.stat(path).st_mode), True
    except (OSError, ValueError):
        is_dir = exists = False
    if is_dir:
        files = _walk(path, recursive)
        if not files:
            raise SourceError(
                f"{path}: no image files (JPEG, PNG, WebP, BMP, TIFF) in this folder"
                + ("" if recursive else " (recursive=False: subfolders not searched)")
            )
        logger.debug("%s: %d image files", path, len(files))
        return files
    if exists:
        return [path]
    if _GLOB_CHARS & set(path):
        matches = sorted(p for p in glob.glob(path, recursive=True) if os.path.isfile(p) and has_image_extension(p))
        if not matches:
            raise SourceError(f"{path}: the pattern matches no image files")
        return matches
    if strict:
        raise SourceError(f"{path}: no such file or folder")
    return [path]


def _walk(root: str, recursive: bool) -> list[str]:
    files: list[str] = []
    if recursive:
        seen: set[str] = set()  # real paths: a symlink loop is walked once, never forever
        for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
            seen.add(os.path.realpath(dirpath))
            dirnames[:] = [
                d for d in dirnames if not d.startswith(".") and os.path.realpath(os.path.join(dirpath, d)) not in seen
            ]
            files.extend(
                os.path.join(dirpath, f) for f in filenames if not f.startswith(".") and has_image_extension(f)
            )
    else:
        with os.scandir(root) as it:
            files = [e.path for e in it if not e.name.startswith(".") and has_image_extension(e.name) and e.is_file()]
    # Sort by path components so "a/b.jpg" and "a.b/c.jpg" order the same on every platform.
    files.sort(key=lambda p: Path(p).parts)
    return files
