"""Where the benches write the media they generate, and what is left behind.

Generated clips and JPEG sets are large (a 1080p H.264 clip of 6,000 frames is about 500 MB, a
4K set more): by default they go to a fresh temporary folder that is removed when the bench ends,
even on an error or Ctrl-C, so nothing is left behind unasked. To keep them for the next run
(generating 1080p media takes minutes), name a cache folder (``--cache-dir`` on the CLI,
``work_dir=`` in Python): the media is reused from there and the log says how much it holds.
A bench killed with ``kill -9`` cannot remove its temporary folder; the next bench does
(:mod:`vidpipe.lifetime.folders`).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from vidpipe.lifetime.folders import private_folder

__all__ = ["media_folder", "folder_bytes", "LEGACY_FOLDER"]

logger = logging.getLogger(__name__)

#: where vidpipe 0.1's benches left their media (never removed); reported, not touched
LEGACY_FOLDER = Path(tempfile.gettempdir()) / "vidpipe-bench"


def folder_bytes(path: str | os.PathLike) -> int:
    """Total size of the files under ``path`` (0 when it does not exist)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


@contextmanager
def media_folder(cache_dir: str | os.PathLike | None = None, *, needed: bool = True) -> Iterator[Path | None]:
    """The folder for generated media: ``cache_dir`` (created, kept, reused), else a temporary
    folder removed on exit. ``needed=False`` (no media to generate) yields ``None``."""
    if not needed:
        yield None
        return
    if cache_dir is not None:
        folder = Path(cache_dir)
        folder.mkdir(parents=True, exist_ok=True)
        try:
            yield folder
        finally:
            logger.info("generated media kept in %s (%.1f MB in all); delete the folder to free the space",
                        folder, folder_bytes(folder) / 1e6)  # fmt: skip
        return
    if LEGACY_FOLDER.is_dir():
        logger.warning("an earlier vidpipe bench left %.0f MB of generated media in %s; delete it to free the space",
                       folder_bytes(LEGACY_FOLDER) / 1e6, LEGACY_FOLDER)  # fmt: skip
    folder = private_folder("bench")  # named after this process: removed by the next bench if we are killed
    try:
        yield folder
    finally:
        size = folder_bytes(folder)
        shutil.rmtree(folder, ignore_errors=True)
        if size:
            logger.info("removed %.1f MB of generated media (%s); to keep it for the next run name a cache "
                        "folder (CLI: --cache-dir; Python: work_dir=)", size / 1e6, folder)  # fmt: skip
