"""Child processes of a test's parent process, found through ``/proc`` (Linux), and the time
they take to go after the parent died; shared by the lifetime tests (decoder processes, the
encoder process, the benchmarks' server and publishers).

A process is ``(pid, start time)``, so a reused pid never counts; a zombie (exited, not yet
reaped by whoever adopted it) counts as gone.

Usage from tests: ``from proctrack import children, wait_gone`` (tests/conftest.py puts tests/ on
sys.path).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest

__all__ = ["ParentScript", "process", "stat", "children", "running", "wait_gone", "named_files", "fd_targets"]

Proc = tuple[int, int]


def stat(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (``[0]`` the state, ``[1]``
    the parent's pid, ``[19]`` the start time), or ``None`` when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def children(parent: int, match: bytes = b"") -> list[Proc]:
    """``(pid, start time)`` of the live processes whose parent is ``parent`` and whose command
    line contains ``match``."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = stat(int(name))
            if st is not None and int(st[1]) == parent and st[0] not in (b"Z", b"X") and match in _cmdline(int(name)):
                out.append((int(name), int(st[19])))
    return out


def process(pid: int) -> Proc:
    """``(pid, start time)`` of the running process ``pid``."""
    st = stat(pid)
    assert st is not None, f"process {pid} does not run"
    return pid, int(st[19])


def running(proc: Proc) -> bool:
    """Whether the process ``(pid, start time)`` still runs (a zombie does not)."""
    st = stat(proc[0])
    return st is not None and int(st[19]) == proc[1] and st[0] not in (b"Z", b"X")


def wait_gone(kids: list[Proc], t0: float, limit: float, what: str = "child processes") -> float:
    """Seconds from ``t0`` until every process of ``kids`` is gone (fails ``limit`` + 5 s after,
    killing what is left so that it does not outlive the test)."""
    while time.monotonic() - t0 < limit + 5:
        if not any(running(k) for k in kids):
            return time.monotonic() - t0
        time.sleep(0.01)
    left = [k[0] for k in kids if running(k)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    pytest.fail(f"{what} {left} still ran {limit + 5:.0f} s after their parent died")


def named_files(pid: int) -> set[str]:
    """Files with a name in shared memory or the temporary folder that ``pid`` maps or holds
    open, and the paths of its bound Unix sockets."""
    roots = ("/dev/shm/", tempfile.gettempdir().rstrip("/") + "/")
    out: set[str] = set()
    try:
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6:
                    out.add(parts[5].strip().removesuffix(" (deleted)"))
    except OSError:
        pass
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
            else:
                out.add(target.removesuffix(" (deleted)"))
    except OSError:
        pass
    with open("/proc/net/unix") as f:
        next(f)
        for line in f:
            parts = line.split()
            if len(parts) >= 8 and parts[6] in inodes:
                out.add(parts[7])
    return {p for p in out if p.startswith(roots) or p.startswith("@")}


def fd_targets(pid: int) -> set[str]:
    """What the open descriptors of ``pid`` point at (``pipe:[inode]``, paths, ...)."""
    out = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    return out


class ParentScript:
    """A real parent process for a lifetime test: ``python -c script *args`` with tests/ and
    src/ on its path; its stdout lines are collected, its children found by ``match``."""

    def __init__(self, script: str, *args: str, match: bytes, ready_s: float = 120.0) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        self.match, self.ready_s = match, ready_s
        self.proc = subprocess.Popen(
            [sys.executable, "-c", script, *args], env=env, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def line(self, word: str) -> str:
        """The first line the script printed that starts with ``word``."""
        return next(line for line in self.lines if line.startswith(word))

    def wait_for(self, word: str, *, children_up: int = 0) -> list[Proc]:
        """Wait until the script printed ``word`` (and ``children_up`` children run); its children."""
        deadline = time.monotonic() + self.ready_s
        while time.monotonic() < deadline:
            kids = children(self.proc.pid, self.match)
            if any(line.startswith(word) for line in self.lines) and len(kids) >= children_up:
                return kids
            if self.proc.poll() is not None:
                break
            time.sleep(0.01)
        self.proc.kill()
        pytest.fail(f"the parent did not get to {word!r}: {self.proc.wait()} {self.proc.stderr.read()[-3000:]}")

    def kill(self, sig: int) -> float:
        """Send ``sig``; the time it was sent (``time.monotonic()``)."""
        t0 = time.monotonic()
        os.kill(self.proc.pid, sig)
        self.proc.wait(timeout=30)
        return t0

    def close(self) -> None:
        """Kill the script if it still runs (a test's ``finally``)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
