"""Decoder processes live no longer than their parent: the child's side of the lifeline.

A decoder process (:mod:`vidpipe.decode.procworker`) holds NVDEC sessions and a CUDA context;
left running after its parent died (``kill -9``, a crash, an out-of-memory kill) it would hold
them until reboot. Two independent watches end it within a moment of the parent's death, by
whatever signal the parent died:

- **a pipe** (every POSIX system): the parent keeps the write end of a pipe open for the pool's
  life and never hands it to anyone; each child blocks on the read end in a thread. When the
  parent process is gone, however it went, the kernel closes its write end and the read returns
  end of file. This also covers a pool started from a short-lived thread.
- **a parent-death signal** (Linux ``prctl(PR_SET_PDEATHSIG, SIGTERM)``): covers the case the
  pipe cannot, a copy of the write end kept alive by a process the parent forked. Linux sends it
  when the *thread* that started the child ends, so the parent starts its children from a thread
  that lives as long as the pool (:class:`~vidpipe.decode.procpool.DecoderProcessPool`). The
  signal is blocked in every thread here and taken by a watcher thread, so the child can clean
  up before it exits; the parent may have died before the signal was armed, so the parent's pid
  is checked right after.

When the parent is gone, the child removes the shared-memory files the parent left behind that
only its decoder processes used (PyTorch's CUDA IPC reference-count files,
``/dev/shm/torch_<parent pid>_*``; the CPU ring has no name at all: it is an anonymous file whose
descriptor travels over the socket) and exits at once with :func:`os._exit` (no interpreter
shutdown that could wait on a CUDA call). A ``SIGINT`` from the terminal is ignored: the parent
decides; if Ctrl-C kills it, the watches end the children.
"""

from __future__ import annotations

import glob
import logging
import os
import signal
import sys
import threading
import time
from typing import NoReturn

__all__ = ["watch_parent", "parent_gone", "is_dead", "remove_parent_files"]

logger = logging.getLogger(__name__)

#: Linux ``prctl`` option number of ``PR_SET_PDEATHSIG`` (``<linux/prctl.h>``)
PR_SET_PDEATHSIG = 1
#: seconds to wait, after the pipe or the socket closed, for the parent to show as dying (it
#: should at once: see :func:`is_dead`); a live parent's files are never removed
REPARENT_WAIT = 0.5
#: the kernel's task flag of a thread in ``do_exit`` (``<linux/sched.h>``), field 9 of ``stat``
PF_EXITING = 0x00000004


def watch_parent(parent: int, pipe_fd: int | None) -> None:
    """Arm both watches for ``parent`` (its pid) and return; exits the process at once when
    ``parent`` is already gone. ``pipe_fd``: the read end of the parent's lifeline pipe. Call it
    first thing in the child's main thread, before any other thread starts (the signal mask is
    inherited by the threads started later, PyTorch's and the codecs' included)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # before arming: never lost
        if _set_pdeathsig(signal.SIGTERM):
            threading.Thread(target=_take_sigterm, args=(parent,), name="vidpipe-sigterm", daemon=True).start()
        else:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    if os.getppid() != parent:  # died before the signal was armed
        parent_gone(parent)
    if pipe_fd is not None:
        threading.Thread(target=_watch_pipe, args=(parent, pipe_fd), name="vidpipe-lifeline", daemon=True).start()


def parent_gone(parent: int) -> NoReturn:
    """Exit now: clean up after ``parent`` if it is dead, then :func:`os._exit` (never returns)."""
    try:
        deadline = time.monotonic() + REPARENT_WAIT
        while not (dead := is_dead(parent)) and time.monotonic() < deadline:
            time.sleep(0.005)
        if dead:
            remove_parent_files(parent)
    finally:
        os._exit(0)


def is_dead(parent: int) -> bool:
    """Whether the process ``parent`` (this process's parent when it started) has died or is
    dying: this process was re-parented, or (Linux) ``parent`` is gone, a zombie, or exiting
    (``PF_EXITING``: it closes its files, the lifeline among them, before it is re-parented
    away, and closing a CUDA context may take a while)."""
    if os.getppid() != parent:
        return True
    try:
        with open(f"/proc/{int(parent)}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except FileNotFoundError:
        return True
    except OSError:
        return False  # no /proc here: only the re-parenting tells
    return fields[0] in (b"Z", b"X", b"x") or bool(int(fields[6]) & PF_EXITING)


def remove_parent_files(parent: int) -> int:
    """Remove PyTorch's CUDA IPC reference-count files of the dead process ``parent``
    (``/dev/shm/torch_<pid>_<random>_<n>``: created by the process that shares CUDA tensors,
    removed by the last process that unmaps them cleanly, so never when the parent was killed).
    Returns how many were removed."""
    n = 0
    for path in glob.glob(f"/dev/shm/torch_{int(parent)}_*"):
        try:
            os.unlink(path)
            n += 1
        except OSError:
            pass  # another child of the same parent was first
    return n


def _set_pdeathsig(sig: int) -> bool:
    """Ask Linux to send ``sig`` when the parent (thread) ends; ``False`` where it cannot."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _take_sigterm(parent: int) -> None:
    """The one thread that receives ``SIGTERM`` (the parent-death signal, or a ``kill``): exit."""
    signal.sigwait({signal.SIGTERM})
    parent_gone(parent)


def _watch_pipe(parent: int, fd: int) -> None:
    """Block on the lifeline pipe; its end of file means the parent closed the pool or died."""
    while True:
        try:
            if not os.read(fd, 1):
                break
        except InterruptedError:
            continue
        except OSError:
            break
    parent_gone(parent)
