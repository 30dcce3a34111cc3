"""Server processes for the live tests: free loopback ports, bounded waits, no orphans.

Every server (GStreamer's RTSP server, nginx, a publisher, the HTTP server) is a child process
started in its own process group; :class:`ServerProcess` starts it, waits (bounded) until it is
ready, and kills the whole group on :meth:`~ServerProcess.stop`. Orphans are prevented three
ways: the fixtures stop their servers in finalizers (also when a test fails), an ``atexit`` hook
kills whatever is still running when the interpreter exits, and each child gets a parent-death
signal (Linux ``PR_SET_PDEATHSIG`` = SIGKILL), so even a SIGKILLed pytest takes its servers with
it. (The parent-death signal fires when the *thread* that started the child ends: start servers
from the main thread or a thread that outlives them, as pytest fixtures do.)

A child's stdout and stderr go to a log file (never a pipe that could fill and block it);
:meth:`ServerProcess.log_tail` gives its end for error messages. The command line written there
has passwords masked (:func:`shown_command`); the servers themselves never print them.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = ["ServerError", "ServerProcess", "free_port", "port_open", "shown_command", "wait_until"]

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
_PR_SET_PDEATHSIG = 1
_LIVE: weakref.WeakSet[ServerProcess] = weakref.WeakSet()  # for the atexit sweep only


class ServerError(RuntimeError):
    """A test server could not be started (the message carries the end of its log)."""


def free_port(kind: str = "tcp", host: str = LOOPBACK) -> int:
    """A port that is free on ``host`` now (``kind``: ``"tcp"`` or ``"udp"``); the OS picks it.

    Another process may take it before the server binds it; :meth:`ServerProcess.start` retries
    a first start on a fresh port when the server fails to come up.
    """
    stype = socket.SOCK_STREAM if kind == "tcp" else socket.SOCK_DGRAM
    with socket.socket(socket.AF_INET, stype) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_open(port: int, host: str = LOOPBACK, timeout: float = 0.2) -> bool:
    """Whether a TCP connection to ``host:port`` succeeds within ``timeout`` seconds."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_until(check: Callable[[], bool], *, timeout: float, interval: float = 0.05,
               what: str = "condition") -> float:
    """Poll ``check()`` until true; return the seconds waited; raise ``TimeoutError`` after ``timeout``."""
    t0 = time.monotonic()
    while True:
        if check():
            return time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            raise TimeoutError(f"{what} not reached within {timeout:.1f} s")
        time.sleep(interval)


def shown_command(cmd: Sequence[str]) -> list[str]:
    """``cmd`` fit for a log: the argument after ``--password`` and URL user info masked."""
    out = []
    for i, arg in enumerate(cmd):
        if i > 0 and cmd[i - 1] == "--password":
            arg = "***"
        out.append(re.sub(r"(\w+://)[^/@\s]*@", r"\1***@", arg))
    return out


def _pdeathsig() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


class ServerProcess:
    """One child process (its process group) with a bounded start, stop and restart.

    Subclasses give :meth:`command` and :meth:`ready` (and may override :meth:`prepare`, called
    before each start, e.g. to write a config). ``start()`` returns ``self``; a server is also a
    context manager (``with RtspServer() as srv: ...``). ``restart()`` starts it again on the
    same ports, so clients can reconnect to the same URL.
    """

    name = "server"

    def __init__(self, *, workdir: str | os.PathLike | None = None, ready_timeout: float = 15.0,
                 env: dict[str, str] | None = None) -> None:
        self._own_dir = workdir is None
        self.workdir = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix=f"vidpipe-{self.name}-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.ready_timeout = float(ready_timeout)
        self.env = env
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.ready_s: float | None = None  #: seconds the last start took to become ready
        self.log_path = self.workdir / f"{self.name}.log"

    # -- to override -------------------------------------------------------------------------
    def command(self) -> Sequence[str]:
        raise NotImplementedError

    def ready(self) -> bool:
        """Whether the started process serves (polled until true or ``ready_timeout``)."""
        raise NotImplementedError

    def prepare(self) -> None:
        """Called before each start (write configs, create folders)."""

    def new_ports(self) -> None:
        """Pick fresh ports (called when a first start failed, perhaps because a port was taken)."""

    # -- life cycle --------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def start(self) -> ServerProcess:
        """Start and wait until :meth:`ready`; raise :class:`ServerError` (with the log's end) if not.

        A first start that fails is retried once on fresh ports; a restart keeps its ports.
        """
        if self.running:
            return self
        attempts = 2 if self.starts == 0 else 1
        for attempt in range(attempts):
            try:
                self._spawn_and_wait()
                self.starts += 1
                return self
            except ServerError:
                self.stop()
                if attempt + 1 == attempts:
                    raise
                log.info("%s did not start; retrying on fresh ports", self.name)
                self.new_ports()
        raise AssertionError("unreachable")

    def _spawn_and_wait(self) -> None:
        self.prepare()
        cmd = [os.fspath(c) for c in self.command()]
        env = None if self.env is None else {**os.environ, **self.env}
        t0 = time.monotonic()
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as logf:
            logf.write(f"\n=== start {self.starts + 1}: {' '.join(shown_command(cmd))}\n".encode())
            logf.flush()
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                                         cwd=self.workdir, env=env, start_new_session=True,
                                         preexec_fn=_pdeathsig if sys.platform.startswith("linux") else None)
        _LIVE.add(self)
        while True:
            if self.proc.poll() is not None:
                raise ServerError(f"{self.name} exited with status {self.proc.returncode} while starting: "
                                  f"{self.log_tail()}")
            if self.ready():
                self.ready_s = time.monotonic() - t0
                log.debug("%s ready in %.2f s", self.name, self.ready_s)
                return
            if time.monotonic() - t0 > self.ready_timeout:
                raise ServerError(f"{self.name} not ready within {self.ready_timeout:.0f} s: {self.log_tail()}")
            time.sleep(0.05)

    def stop(self, *, graceful: bool = False, timeout: float = 5.0) -> None:
        """Kill the process group (SIGKILL: the server vanishes mid-stream like a crashed camera).

        ``graceful=True`` sends SIGTERM first and waits up to ``timeout`` seconds. Idempotent.
        """
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            self._signal_group(proc, signal.SIGCONT)  # a frozen group must run to die of SIGTERM
            if graceful:
                self._signal_group(proc, signal.SIGTERM)
                try:
                    proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    pass
        self._signal_group(proc, signal.SIGKILL)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
            log.warning("%s (pid %d) did not exit after SIGKILL", self.name, proc.pid)

    def restart(self, *, down_s: float = 0.0) -> ServerProcess:
        """Kill, stay down ``down_s`` seconds, and start again on the same ports."""
        self.stop()
        if down_s > 0:
            time.sleep(down_s)
        return self.start()

    def freeze(self) -> None:
        """SIGSTOP the process group: sockets stay open but nothing more is sent (a camera gone quiet)."""
        if self.running:
            self._signal_group(self.proc, signal.SIGSTOP)

    def thaw(self) -> None:
        """SIGCONT after :meth:`freeze`."""
        if self.running:
            self._signal_group(self.proc, signal.SIGCONT)

    @staticmethod
    def _signal_group(proc: subprocess.Popen, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)  # start_new_session: the group id is the child's pid

    def log_since_start(self) -> str:
        """The log written since the current (or last) start."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(getattr(self, "_log_offset", 0))
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def log_tail(self, chars: int = 2000) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return text[-chars:].strip() or "(empty log)"

    def close(self) -> None:
        """Stop and remove the work folder when this object made it."""
        self.stop()
        if self._own_dir:
            import shutil

            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # last resort; fixtures and atexit normally got here first
        with contextlib.suppress(Exception):
            self.stop(timeout=1.0)


@atexit.register
def _kill_leftovers() -> None:
    for srv in list(_LIVE):
        with contextlib.suppress(Exception):
            srv.stop(timeout=1.0)
