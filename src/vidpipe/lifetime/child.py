"""A Python child's side of its lifeline: exit when the parent dies, by any signal.

Two independent watches end the child within a moment of the parent's death:

- **a pipe** (every POSIX system): the parent keeps the write end of a pipe open for as long as
  it wants its children and never hands it to anyone (:class:`~vidpipe.lifetime.keeper.Keeper`);
  each child blocks on the read end in a thread. When the parent process is gone, however it went,
  the kernel closes its write end and the read returns end of file. This also covers children
  started from a short-lived thread.
- **a parent-death signal** (Linux ``prctl(PR_SET_PDEATHSIG, SIGTERM)``): covers the case the
  pipe cannot, a copy of the write end kept alive by a process the parent forked. Linux sends it
  when the *thread* that started the child ends, so the parent starts its children from a thread
  that lives as long as they do (the keeper). The signal is blocked in every thread here and taken
  by a watcher thread, so the child can clean up before it exits; the parent may have died before
  the signal was armed, so the parent's pid is checked right after.

When the parent is gone the child runs its ``on_gone`` cleanup (a decoder process removes the
shared-memory files only its kind used; the encoder process finishes its file) and exits at once
with :func:`os._exit` (no interpreter shutdown that could wait on a CUDA call). A ``SIGINT`` from
the terminal is ignored: the parent decides; if Ctrl-C kills it, the watches end the children.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import NoReturn

__all__ = ["watch_parent", "watch_from_env", "parent_gone", "is_dead", "PARENT_ENV", "LIFELINE_ENV"]

logger = logging.getLogger(__name__)

#: the environment variables a child started by :class:`~vidpipe.lifetime.keeper.Keeper` reads:
#: its parent's pid and the descriptor of the lifeline's read end
PARENT_ENV, LIFELINE_ENV = "VIDPIPE_PROC_PARENT", "VIDPIPE_PROC_WATCH"
#: Linux ``prctl`` option number of ``PR_SET_PDEATHSIG`` (``<linux/prctl.h>``)
PR_SET_PDEATHSIG = 1
#: seconds to wait, after the pipe or the socket closed, for the parent to show as dying (it
#: should at once: see :func:`is_dead`)
REPARENT_WAIT = 0.5
#: the kernel's task flag of a thread in ``do_exit`` (``<linux/sched.h>``), field 9 of ``stat``
PF_EXITING = 0x00000004

#: ``on_gone(dead)``: the child's cleanup; ``dead`` tells whether the parent died (``False``: it
#: closed the lifeline but still runs)
OnGone = Callable[[bool], None]


def watch_parent(parent: int, pipe_fd: int | None, *, on_gone: OnGone | None = None) -> None:
    """Arm both watches for ``parent`` (its pid) and return; exits the process at once when
    ``parent`` is already gone. ``pipe_fd``: the read end of the parent's lifeline pipe. Call it
    first thing in the child's main thread, before any other thread starts (the signal mask is
    inherited by the threads started later, PyTorch's and the codecs' included)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # before arming: never lost
        if set_pdeathsig(signal.SIGTERM):
            threading.Thread(target=_take_sigterm, args=(parent, on_gone), name="vidpipe-sigterm",
                             daemon=True).start()
        else:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    if os.getppid() != parent:  # died before the signal was armed
        parent_gone(parent, on_gone)
    if pipe_fd is not None:
        threading.Thread(target=_watch_pipe, args=(parent, pipe_fd, on_gone), name="vidpipe-lifeline",
                         daemon=True).start()


def watch_from_env(*, on_gone: OnGone | None = None) -> int | None:
    """:func:`watch_parent` with the parent and the lifeline a keeper put in the environment
    (:data:`PARENT_ENV`, :data:`LIFELINE_ENV`); the parent's pid, or ``None`` (nothing armed) when
    this process was not started by a keeper."""
    parent = os.environ.get(PARENT_ENV)
    if not parent:
        return None
    fd = os.environ.get(LIFELINE_ENV)
    watch_parent(int(parent), int(fd) if fd else None, on_gone=on_gone)
    return int(parent)


def parent_gone(parent: int, on_gone: OnGone | None = None) -> NoReturn:
    """Exit now: wait a moment for ``parent`` to show as dead, run ``on_gone``, then
    :func:`os._exit` (never returns)."""
    try:
        deadline = time.monotonic() + REPARENT_WAIT
        while not (dead := is_dead(parent)) and time.monotonic() < deadline:
            time.sleep(0.005)
        if on_gone is not None:
            on_gone(dead)
    except BaseException:  # noqa: BLE001 - exit regardless
        logger.debug("cleanup after the parent's end failed", exc_info=True)
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


def set_pdeathsig(sig: int) -> bool:
    """Ask Linux to send ``sig`` to this process when its parent (thread) ends; ``False`` where
    it cannot."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _take_sigterm(parent: int, on_gone: OnGone | None) -> None:
    """The one thread that receives ``SIGTERM`` (the parent-death signal, or a ``kill``): exit."""
    signal.sigwait({signal.SIGTERM})
    parent_gone(parent, on_gone)


def _watch_pipe(parent: int, fd: int, on_gone: OnGone | None) -> None:
    """Block on the lifeline pipe; its end of file means the parent closed it or died."""
    while True:
        try:
            if not os.read(fd, 1):
                break
        except InterruptedError:
            continue
        except OSError:
            break
    parent_gone(parent, on_gone)
