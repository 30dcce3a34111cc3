"""A text file written in whole rows straight to the OS, that never keeps half a row.

:class:`LiveFile` is what :func:`~vidpipe.sinks._atomic.open_live` returns for CSV and JSON Lines
tables: each :meth:`~LiveFile.write` (one batch of complete lines) goes to the OS at once
(``os.write`` until all of it is written, no buffer of its own), and when the OS refuses part of
it (no space left on the device, a disk quota, an I/O error) the file is truncated back to the
end of the last whole write and the error is raised: the file on disk always ends at a row
boundary, nothing half written is retried later, and rows written before stay readable. After a
failed write the file refuses further writes (the run cannot go on) but can still be closed.
"""

from __future__ import annotations

import logging
import os
from typing import Any

__all__ = ["LiveFile"]

logger = logging.getLogger(__name__)


class LiveFile:
    """``path`` opened for writing (created or truncated; with ``keep_bytes``, cut to its first
    ``keep_bytes`` bytes and appended to), UTF-8, bytes written as given (no newline
    translation); a minimal text-file interface (``write``, ``flush``, ``fileno``, ``close``,
    ``closed``) for the table writers.

    Attributes:
        size: bytes on disk: the end of the last write that went through whole.
        error: the ``OSError`` of the write that failed, else ``None``.
    """

    def __init__(self, path: "str | os.PathLike[str]", *, keep_bytes: int | None = None) -> None:
        flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | (os.O_TRUNC if keep_bytes is None else 0)
        self._fd = os.open(path, flags, 0o666)
        self.name = os.fspath(path)
        self.size = keep_bytes or 0
        if keep_bytes is not None:
            try:
                os.ftruncate(self._fd, keep_bytes)
                os.lseek(self._fd, keep_bytes, os.SEEK_SET)
            except OSError:
                os.close(self._fd)
                raise
        self.error: OSError | None = None
        self.closed = False

    def write(self, text: str) -> int:
        """Write ``text`` whole, or (``OSError``) truncate back to the last whole write."""
        if self.closed:
            raise ValueError("I/O operation on closed file")
        if self.error is not None:
            raise OSError(self.error.errno, f"an earlier write failed ({self.error.strerror})")
        data = memoryview(text.encode("utf-8"))
        done = 0
        try:
            while done < len(data):
                done += os.write(self._fd, data[done:])
        except OSError as exc:
            self.error = exc
            if done:
                try:  # never leave half a row: back to the end of the last whole write
                    os.ftruncate(self._fd, self.size)
                except OSError as exc2:
                    logger.warning("%s: could not cut back a half-written row (%s)", self.name, exc2.strerror)
            raise
        self.size += len(data)
        return len(text)

    def flush(self) -> None:
        """Nothing to do: every write already reached the OS."""
        if self.closed:
            raise ValueError("I/O operation on closed file")

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(self._fd)

    def __enter__(self) -> "LiveFile":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
