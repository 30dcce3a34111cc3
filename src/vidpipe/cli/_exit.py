"""Ending the ``vidpipe`` process once a command returned, without the interpreter's teardown."""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn

__all__ = ["exit_now"]


def exit_now(code: int) -> NoReturn:
    """End the process with exit status ``code``, skipping Python's teardown of every object.

    With PyTorch loaded that teardown takes 0.6-1.1 s after the command has finished (``vidpipe
    detect``: 0.64-0.73 s on a 2-core VM, 0.64-1.11 s on H200 hosts; this way 0.07-0.17 s;
    docs/bench/h200/track-quality-exit), and nothing the command wrote depends on it: outputs are
    closed by the command itself. What Python's exit would still do is done first, in its order:
    wait for threads that are not daemons, run the ``atexit`` handlers (decoder processes and
    their shared memory, logging, multiprocessing, temporary directories), flush stdout and
    stderr. Then ``os._exit``. Where this Python has no way to run the handlers, it exits the
    usual way.
    """
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon and thread.is_alive():
            thread.join()
    run_handlers = getattr(atexit, "_run_exitfuncs", None)
    if run_handlers is None:  # pragma: no cover - CPython has it
        sys.exit(code)
    run_handlers()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (vidpipe ... | head): as Python, nothing more to say
            pass
    os._exit(code)
