"""Turn what the user typed (paths, folders, globs, URLs) into typed :class:`SourceSpec` objects.

Rules, per input, in this order:

- ``scheme://...`` with a streaming scheme (:data:`LIVE_SCHEMES`) -> ``live``;
- a webcam -> ``live``: ``/dev/videoN`` (whether or not it exists: opening a missing one gives a
  clear error), or a bare index such as ``0`` (``/dev/video0``) when no file of that name exists;
- a folder -> one ``file`` per video inside it (any depth, sorted by path), then one ``images``
  spec (the folder itself: its image files, any depth) if it holds images; neither ->
  :class:`~vidpipe.errors.SourceError`;
- an existing file -> ``images`` if its extension is an image one, else ``file``;
- a glob pattern (``*``, ``?``, ``[``) -> its matches: one ``file`` per video, and one ``images``
  spec (the pattern itself) if it matches images; nothing matched -> ``SourceError``;
- anything else -> ``file`` (whether it exists is checked when it is opened, with a clear message).

Hidden files and folders (name starting with ``.``) are left out of folders and globs. Other files
of a folder or glob (neither image nor video extension) are left out and named in a log message.
"""

from __future__ import annotations

import glob
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from vidpipe._validate import check_choice
from vidpipe.errors import SourceError
from vidpipe.images.formats import EXTENSIONS as _IMAGE_EXTENSIONS
from vidpipe.sources.redact import redact_url

__all__ = ["SourceSpec", "SourceKind", "classify_inputs", "IMAGE_EXTENSIONS", "VIDEO_EXTENSIONS", "LIVE_SCHEMES"]

logger = logging.getLogger(__name__)

SourceKind = Literal["file", "live", "images"]

#: URL schemes read as live streams (latest-wins, drops counted).
LIVE_SCHEMES: tuple[str, ...] = ("rtsp", "rtsps", "rtmp", "rtmps", "http", "https", "srt", "udp", "tcp")
#: Image file extensions (lower case), shared with the image reader (vidpipe.images.formats).
IMAGE_EXTENSIONS: frozenset[str] = frozenset(_IMAGE_EXTENSIONS)
#: Video file extensions (lower case) picked up in folders and globs.
VIDEO_EXTENSIONS: frozenset[str] = frozenset(
    {
        ".mp4", ".m4v", ".mov", ".mkv", ".webm", ".avi", ".ts", ".m2ts", ".mts", ".mpg", ".mpeg",
        ".flv", ".wmv", ".3gp", ".ogv", ".mxf", ".y4m", ".h264", ".264", ".h265", ".265", ".hevc",
        ".ivf", ".obu",
    }
)

_GLOB_CHARS = frozenset("*?[")


@dataclass(frozen=True)
class SourceSpec:
    """One input of a run.

    Attributes:
        kind: ``"file"`` (a video file), ``"live"`` (a stream URL) or ``"images"`` (an image
            file, a folder of images, or a glob pattern matching images).
        location: the path, folder, pattern or URL.
    """

    kind: SourceKind
    location: str

    def __post_init__(self) -> None:
        check_choice("SourceSpec.kind", self.kind, ("file", "live", "images"))
        if not isinstance(self.location, str) or not self.location:
            raise SourceError(f"SourceSpec.location must be a non-empty string, got {self.location!r}")

    @property
    def name(self) -> str:
        """The location as shown in logs, errors, tables, metadata and metrics: a URL's user and
        password replaced by ``***`` (:func:`vidpipe.sources.redact.redact_url`)."""
        return redact_url(self.location)

    def __repr__(self) -> str:
        return f"SourceSpec(kind={self.kind!r}, location={self.name!r})"


def _ext(path: str) -> str:
    return os.path.splitext(path)[1].lower()


def is_live_url(text: str) -> bool:
    head, sep, _ = text.partition("://")
    return bool(sep) and head.lower() in LIVE_SCHEMES


def _visible_files(root: str) -> list[str]:
    """Files under ``root`` (recursive, symlinked folders followed once), hidden ones left out."""
    out: list[str] = []
    seen: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        seen.add(os.path.realpath(dirpath))
        dirnames[:] = [
            d for d in dirnames if not d.startswith(".") and os.path.realpath(os.path.join(dirpath, d)) not in seen
        ]
        out.extend(os.path.join(dirpath, f) for f in filenames if not f.startswith("."))
    out.sort(key=lambda p: Path(p).parts)
    return out


def _note_others(where: str, files: list[str]) -> None:
    """Log the files of a folder or glob that are neither images nor videos (left out)."""
    others = [f for f in files if _ext(f) not in IMAGE_EXTENSIONS and _ext(f) not in VIDEO_EXTENSIONS]
    if others:
        shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        logger.warning("%s: left out %d file(s) without an image or video extension: %s", where, len(others), shown)


def _classify_folder(folder: str) -> list[SourceSpec]:
    files = _visible_files(folder)
    has_images = any(_ext(f) in IMAGE_EXTENSIONS for f in files)
    videos = [SourceSpec("file", f) for f in files if _ext(f) in VIDEO_EXTENSIONS]
    if not has_images and not videos:
        raise SourceError(
            f"folder {folder} holds no images or videos (such as .jpg, .png, .mp4, .mkv, .mov); "
            "check the path, or pass the files themselves"
        )
    _note_others(folder, files)
    if has_images and videos:
        logger.info("%s: %d video(s), each its own source, and the images as one source", folder, len(videos))
    return videos + ([SourceSpec("images", folder)] if has_images else [])


def _classify_glob(pattern: str) -> list[SourceSpec]:
    found = glob.glob(pattern, recursive=True)
    matches = sorted(
        (p for p in found if os.path.isfile(p) and not os.path.basename(p).startswith(".")),
        key=lambda p: Path(p).parts,
    )
    if not matches:
        raise SourceError(f"the pattern {pattern} matches no files")
    videos = [SourceSpec("file", p) for p in matches if _ext(p) in VIDEO_EXTENSIONS]
    has_images = any(_ext(p) in IMAGE_EXTENSIONS for p in matches)
    if not videos and not has_images:
        raise SourceError(
            f"the pattern {pattern} matches {len(matches)} files but no images or videos "
            f"(e.g. {matches[0]}); use a pattern ending in an image or video extension"
        )
    _note_others(pattern, matches)
    return videos + ([SourceSpec("images", pattern)] if has_images else [])


def is_webcam(text: str) -> bool:
    """``/dev/videoN``, or a bare index ``N`` with no file of that name (a V4L2 webcam)."""
    from vidpipe.sources.connect import webcam_device

    return webcam_device(text) is not None


def classify_one(text: str) -> list[SourceSpec]:
    """The :class:`SourceSpec` objects of one input (see the module docstring for the rules)."""
    if is_live_url(text) or is_webcam(text):
        return [SourceSpec("live", text)]
    if os.path.isdir(text):
        return _classify_folder(text)
    if os.path.exists(text):
        return [SourceSpec("images" if _ext(text) in IMAGE_EXTENSIONS else "file", text)]
    if _GLOB_CHARS & set(text):
        return _classify_glob(text)
    return [SourceSpec("file", text)]


def classify_inputs(inputs: Sequence[str | os.PathLike]) -> list[SourceSpec]:
    """Classify every input, in order; folders and globs expand to several specs.

    Raises :class:`~vidpipe.errors.SourceError` for an empty folder, a pattern that matches
    nothing, or an empty list of inputs.
    """
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    out: list[SourceSpec] = []
    for item in inputs:
        if not isinstance(item, (str, os.PathLike)):
            raise SourceError(f"expected a path, folder, glob pattern or URL, got {type(item).__name__} ({item!r})")
        text = os.fspath(item)
        if not text:
            raise SourceError("an input is an empty string; expected a path, folder, glob pattern or URL")
        out.extend(classify_one(text))
    if not out:
        raise SourceError("no inputs given; pass a video file, a folder, a glob pattern or a stream URL")
    return out
