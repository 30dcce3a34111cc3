"""Decoder processes live no longer than their parent: the decoder's use of
:mod:`vidpipe.lifetime.child` (the lifeline pipe and the parent-death signal, shared with every
child process vidpipe starts).

A decoder process (:mod:`vidpipe.decode.procworker`) holds NVDEC sessions and a CUDA context;
left running after its parent died (``kill -9``, a crash, an out-of-memory kill) it would hold
them until reboot. When the parent is gone, the child removes the shared-memory files the parent
left behind that only its decoder processes used (PyTorch's CUDA IPC reference-count files,
``/dev/shm/torch_<parent pid>_*``, of a parent that shares tensors through PyTorch; the ring's
CUDA buffers are the driver's, which frees them with the processes; the CPU ring has no name at all: it is an anonymous file whose
descriptor travels over the socket) and exits at once. A live parent's files are never removed.
"""

from __future__ import annotations

import functools
import glob
import os
from typing import NoReturn

from vidpipe.lifetime import child

__all__ = ["watch_parent", "parent_gone", "remove_parent_files"]


def watch_parent(parent: int, pipe_fd: int | None) -> None:
    """:func:`vidpipe.lifetime.child.watch_parent` with the decoder's cleanup."""
    child.watch_parent(parent, pipe_fd, on_gone=functools.partial(_cleanup, parent))


def parent_gone(parent: int) -> NoReturn:
    """Exit now (the socket to the parent closed): clean up after ``parent`` if it is dead."""
    child.parent_gone(parent, functools.partial(_cleanup, parent))


def _cleanup(parent: int, dead: bool) -> None:
    if dead:
        remove_parent_files(parent)


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
