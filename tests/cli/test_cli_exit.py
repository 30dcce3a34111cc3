"""The ``vidpipe`` command ends without Python's teardown, but only after everything Python's
exit would still do: threads joined, ``atexit`` handlers run, stdout and stderr flushed."""

from __future__ import annotations

import subprocess
import sys
import textwrap

CHILD = textwrap.dedent(
    """
    import atexit, sys, threading, time
    from pathlib import Path
    from vidpipe.cli._exit import exit_now

    out = Path(sys.argv[1])
    atexit.register(lambda: (out / "handler").write_text("ran"))
    def late():
        time.sleep(0.3)
        (out / "thread").write_text("done")
    threading.Thread(target=late).start()  # not a daemon: exit waits for it
    sys.stdout.write("x" * 100_000)  # buffered, no newline: lost unless flushed
    exit_now(3)
    """
)


def test_exit_now_runs_what_python_would_and_keeps_the_status(tmp_path):
    p = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 3, p.stderr
    assert p.stdout == "x" * 100_000
    assert (tmp_path / "handler").read_text() == "ran"
    assert (tmp_path / "thread").read_text() == "done"


def test_the_command_line_exits_with_the_commands_status(tmp_path):
    """``python -m vidpipe`` (the same entry as the ``vidpipe`` script): a user error is status 2
    with its message, success is 0 with its output on stdout."""
    bad = subprocess.run([sys.executable, "-m", "vidpipe", "detect", str(tmp_path / "missing.mp4")],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert bad.returncode == 2 and "missing.mp4" in bad.stderr
    ok = subprocess.run([sys.executable, "-m", "vidpipe", "--version"], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and ok.stdout.strip()
