"""The ``ffmpeg``/``ffprobe`` command-line tools as an outside reference for tests.

:func:`require` returns the tool's path, or skips the test with the reason when it is not
installed; under CI (``CI=true``) a missing tool FAILS the test instead, because ``.ci/run``
installs it (``apt-get install -y ffmpeg``) and a silently skipped reference check is no check.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

__all__ = ["require", "count_frames"]


def require(tool: str = "ffmpeg") -> str:
    """The path of ``tool`` (``"ffmpeg"`` or ``"ffprobe"``); skip (locally) or fail (CI) without it."""
    path = shutil.which(tool)
    if path is None:
        reason = f"the {tool} command-line tool is not installed (apt-get install -y ffmpeg)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{reason}; CI must install it (.ci/run)")
        pytest.skip(reason)
    return path


def count_frames(path: str | os.PathLike) -> int | None:
    """Frames FFmpeg's own decoder delivers for the first video stream (``ffprobe -count_frames``);
    ``None`` when ffprobe cannot open the file."""
    out = subprocess.run(
        [require("ffprobe"), "-v", "error", "-count_frames", "-select_streams", "v:0",
         "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", os.fspath(path)],
        capture_output=True, text=True, timeout=120,
    )
    if out.returncode != 0:
        return None
    lines = [line.strip() for line in out.stdout.splitlines() if line.strip()]  # TS adds a program section
    value = lines[0].split(",")[0] if lines else ""
    return int(value) if value.isdigit() else 0  # "N/A" or nothing: no frame decoded
