"""Crash-safe file output: a hidden temporary name next to the target, then a rename (Parquet,
metadata), or the target itself written in whole rows (CSV, JSONL: :func:`open_live`).

``os.replace`` within one directory is atomic on POSIX and Windows, so a reader sees either the
old file, or the complete new one, never a half-written file. The data is ``fsync``-ed before the
rename so that a power loss cannot leave a renamed but empty file.

A process killed with SIGKILL leaves its temporary file behind (``.<name>.tmp-<pid>``); it is
never mistaken for output and may be deleted.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import IO, Any

from vidpipe.errors import SinkError

logger = logging.getLogger(__name__)

__all__ = ["prepare_target", "open_temp", "open_live", "open_append", "close_live", "commit", "discard", "write_json_atomic"]


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


def open_live(target: Path) -> IO[Any]:
    """Open ``target`` itself for writing (truncating it): UTF-8 text, ``newline=""``.

    For append-only text tables written in whole rows (see :mod:`vidpipe.sinks.table`).

    Raises:
        SinkError: the file cannot be created.
    """
    try:
        return open(target, "w", encoding="utf-8", newline="", buffering=1 << 20)  # noqa: SIM115
    except OSError as exc:
        raise SinkError(f"cannot write output {str(target)!r}: {exc.strerror or exc}") from exc


def open_append(target: Path, keep_bytes: int) -> IO[Any]:
    """Cut ``target`` to its first ``keep_bytes`` bytes and open it to append (UTF-8 text,
    ``newline=""``): a resumed CSV/JSONL table (:mod:`vidpipe.sinks.resume`).

    Raises:
        SinkError: the file cannot be cut or opened.
    """
    try:
        os.truncate(target, keep_bytes)
        return open(target, "a", encoding="utf-8", newline="", buffering=1 << 20)  # noqa: SIM115
    except OSError as exc:
        raise SinkError(f"cannot write output {str(target)!r}: {exc.strerror or exc}") from exc


def close_live(fileobj: IO[Any], target: Path) -> None:
    """Flush, fsync and close a file opened by :func:`open_live`."""
    try:
        if not fileobj.closed:
            fileobj.flush()
            os.fsync(fileobj.fileno())
            fileobj.close()
    except OSError as exc:
        raise SinkError(f"cannot write output {str(target)!r}: {exc.strerror or exc}") from exc


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

    On failure the temporary file is removed and :class:`SinkError` raised; ``target`` is left
    as it was.
    """
    try:
        if not fileobj.closed:
            fileobj.flush()
            os.fsync(fileobj.fileno())
            fileobj.close()
        os.replace(tmp, target)
    except OSError as exc:
        discard(fileobj, tmp)
        raise SinkError(f"cannot write output {str(target)!r}: {exc.strerror or exc}") from exc
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
    """Write ``data`` as indented JSON to ``path`` through a temporary file and a rename."""
    tmp, f = open_temp(path, binary=False)
    try:
        json.dump(data, f, indent=2, ensure_ascii=False, allow_nan=False)
        f.write("\n")
    except (OSError, ValueError, TypeError) as exc:
        discard(f, tmp)
        raise SinkError(f"cannot write metadata {str(path)!r}: {exc}") from exc
    commit(f, tmp, path)
