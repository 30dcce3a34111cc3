"""Publisher processes for the live benchmarks (``bench streams``, ``bench soak --streams``):
``python -m vidpipe.bench.publish`` children, a few streams each, that die with this process.

They are started by a keeper (:mod:`vidpipe.lifetime.keeper`) and watch its lifeline and a
parent-death signal (:func:`vidpipe.bench.publish.main`), so a benchmark killed with ``kill -9``
takes its publishers with it within a moment.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from vidpipe.lifetime.keeper import Keeper

__all__ = ["PublisherProcesses"]


class PublisherProcesses:
    """Publish ``clip`` to each of ``urls``, paced and looped, from ``ceil(len(urls) /
    per_process)`` processes; a context manager (or :meth:`start` / :meth:`stop`)."""

    def __init__(self, clip: str | os.PathLike, urls: Sequence[str], *, per_process: int = 8) -> None:
        if per_process < 1:
            raise ValueError("per_process must be at least 1")
        self.clip = Path(clip)
        self.urls = list(urls)
        self.per_process = per_process
        self.procs: list[subprocess.Popen] = []
        self._keeper: Keeper | None = None

    @property
    def processes(self) -> int:
        return math.ceil(len(self.urls) / self.per_process)

    def start(self) -> "PublisherProcesses":
        self._keeper = Keeper("vidpipe-publish-keeper")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        try:
            for i in range(0, len(self.urls), self.per_process):
                self.procs.append(self._keeper.popen(
                    [sys.executable, "-m", "vidpipe.bench.publish", str(self.clip), *self.urls[i : i + self.per_process]],
                    python=True, stdout=subprocess.DEVNULL, env=env, start_new_session=True,
                ))  # fmt: skip
        except BaseException:
            self.stop()
            raise
        return self

    def exited(self) -> list[int]:
        """Exit codes of the publishers that are no longer running (they should run until stopped)."""
        return [code for p in self.procs if (code := p.poll()) is not None]

    def stop(self) -> None:
        """Stop them (SIGTERM, then SIGKILL after 5 s). Idempotent."""
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)
        self.procs = []
        if self._keeper is not None:
            self._keeper.close()
            self._keeper = None

    def __enter__(self) -> "PublisherProcesses":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
