"""Output formats by file extension, and the default output path of an input."""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit

from vidpipe._validate import check_choice
from vidpipe.errors import ConfigError

__all__ = ["TABLE_FORMATS", "TABLE_EXTENSIONS", "table_format", "default_output_path"]

TABLE_FORMATS: tuple[str, ...] = ("csv", "jsonl", "parquet")

#: File extension (lower case) -> table format.
TABLE_EXTENSIONS: dict[str, str] = {
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
}

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def table_format(path: str | os.PathLike[str], format: str = "auto") -> str:
    """The table format to write ``path`` in: ``format`` itself, or by extension for ``"auto"``.

    Raises:
        ConfigError: ``format`` is not one of ``auto, csv, jsonl, parquet``, or it is ``auto`` and
            the extension is not one of ``.csv .jsonl .ndjson .parquet .pq``.
    """
    check_choice("format", format, ("auto", *TABLE_FORMATS))
    if format != "auto":
        return format
    suffix = Path(path).suffix.lower()
    if suffix not in TABLE_EXTENSIONS:
        allowed = ", ".join(TABLE_EXTENSIONS)
        got = f"extension {suffix!r}" if suffix else "no extension"
        raise ConfigError(
            f"cannot tell the output format of {str(path)!r} ({got}); use one of {allowed}, "
            f"or pass format= one of {', '.join(TABLE_FORMATS)}"
        )
    return TABLE_EXTENSIONS[suffix]


def _sanitize(text: str, *, limit: int = 100) -> str:
    name = _UNSAFE.sub("_", text).strip("._-")
    return name[:limit].rstrip("._-")


def _is_url(source: str) -> bool:
    return re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", source) is not None


def default_output_path(source: str | os.PathLike[str], *, suffix: str = ".detections.csv") -> Path:
    """Where ``vidpipe detect SOURCE`` writes when no ``--output`` is given.

    - a file: next to it, ``<dir>/<stem>.detections.csv`` (``video.mp4`` -> ``video.detections.csv``);
    - a folder (of images): next to the folder, ``<parent>/<folder>.detections.csv``;
    - a URL (``rtsp://user:pw@cam1:554/live/main``) or a device (``/dev/video0``): a sanitized
      name in the current directory (``cam1_554_live_main.detections.csv``). Credentials, query
      and fragment of a URL never appear in the name.
    """
    text = os.fspath(source)
    if _is_url(text):
        parts = urlsplit(text)
        try:
            port = parts.port
        except ValueError:
            port = None
        pieces = [parts.hostname or "", str(port) if port else "", *parts.path.split("/")]
        name = _sanitize("_".join(p for p in pieces if p)) or _sanitize(parts.scheme) or "stream"
        return Path.cwd() / f"{name}{suffix}"
    path = Path(text).expanduser()
    if text.startswith("/dev/"):
        return Path.cwd() / f"{_sanitize(path.name) or 'device'}{suffix}"
    if path.is_dir() or text.endswith(("/", os.sep)):
        folder = path.resolve() if path.name in ("", ".", "..") else path
        return folder.parent / f"{_sanitize(folder.name) or 'images'}{suffix}"
    stem = path.stem
    if any(c in stem for c in "*?[]"):
        stem = _sanitize(stem) or "detections"
    return path.with_name(f"{stem}{suffix}")
