"""Publisher processes for the live benchmarks (``bench streams``, ``bench soak --streams``):
``python -m vidpipe.bench.publish`` children, a few streams each, that die with this process.

They are started by a keeper (:mod:`vidpipe.lifetime.keeper`) and watch its lifeline and a
parent-death signal (:func:`vidpipe.bench.publish.main`), so a benchmark killed with ``kill -9``
takes its publishers with it within a moment.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from vidpipe.lifetime.keeper import Keeper, python_env, reap

__all__ = ["PublisherProcesses", "local_streams"]


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
        self._status: Path | None = None  # a private folder of the children's lateness files

    @property
    def processes(self) -> int:
        return math.ceil(len(self.urls) / self.per_process)

    def start(self) -> "PublisherProcesses":
        from vidpipe.bench.publish import STATUS_ENV

        self._keeper = Keeper("vidpipe-publish-keeper")
        self._status = Path(tempfile.mkdtemp(prefix="vidpipe-publish-"))
        env = python_env()
        try:
            for i in range(0, len(self.urls), self.per_process):
                env[STATUS_ENV] = str(self._status / f"{i}.json")
                self.procs.append(self._keeper.popen(
                    [sys.executable, "-m", "vidpipe.bench.publish", str(self.clip), *self.urls[i : i + self.per_process]],
                    python=True, stdout=subprocess.DEVNULL, env=env, start_new_session=True,
                ))  # fmt: skip
        except BaseException:
            self.stop()
            raise
        return self

    def lateness(self) -> dict[str, int]:
        """The publishers' packets sent so far and those sent late (summed; see
        :meth:`vidpipe.bench.publish.Publisher.lateness`), as they last wrote them (twice a second)."""
        total: dict[str, int] = {}
        for path in sorted(self._status.glob("*.json")) if self._status is not None else ():
            try:
                counts = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            for key, n in counts.items():
                total[key] = total.get(key, 0) + int(n)
        return total

    def exited(self) -> list[int]:
        """Exit codes of the publishers that are no longer running (they should run until stopped)."""
        return [code for p in self.procs if (code := p.poll()) is not None]

    def stop(self) -> None:
        """Stop them (SIGTERM, then SIGKILL after 5 s). Idempotent."""
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        reap(self.procs)
        self.procs = []
        if self._keeper is not None:
            self._keeper.close()
            self._keeper = None
        if self._status is not None:
            shutil.rmtree(self._status, ignore_errors=True)
            self._status = None

    def __enter__(self) -> "PublisherProcesses":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def local_streams(clip: str | os.PathLike, count: int, *, nginx_root: str | os.PathLike | None = None,
                  per_process: int = 8, settle_s: float = 2.0) -> Iterator[list[str]]:
    """``count`` live RTMP streams of ``clip`` (paced, looped) on a real nginx-rtmp server on
    loopback (:class:`~vidpipe.bench.rtmp_server.RtmpServer`); yields their URLs once the
    publishers had ``settle_s`` seconds to connect. Server and publishers stop on exit, and die
    with this process.

    Raises:
        FileNotFoundError: no nginx with the RTMP module (the message says what to install).
    """
    from vidpipe.bench.rtmp_server import RtmpServer

    with RtmpServer(root=nginx_root) as server:
        urls = [server.url(f"cam{i}") for i in range(count)]
        with PublisherProcesses(clip, urls, per_process=per_process) as pubs:
            time.sleep(settle_s)
            if pubs.exited():
                raise RuntimeError(f"a publisher process exited (codes {pubs.exited()}); see its messages above")
            yield urls
