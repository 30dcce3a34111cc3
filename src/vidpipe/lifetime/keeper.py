"""The parent's side of child lifetimes: :class:`Keeper` starts child processes so that they die
with this process, by whatever signal it dies.

Linux's parent-death signal (``PR_SET_PDEATHSIG``) fires when the *thread* that forked the child
ends, not the process; a child started from a decode or sink thread that finishes early would be
killed while still wanted. A keeper therefore starts its children from its own thread, which lives
until :meth:`Keeper.close`. It also holds the write end of a lifeline pipe whose read end its
Python children watch (:mod:`vidpipe.lifetime.child`): when this process is gone the kernel closes
the write end and they see end of file.

- **Python children** (``python -m vidpipe...``): get the lifeline's read end and this process's
  pid in the environment, and arm both watches themselves
  (:func:`~vidpipe.lifetime.child.watch_from_env`), so they can clean up before they exit.
- **Other programs** (nginx, ffmpeg, nvidia-smi): get ``PR_SET_PDEATHSIG`` = ``SIGKILL``
  (:func:`with_parent_death`): from util-linux's ``setpriv --pdeathsig KILL``, which arms it and
  then runs the program, where ``setpriv`` is installed; else between ``fork`` and ``exec``
  (:func:`die_with_parent`, a ``preexec_fn``, then a check that the parent did not die before the
  signal was armed). ``setpriv`` comes first because Python code between ``fork`` and ``exec``
  can deadlock a process that has other threads (CPython's documentation says so of
  ``preexec_fn``; seen on an H200: a benchmark with decoder threads hung for good in
  ``Popen`` of nginx). Only the process started gets the signal: a program that forks
  workers of its own must run as one process (the RTMP server runs nginx with
  ``master_process off``).
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from vidpipe.lifetime.child import LIFELINE_ENV, PARENT_ENV, PR_SET_PDEATHSIG

__all__ = ["Keeper", "die_with_parent", "popen_with_parent_death", "python_env", "reap", "with_parent_death"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


def python_env() -> dict[str, str]:
    """This process's environment for a ``python -m vidpipe...`` child, with this interpreter's
    ``sys.path`` as ``PYTHONPATH`` (the child imports the same vidpipe, an editable checkout too)."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))


def reap(procs: "Sequence[subprocess.Popen]", *, timeout: float = 5.0) -> None:
    """Wait up to ``timeout`` seconds for each of ``procs`` to exit (they were told to), then
    kill those still running and wait for them too: none is left running or a zombie."""
    for p in procs:
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=timeout)


def die_with_parent(sig: int = signal.SIGKILL) -> Callable[[], None] | None:
    """A ``preexec_fn`` for :class:`subprocess.Popen` that asks Linux to send ``sig`` to the
    child when the thread that starts it ends (``None`` where that is not possible: not Linux, no
    C library). The thread that calls ``Popen`` must live as long as the child: a :class:`Keeper`,
    or a thread that waits for the child (:func:`subprocess.run`). Everything the child runs is
    resolved here, before the fork."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent, option, number = os.getpid(), ctypes.c_int(PR_SET_PDEATHSIG), ctypes.c_ulong(int(sig))
    zero = ctypes.c_ulong(0)

    def arm() -> None:  # runs in the child, between fork and exec
        if prctl(option, number, zero, zero, zero) == 0 and os.getppid() != parent:
            os.kill(os.getpid(), int(sig))  # the parent died before the signal was armed

    return arm


def with_parent_death(argv: Sequence[str], sig: int = signal.SIGKILL) -> tuple[list[str], Callable[[], None] | None]:
    """``(argv, preexec_fn)`` for :class:`subprocess.Popen` so that the program gets ``sig`` when
    the thread that starts it ends: ``setpriv --pdeathsig`` in front of ``argv`` where it is
    installed (nothing runs in Python between ``fork`` and ``exec``), else ``argv`` and
    :func:`die_with_parent`'s ``preexec_fn``. The same thread rule as :func:`die_with_parent`.

    ``setpriv`` arms the signal after ``Popen`` has returned (in its own ``exec``'d process): a
    thread that ends in that instant (milliseconds on a loaded machine) leaves the program running
    for good. A thread that waits for the program (:func:`subprocess.run`) may use this as is;
    one that goes on uses :func:`popen_with_parent_death`, which returns once the signal is armed."""
    import shutil

    setpriv = shutil.which("setpriv") if sys.platform.startswith("linux") else None
    if setpriv is None:
        return list(argv), die_with_parent(sig)
    return [setpriv, f"--pdeathsig={signal.Signals(sig).name.removeprefix('SIG')}", "--", *argv], None


def popen_with_parent_death(argv: Sequence[str], *, sig: int = signal.SIGKILL, armed_s: float = 10.0,
                            **kwargs: Any) -> subprocess.Popen:
    """:class:`subprocess.Popen` ``argv`` so that it gets ``sig`` when the calling thread ends
    (:func:`with_parent_death`), returning only once the signal is armed: with ``setpriv``, once
    it has run the program (its ``prctl`` comes before that ``exec``: the process's command line
    no longer holds ``--pdeathsig``), or has exited. Waits ``armed_s`` seconds at most, then logs
    a warning. Other keyword arguments go to ``Popen`` (not ``preexec_fn``)."""
    args, preexec = with_parent_death(argv, sig)
    proc = subprocess.Popen(args, preexec_fn=preexec, **kwargs)
    if preexec is None and args[:1] != list(argv[:1]):
        _wait_until_exec(proc, args[1].encode(), armed_s)
    return proc


def _wait_until_exec(proc: subprocess.Popen, launcher_flag: bytes, timeout: float) -> None:
    """Wait until ``proc``'s command line no longer holds ``launcher_flag`` (the launcher has run
    the program), or it has exited."""
    deadline = time.monotonic() + timeout
    delay = 0.0002
    while proc.poll() is None:
        try:
            with open(f"/proc/{proc.pid}/cmdline", "rb") as f:
                fields = f.read().split(b"\0")
        except OSError:
            return  # exited between the two looks, or /proc is not there: nothing to wait for
        if launcher_flag not in fields:
            return
        if time.monotonic() > deadline:
            logger.warning("%s (pid %d) had not started its program after %.0f s: the parent-death signal"
                           " may not be armed", proc.args[0], proc.pid, timeout)
            return
        time.sleep(delay)
        delay = min(delay * 2, 0.01)


class Keeper:
    """Starts child processes from a thread named ``name`` that lives until :meth:`close`, and
    holds their lifeline. Closing it closes the lifeline: Python children still running exit.

    One keeper per group of children that end together (a decoder pool, one encoder process,
    a benchmark's server and publishers).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._watch: int | None = None  # the lifeline's read end (handed to Python children)
        self._lifeline: int | None = None  # its write end (never handed to anyone)
        self._closed = False

    # ------------------------------------------------------------------ starting children
    def popen(self, argv: Sequence[str], *, python: bool, env: Mapping[str, str] | None = None,
              pass_fds: Sequence[int] = (), **kwargs: Any) -> subprocess.Popen:
        """:class:`subprocess.Popen` ``argv`` from the keeper's thread. ``python``: a vidpipe
        module that calls :func:`~vidpipe.lifetime.child.watch_from_env` first thing (it gets the
        lifeline); else any program (it gets a parent-death ``SIGKILL``). Other keyword arguments
        go to ``Popen`` (not ``preexec_fn``)."""
        env = dict(os.environ if env is None else env)
        fds = tuple(pass_fds)
        if not python:
            env.pop(PARENT_ENV, None)
            env.pop(LIFELINE_ENV, None)
            return self.call(lambda: popen_with_parent_death(argv, env=env, pass_fds=fds, **kwargs))
        watch = self._pipe()
        env[PARENT_ENV], env[LIFELINE_ENV] = str(os.getpid()), str(watch)
        return self.call(lambda: subprocess.Popen(list(argv), env=env, pass_fds=fds + (watch,), **kwargs))

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the keeper's thread (start children there); its result or its error."""
        done = threading.Event()
        out: list = []

        def job() -> None:
            try:
                out.append((True, fn()))
            except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread
                out.append((False, exc))
            finally:
                done.set()

        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self.name}: the keeper is closed")
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
            self._jobs.put(job)
        done.wait()
        ok, value = out[0]
        if not ok:
            raise value
        return value

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            job()

    def _pipe(self) -> int:
        with self._lock:
            if self._watch is None:
                self._watch, self._lifeline = os.pipe()  # both close-on-exec: passed only where named
            return self._watch

    # ------------------------------------------------------------------ ending
    def close(self) -> None:
        """Close the lifeline (Python children still running see it end and exit) and end the
        thread (other programs still running get their parent-death signal: stop them first).
        Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            fds, self._watch, self._lifeline = (self._watch, self._lifeline), None, None
            thread = self._thread
            if thread is not None:
                self._jobs.put(None)
        for fd in fds:
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5.0)  # gone when close returns (the leak tests count threads)

    def forget(self) -> None:
        """In a process forked from the keeper's: close the inherited lifeline (a copy kept here
        would keep the children alive after their parent died) and start nothing more. The
        children are the parent's; nothing is sent to them."""
        self._lock = threading.Lock()  # another thread may have held it at the fork
        self._thread = None  # not running in this process
        self.close()
