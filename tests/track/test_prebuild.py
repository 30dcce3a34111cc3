"""The tracker's first compile runs in a child process (numba's compiler holds the GIL of the
process it runs in); the run's process then loads the kernel from numba's cache."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("numba")

CHILD = textwrap.dedent(
    """
    import logging, sys
    import numpy as np
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
    from vidpipe.track import TrackConfig, _kernel
    from vidpipe.track.book import PackedFrames, TrackBook
    from vidpipe.track.bytetrack import ByteTrack
    from vidpipe.track.prebuild import needs_compile

    print("needs before", needs_compile(_kernel))
    book = TrackBook(TrackConfig(), engine="compiled")
    assert book.wait_built(300)
    print("engine", book.engine, "needs after", needs_compile(_kernel))
    print("cache hits", sum(_kernel.track_batch.stats.cache_hits.values()),
          "misses", sum(_kernel.track_batch.stats.cache_misses.values()))
    rng = np.random.default_rng(0)
    times = np.arange(20) / 30
    counts = np.full(20, 3)
    base = np.array([[10, 10, 50, 90], [200, 40, 240, 140], [400, 10, 430, 70]], float)
    boxes = np.concatenate([base + 3 * k + rng.normal(0, 1, (3, 4)) for k in range(20)])
    rows = np.column_stack([boxes, np.full(60, 0.9), np.zeros(60)]).astype(np.float32)
    got = book.track(PackedFrames(0, times, counts, rows), first_id=1).ids
    ref = ByteTrack().update_frames(times, counts, rows[:, :4], rows[:, 4], rows[:, 5].astype(np.int64))
    print("same ids", got.tolist() == ref.tolist())
    """
)


def test_a_cold_cache_is_filled_by_a_child_and_loaded_here(tmp_path):
    """A fresh numba cache: the book compiles the kernel in a child (logged), then loads it
    from the cache (a cache hit, no compile in this process), and tracks as the numpy tracker."""
    env = {**__import__("os").environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    p = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    out = p.stdout
    assert "needs before True" in out
    assert "compiled the tracker in a child process" in out
    assert "engine compiled needs after False" in out
    assert "cache hits 1 misses 0" in out, out
    assert "same ids True" in out


def test_a_child_that_fails_says_so_and_leaves_the_build_here(monkeypatch, caplog):
    from vidpipe.track import prebuild

    monkeypatch.setattr(prebuild.sys, "executable", "/bin/false")
    with caplog.at_level("INFO", logger="vidpipe.track.prebuild"):
        assert prebuild.build_in_child(timeout=60) == "failed"
    assert "failed (exit 1" in caplog.text and "compiling here" in caplog.text


def test_a_child_killed_by_ctrl_c_leaves_the_numpy_tracker(tmp_path, monkeypatch, caplog):
    """Ctrl-C reaches the compiling child too (one process group): it dies by a signal, and the
    book does not start the same compile in the run's process (the run is ending); numpy tracks
    on. (The child here dies by SIGKILL: a test run in the background, as CI's is, inherits an
    ignored SIGINT, which a shell cannot undo.)"""
    from vidpipe.track import TrackConfig, prebuild
    from vidpipe.track.book import TrackBook

    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nkill -KILL $$\n")
    fake.chmod(0o755)
    monkeypatch.setattr(prebuild.sys, "executable", str(fake))
    with caplog.at_level("INFO", logger="vidpipe.track.prebuild"):
        assert prebuild.build_in_child(timeout=60) == "killed"
    assert "was killed (signal 9)" in caplog.text
    monkeypatch.setattr(prebuild, "needs_compile", lambda kernel: True)
    book = TrackBook(TrackConfig(), engine="compiled")
    assert book.wait_built(60)
    assert book.engine == "numpy"


def test_needs_compile_cannot_tell_without_numbas_cache():
    """Where numba's internals are not what it reads, it says False (compile in-process, as before)."""
    from types import SimpleNamespace

    from vidpipe.track.prebuild import needs_compile

    assert needs_compile(SimpleNamespace(track_batch=object(), _unit_rows=object())) is False
