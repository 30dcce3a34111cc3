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
    """Frames FFmpeg's own decoder delivers for the first video stream (the ``ffmpeg`` tool,
    ``-f framemd5``, no frame dropped or repeated); ``None`` when it cannot open the file.

    (``ffprobe -count_frames`` of FFmpeg 5.1 crashes on an MPEG-TS whose streams appear mid-file.)
    """
    out = subprocess.run(
        [require("ffmpeg"), "-v", "quiet", "-nostdin", "-i", os.fspath(path), "-map", "0:v:0",
         "-fps_mode", "passthrough", "-f", "framemd5", "-"],
        capture_output=True, text=True, timeout=120,
    )
    frames = sum(1 for line in out.stdout.splitlines() if line.strip() and not line.startswith("#"))
    return None if out.returncode != 0 and frames == 0 else frames
