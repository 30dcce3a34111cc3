"""numba's first compile of the tracker in a process of its own (:func:`build_in_child`).

The first use of the compiled tracker on a machine compiles its kernel: 8-16 s in which numba's
compiler holds the GIL of the process it runs in. In the run's process that slows the run's own
threads (the numpy tracker tracking meanwhile, batching, hand-offs from the decoders). Compiled in
a child process instead, it fills numba's cache on another core, and the run's process then loads
the kernel from the cache in under a second. The child is only started where the cache does not
hold the kernel (:func:`needs_compile`); where that cannot be told, or the child fails, the
build stays in the run's process as before (:class:`~vidpipe.track.book.TrackBook`).

``python -m vidpipe.track.prebuild``: the child (it exits when its parent is gone).
"""

from __future__ import annotations

import logging
import subprocess
import sys
from types import ModuleType
from typing import Literal

__all__ = ["needs_compile", "build_in_child"]

logger = logging.getLogger(__name__)


def needs_compile(kernel: ModuleType) -> bool:
    """Whether numba's cache lacks (or holds a stale) compiled ``kernel`` (:mod:`vidpipe.track._kernel`)
    for this interpreter. Reads numba's cache index without compiling; ``False`` where it cannot
    tell (numba's internals differ): then the caller compiles in-process, as before."""
    try:
        return any(not fn._cache._cache_file._load_index() for fn in (kernel.track_batch, kernel._unit_rows))
    except Exception:  # noqa: BLE001 - another numba's internals: no child, the usual build
        return False


def build_in_child(*, timeout: float = 300.0) -> Literal["built", "failed", "killed"]:
    """Compile the kernel into numba's cache in a child process (it dies with this process;
    ``timeout`` seconds at most): ``"built"``; ``"failed"`` (an error or the timeout: the caller
    may compile in-process); ``"killed"`` by a signal (Ctrl-C, which the terminal sends the whole
    process group, or the kernel's memory killer: compiling here instead would only repeat it)."""
    from vidpipe.lifetime.keeper import Keeper, python_env

    keeper = Keeper("vidpipe-track-prebuild")
    try:
        proc = keeper.popen([sys.executable, "-m", "vidpipe.track.prebuild"], python=True, env=python_env(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            logger.info("the tracker's compile in a child process took over %.0f s; compiling here", timeout)
            return "failed"
        if proc.returncode < 0:
            logger.info("the tracker's compile in a child process was killed (signal %d)", -proc.returncode)
            return "killed"
        if proc.returncode != 0:
            tail = err.decode(errors="replace").strip().splitlines()[-1:] if err else []
            logger.info("the tracker's compile in a child process failed (exit %s%s); compiling here",
                        proc.returncode, f": {tail[0]}" if tail else "")  # fmt: skip
            return "failed"
        return "built"
    finally:
        keeper.close()


def _main() -> None:
    from vidpipe.lifetime.child import watch_from_env

    watch_from_env()
    from vidpipe.track.compiled import CompiledByteTrack

    CompiledByteTrack().warm_up()


if __name__ == "__main__":
    _main()
