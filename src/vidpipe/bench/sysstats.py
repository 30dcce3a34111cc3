"""Measure a block of code: wall time, process CPU time (all threads), GPU memory.

::

    with measure(device) as m:
        work()
    m.usage.wall_s, m.usage.cpu_percent, m.usage.gpu_peak_mib, m.usage.gpu_used_peak_mib

``cpu_percent`` is process CPU time over wall time, so 1600 means 16 cores busy; it includes
vidpipe's decoder processes (:mod:`vidpipe.decode.procpool`) while they run. GPU memory is
measured two ways: ``gpu_peak_mib`` is PyTorch's own peak allocation (invisible to it: memory of
DALI, nvImageCodec, nvJPEG's internal buffers); ``gpu_used_peak_mib`` samples the device's used
memory (``cudaMemGetInfo``) on a background thread and reports its peak above the level at entry,
which counts every library in the process (and any other process on that GPU).
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["Usage", "measure"]

_MIB = 1 << 20


@dataclass(frozen=True)
class Usage:
    """What one measured block used. GPU fields are ``None`` without a CUDA device."""

    wall_s: float
    cpu_s: float
    cpu_percent: float
    gpu_peak_mib: float | None = None
    gpu_used_peak_mib: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


class measure:  # a context manager that reads like a function
    """Context manager measuring wall time, process CPU time and GPU memory of its block.

    Args:
        device: a CUDA device to watch (``None``/CPU: no GPU fields). Entry and exit synchronise it,
            so queued GPU work is counted in the block that queued it.
        sample_s: interval of the device-memory sampler (0 disables it).
    """

    def __init__(self, device: torch.device | str | None = None, *, sample_s: float = 0.01) -> None:
        self.device = device
        self.sample_s = sample_s
        self.usage: Usage | None = None
        self._cuda = False
        self._stop = threading.Event()
        self._peak_used = 0
        self._thread: threading.Thread | None = None

    def __enter__(self) -> measure:
        if self.device is not None:
            import torch

            dev = torch.device(self.device)
            self._cuda = dev.type == "cuda" and torch.cuda.is_available()
            if self._cuda:
                self.device = dev if dev.index is not None else torch.device("cuda", torch.cuda.current_device())
                torch.cuda.synchronize(self.device)
                torch.cuda.reset_peak_memory_stats(self.device)
                self._base_alloc = torch.cuda.memory_allocated(self.device)
                self._base_used = self._used()
                self._peak_used = self._base_used
                if self.sample_s > 0:
                    self._thread = threading.Thread(target=self._sample, name="vidpipe-memsample", daemon=True)
                    self._thread.start()
        self._t0 = time.perf_counter()
        self._c0 = _cpu_seconds()
        return self

    def __exit__(self, *exc) -> bool:
        gpu_peak = gpu_used = None
        if self._cuda:
            import torch

            torch.cuda.synchronize(self.device)
        wall = time.perf_counter() - self._t0
        cpu = _cpu_seconds() - self._c0
        if self._cuda:
            self._stop.set()
            if self._thread is not None:
                self._thread.join()
            self._peak_used = max(self._peak_used, self._used())
            gpu_peak = (torch.cuda.max_memory_allocated(self.device) - self._base_alloc) / _MIB
            gpu_used = (self._peak_used - self._base_used) / _MIB
        self.usage = Usage(wall, cpu, 100.0 * cpu / wall if wall > 0 else 0.0, gpu_peak, gpu_used)
        return False

    def _used(self) -> int:
        import torch

        free, total = torch.cuda.mem_get_info(self.device)
        return total - free

    def _sample(self) -> None:
        while not self._stop.wait(self.sample_s):
            try:
                self._peak_used = max(self._peak_used, self._used())
            except RuntimeError:  # the context went away at shutdown
                return


def _cpu_seconds() -> float:
    """CPU time of this process and of its running decoder processes."""
    cpu = time.process_time()
    procpool = sys.modules.get("vidpipe.decode.procpool")  # only if this process ever used one
    if procpool is not None:
        cpu += procpool.children_cpu_seconds()
    return cpu
