"""A writer killed with SIGKILL mid-run leaves a playable fragmented MP4 of what it had written."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import av
import pytest

import vidpipe
from ffmpeg_cli import count_frames
from media import read_stamp

HERE = Path(__file__).resolve().parent


def test_sigkill_leaves_a_playable_mp4(tmp_path):
    out = tmp_path / "killed.mp4"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(vidpipe.__file__).parents[1]), str(HERE.parent),
                                                        os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen([sys.executable, str(HERE / "_killed_writer.py"), str(out)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 60
        written = 0
        while written < 75:  # GOP = 20 frames (2 s at 10 fps): fragments of frames 0-19, 20-39, 40-59 done
            line = child.stdout.readline()
            if not line:
                pytest.fail(f"the writer exited early: {child.stderr.read()[-2000:]}")
            if line.startswith("wrote "):
                written = int(line.split()[1])
            if time.monotonic() > deadline:
                pytest.fail("the writer did not get to 75 frames within 60 s")
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL
    n = count_frames(out)  # the ffmpeg CLI decodes what is there
    assert n is not None and 40 <= n <= written, (n, written)
    print(f"killed after {written} frames written: {n} readable")
    with av.open(str(out)) as f:
        frames = list(f.decode(video=0))
    assert len(frames) == n
    assert [read_stamp(fr.to_ndarray(format="rgb24")) for fr in frames] == [i % 256 for i in range(n)]
    assert [round(float(fr.pts * fr.time_base), 3) for fr in frames] == [round(i / 10, 3) for i in range(n)]
