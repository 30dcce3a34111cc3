"""What this process holds right now: host memory, threads, descriptors, children, CUDA memory.

Used by ``vidpipe bench soak`` (memory and fps over time) and by the leak tests (the same run many
times must hold nothing more). Linux only (``/proc``); elsewhere the counts are ``-1``.

Host memory is read two ways: ``rss_mib`` (VmRSS) and ``anon_mib`` (RssAnon + RssShmem: what a
leak grows; VmRSS also moves as the kernel evicts and re-reads pages of mapped libraries, about
500 MiB of PyTorch). :func:`snapshot` first runs ``gc.collect()`` and glibc's ``malloc_trim(0)``
so freed heap pages go back to the OS and the numbers follow what is live.
"""

from __future__ import annotations

import ctypes
import gc
import os
import threading
from dataclasses import asdict, dataclass

__all__ = ["ProcessSnapshot", "snapshot", "children", "trim"]

_MIB = 1 << 20


@dataclass(frozen=True)
class ProcessSnapshot:
    """What one process holds at one moment."""

    rss_mib: float  # VmRSS
    anon_mib: float  # RssAnon + RssShmem (what a leak grows)
    threads: int  # threading.enumerate()
    tasks: int  # OS threads (/proc/self/task)
    fds: int
    children: tuple[int, ...]  # pids of the child processes
    child_fds: tuple[int, ...]  # their open descriptors
    child_tasks: tuple[int, ...]  # their OS threads
    cuda_allocated_mib: float = 0.0
    cuda_reserved_mib: float = 0.0

    def counts(self) -> tuple:
        """The counts that must come back exactly after a run (threads, descriptors, children)."""
        return (self.threads, self.tasks, self.fds, self.children, self.child_fds, self.child_tasks)

    def to_dict(self) -> dict:
        return asdict(self)


def children() -> tuple[int, ...]:
    """Pids of this process's living children."""
    me = os.getpid()
    out = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return ()
    for name in names:
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == me and fields[0] not in (b"Z", b"X"):
                out.append(int(name))
    return tuple(sorted(out))


def _count(path: str) -> int:
    try:
        return len(os.listdir(path))
    except OSError:
        return -1


def _rss_mib() -> tuple[float, float]:
    found: dict[str, float] = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                key = line.split(":", 1)[0]
                if key in ("VmRSS", "RssAnon", "RssShmem"):
                    found[key] = int(line.split()[1]) / 1024
    except OSError:
        return -1.0, -1.0
    return found.get("VmRSS", -1.0), found.get("RssAnon", -1.0) + found.get("RssShmem", 0.0)


def trim() -> None:
    """Collect garbage and hand freed heap pages back to the OS (glibc)."""
    gc.collect()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def snapshot(cuda: bool = False, *, device: object = None) -> ProcessSnapshot:
    """A :class:`ProcessSnapshot` of this process (CUDA memory of ``device`` when ``cuda``)."""
    trim()
    kids = children()
    alloc = reserved = 0.0
    if cuda:
        import torch

        torch.cuda.synchronize(device)
        alloc = torch.cuda.memory_allocated(device) / _MIB
        reserved = torch.cuda.memory_reserved(device) / _MIB
    rss, anon = _rss_mib()
    return ProcessSnapshot(
        rss_mib=rss, anon_mib=anon, threads=len(threading.enumerate()), tasks=_count("/proc/self/task"),
        fds=_count("/proc/self/fd"), children=kids, child_fds=tuple(_count(f"/proc/{p}/fd") for p in kids),
        child_tasks=tuple(_count(f"/proc/{p}/task") for p in kids), cuda_allocated_mib=alloc,
        cuda_reserved_mib=reserved,
    )  # fmt: skip
