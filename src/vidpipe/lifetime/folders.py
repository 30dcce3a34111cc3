"""Private temporary folders that a killed process leaves for the next one to remove.

A process killed with ``kill -9`` cleans nothing up. Its folders are named after it
(``vidpipe-<kind>-<pid>-<random>`` in the temporary folder), and making a new one first removes
those of the same kind whose process no longer runs. (A folder whose pid was reused by another
process waits until that one ends too.)
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["private_folder", "remove_stale"]


def private_folder(kind: str) -> Path:
    """A new folder ``vidpipe-<kind>-<this pid>-<random>`` in the temporary folder, after
    :func:`remove_stale` of ``kind``."""
    remove_stale(kind)
    return Path(tempfile.mkdtemp(prefix=f"vidpipe-{kind}-{os.getpid()}-"))


def remove_stale(kind: str) -> int:
    """Remove the folders of ``kind`` whose process no longer runs; how many."""
    prefix = f"vidpipe-{kind}-"
    n = 0
    for path in Path(tempfile.gettempdir()).glob(f"{prefix}*-*"):
        owner = path.name[len(prefix):].split("-", 1)[0]
        if owner.isdigit() and int(owner) != os.getpid() and not _runs(int(owner)) and path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
            n += 1
    return n


def _runs(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True
