"""Crash-safe file output: a hidden temporary name next to the target, then a rename (Parquet,
metadata), or the target itself written in whole rows (CSV, JSONL: :func:`open_live`).

``os.replace`` within one directory is atomic on POSIX and Windows, so a reader sees either the
old file, or the complete new one, never a half-written file. The data is ``fsync``-ed before the
rename so that a power loss cannot leave a renamed but empty file.

A process killed with SIGKILL leaves its temporary file behind (``.<name>.tmp-<pid>``); it is
never mistaken for output and may be deleted.
"""

from __future__ import annotations

import errno
import json
import logging
import os
from pathlib import Path
from typing import IO, Any

from vidpipe.errors import SinkError
from vidpipe.sinks._livefile import LiveFile

logger = logging.getLogger(__name__)

__all__ = [
    "prepare_target", "open_temp", "open_live", "open_append", "close_live", "commit", "discard", "write_json_atomic",
    "removed", "removed_error",
]


def prepare_target(path: str | os.PathLike[str]) -> Path:
    """Check that ``path`` can be an output file, creating its directory if missing.

    Raises:
        SinkError: the path is a directory, or its directory cannot be created.
    """
    target = Path(path).expanduser()
    if target.is_dir():
        raise SinkError(f"cannot write output {str(target)!r}: it is a directory; give a file name")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SinkError(
            f"cannot write output {str(target)!r}: cannot create its directory "
            f"{str(target.parent)!r} ({exc.strerror or exc})"
        ) from exc
    return target


def open_temp(target: Path, *, binary: bool) -> tuple[Path, IO[Any]]:
    """Create and open ``.<name>.tmp-<pid>`` (``-1``, ``-2``, ... if taken) next to ``target``.

    Text files are opened UTF-8 with ``newline=""`` (the csv module does its own line endings).

    Raises:
        SinkError: the directory is not writable.
    """
    base = f".{target.name}.tmp-{os.getpid()}"
    for attempt in range(1000):
        tmp = target.with_name(base if attempt == 0 else f"{base}-{attempt}")
        try:
            if binary:
                return tmp, open(tmp, "xb", buffering=1 << 20)  # noqa: SIM115 - closed by commit()
            return tmp, open(tmp, "x", encoding="utf-8", newline="", buffering=1 << 20)  # noqa: SIM115
        except FileExistsError:
            continue
        except OSError as exc:
            raise SinkError(
                f"cannot write output {str(target)!r}: cannot create a file in "
                f"{str(target.parent)!r} ({exc.strerror or exc})"
            ) from exc
    raise SinkError(f"cannot write output {str(target)!r}: too many stale temporary files next to it")


def open_live(target: Path) -> LiveFile:
    """Open ``target`` itself for writing (truncating it): UTF-8 text, no newline translation,
    each write straight to the OS and never left half written (:class:`LiveFile`).

    For append-only text tables written in whole rows (see :mod:`vidpipe.sinks.table`).

    Raises:
        SinkError: the file cannot be created.
    """
    try:
        return LiveFile(target)
    except OSError as exc:
        raise SinkError(f"cannot write output {str(target)!r}: {exc.strerror or exc}") from exc


def open_append(target: Path, keep_bytes: int) -> LiveFile:
    """Cut ``target`` to its first ``keep_bytes`` bytes and open it to append whole rows (a
    :class:`LiveFile`): a resumed CSV/JSONL table (:mod:`vidpipe.sinks.resume`).

    Raises:
        SinkError: the file cannot be cut or opened.
    """
    try:
        return LiveFile(target, keep_bytes=keep_bytes)
    except OSError as exc:
        raise SinkError(f"cannot write output {str(target)!r}: {exc.strerror or exc}") from exc


def close_live(fileobj: IO[Any] | LiveFile, target: Path) -> None:
    """Flush, fsync and close a file opened by :func:`open_live` or :func:`open_append`
    (closed even when that fails)."""
    try:
        if not fileobj.closed:
            fileobj.flush()
            os.fsync(fileobj.fileno())
    except OSError as exc:
        raise SinkError(f"cannot write output {str(target)!r}: {exc.strerror or exc}") from exc
    finally:
        try:
            fileobj.close()
        except OSError:
            pass


def removed(fileobj: Any) -> bool:
    """Whether the open file ``fileobj`` was deleted (its name, or its folder, removed while it
    is written): what is written to it then goes nowhere a reader can find."""
    try:
        return os.fstat(fileobj.fileno()).st_nlink == 0
    except (OSError, ValueError, AttributeError):
        return False


def removed_error(what: str, target: Path, written: str) -> SinkError:
    """The error of an output deleted while the run wrote it (see :func:`removed`)."""
    folder = target.parent
    gone = f" (its folder {str(folder)!r} is gone)" if not folder.exists() else ""
    return SinkError(f"{what} {str(target)!r} was deleted while the run was writing it{gone}; stopped: the {written} "
                     "written to it went with it")  # fmt: skip


def _fsync_dir(directory: Path) -> None:
    if os.name != "posix":
        return
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def commit(fileobj: IO[Any], tmp: Path, target: Path) -> None:
    """Flush, fsync and close ``fileobj`` (open on ``tmp``), then atomically rename it to ``target``.

    On failure :class:`SinkError` is raised and ``target`` is left as it was; the temporary file
    is removed, except when only the rename failed (e.g. the folder was made read-only): then it
    is complete and kept, named in the error (its ``kept`` attribute).
    """
    try:
        if not fileobj.closed:
            fileobj.flush()
            os.fsync(fileobj.fileno())
            fileobj.close()
    except OSError as exc:
        discard(fileobj, tmp)
        raise SinkError(f"cannot write output {str(target)!r}: {exc.strerror or exc}") from exc
    try:
        os.replace(tmp, target)
    except OSError as exc:
        error = SinkError(f"cannot write output {str(target)!r}: {exc.strerror or exc}; the finished file was left "
                          f"as {str(tmp)!r}")  # fmt: skip
        error.kept = tmp  # type: ignore[attr-defined]
        raise error from exc
    _fsync_dir(target.parent)


def discard(fileobj: IO[Any] | None, tmp: Path) -> None:
    """Close ``fileobj`` and delete ``tmp``, ignoring errors (used on failure paths)."""
    if fileobj is not None:
        try:
            fileobj.close()
        except Exception:  # noqa: BLE001 - best effort on an error path
            pass
    try:
        tmp.unlink()
    except FileNotFoundError:
        pass
    except OSError as exc:
        logger.warning("could not remove temporary file %s: %s", tmp, exc)


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as indented JSON to ``path`` through a temporary file and a rename.

    On a full disk (no room for the temporary file) an existing ``path`` is overwritten in
    place instead, when the new text fits in the space the file already holds (the running
    metadata of a table being finalised): not atomic, but the metadata then tells the truth.
    """
    try:
        text = json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    except (ValueError, TypeError) as exc:
        raise SinkError(f"cannot write metadata {str(path)!r}: {exc}") from exc
    try:
        tmp, f = open_temp(path, binary=False)
        try:
            f.write(text)
        except OSError as exc:
            discard(f, tmp)
            raise SinkError(f"cannot write metadata {str(path)!r}: {exc.strerror or exc}") from exc
        try:
            commit(f, tmp, path)
        except SinkError as exc:
            if getattr(exc, "kept", None) is not None:  # not renamed: a stray copy helps nobody
                discard(None, tmp)
                cause = exc.__cause__
                reason = cause.strerror if isinstance(cause, OSError) and cause.strerror else cause
                raise SinkError(f"cannot write metadata {str(path)!r}: {reason}") from cause
            raise
    except SinkError as exc:
        cause = exc.__cause__
        if isinstance(cause, OSError) and cause.errno in _NO_SPACE and _overwrite_in_place(path, text):
            logger.info("%s: no space for a new copy; overwrote it in place", path)
            return
        raise


#: errors that say the device (or the user's quota) is full
_NO_SPACE = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}


def _overwrite_in_place(path: Path, text: str) -> bool:
    """Overwrite ``path`` with ``text`` when it fits in the blocks the file already holds (so
    a full disk cannot refuse it half way); ``False`` when it does not fit or fails."""
    data = text.encode("utf-8")
    try:
        fd = os.open(path, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        held = getattr(os.fstat(fd), "st_blocks", 0) * 512
        if len(data) > held:
            return False
        done = 0
        while done < len(data):
            done += os.pwrite(fd, data[done:], done)
        os.ftruncate(fd, len(data))
        os.fsync(fd)
        return True
    except OSError as exc:
        logger.warning("%s: could not overwrite it in place (%s)", path, exc.strerror or exc)
        return False
    finally:
        os.close(fd)
