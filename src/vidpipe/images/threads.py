"""One intra-op thread for PyTorch CPU work on the calling thread only (the loader's readers).

Each of the loader's reader threads decodes and resizes whole images; parallelism comes from
having many of them. PyTorch's CPU ops (``F.interpolate``) would each also start an OpenMP team
of ``torch.get_num_threads()`` threads: 16 readers x 16 OpenMP threads on 16 cores, whose
spinning barriers cost more than the resize. ``torch.set_num_threads`` is process-wide, so
instead :func:`single_threaded_torch` sets the OpenMP runtime's *per-thread* limit
(``omp_set_num_threads`` on a thread that is not in an OpenMP team only changes that thread's
setting), after PyTorch's lazy per-thread initialisation, which would otherwise overwrite it.
Other threads, the caller's included, keep their settings. Where the OpenMP runtime cannot be
found (not Linux, another threading backend) it does nothing.
"""

from __future__ import annotations

import functools
import logging
import os

__all__ = ["single_threaded_torch"]

logger = logging.getLogger(__name__)


@functools.lru_cache(maxsize=1)
def _omp_set_num_threads():
    """``omp_set_num_threads`` of the OpenMP runtime PyTorch loaded, or ``None``."""
    import ctypes

    import torch

    if "OpenMP" not in torch.__config__.parallel_info():
        return None
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if ".so" in line}
    except OSError:
        return None
    for path in sorted(libs):
        name = os.path.basename(path)
        if name.startswith(("libgomp", "libiomp", "libomp")):
            try:
                fn = ctypes.CDLL(path).omp_set_num_threads
            except (OSError, AttributeError):
                continue
            fn.argtypes = [ctypes.c_int]
            fn.restype = None
            return fn
    return None


def single_threaded_torch() -> None:
    """Make PyTorch CPU ops called from *this* thread run on this thread alone."""
    import torch

    torch.get_num_threads()  # PyTorch's lazy per-thread init (sets this thread's OpenMP limit)
    fn = _omp_set_num_threads()
    if fn is not None:
        fn(1)
    elif logger.isEnabledFor(logging.DEBUG):
        logger.debug("no OpenMP runtime found; reader threads keep PyTorch's intra-op threads")
