"""Fixtures for the live tests: real streaming servers on loopback (see :mod:`live.servers`).

A pytest plugin registered for the whole suite by ``tests/conftest.py``
(``pytest_plugins = ("live.fixtures",)``), so tests anywhere (``tests/sources``, ``tests/live``,
...) can ask for these fixtures.

- ``live_clip`` (session): a 320x240, 15 fps, 4 s H.264 MP4 (keyframe every 15 frames, no
  B-frames, the ``boxes`` pattern with a frame-number stamp :func:`media.read_stamp` reads) for
  publishers and file mounts.
- ``live_servers`` (function): a :class:`LiveServers` factory; every server it starts is killed
  at teardown, also when the test fails.
- ``rtsp_server`` (function): a started :class:`~live.servers.RtspServer` with ``/cam0`` and ``/cam1``.
- ``rtmp_stream`` (function): a started :class:`~live.servers.NginxRtmp` with a
  :class:`~live.servers.Publisher` pushing ``live_clip`` to ``live/cam0``; ``(server, publisher)``.

Every test under ``tests/live`` and every test using one of these server fixtures is marked
``live`` (``-m "not live"`` leaves them out). A server whose packages are missing skips the test
with the reason, except under ``CI=true``, where it fails (``.ci/run`` installs them). And under
``CI=true`` any ``live`` test that ends skipped makes the session fail at its end: a live test
that quietly skipped in CI is no test. Exempt: ``gpu``/``nvdec`` tests (CI has no GPU) and tests
marked ``live_optional`` (a capability missing from a library CI cannot change, e.g. PyAV's
wheels have no SRT protocol: ``@pytest.mark.live_optional`` on such a test, with the reason in
its skip).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from live.need import in_ci, require
from live.procs import ServerProcess
from live.servers import (GST_PYTHON, HttpStreamServer, NginxRtmp, Publisher, RtspServer, SrtServer, nginx_missing_reason,
                          rtsp_missing_reason, srt_missing_reason)

class LiveServers:
    """Starts servers for one test and kills them all at its end (``live_servers`` fixture).

    Every method starts the server (waiting until it serves) and returns it; keyword arguments go
    to the server's class. ``workdir`` defaults to a fresh folder under the test's ``tmp_path``.
    """

    def __init__(self, tmp_path: Path) -> None:
        self._tmp = tmp_path
        self._servers: list[ServerProcess] = []

    def _start(self, server: ServerProcess) -> ServerProcess:
        self._servers.append(server)
        return server.start()

    def _dir(self, kind: str) -> Path:
        d = self._tmp / f"{kind}{len(self._servers)}"
        d.mkdir(parents=True, exist_ok=True)
        return d

    def rtsp(self, **kwargs) -> RtspServer:
        """:class:`RtspServer` (``streams=``, ``files=``, ``user=``/``password=``, ``shared=``, ...)."""
        require(rtsp_missing_reason(kwargs.get("python", GST_PYTHON)))
        return self._start(RtspServer(workdir=self._dir("rtsp"), **kwargs))

    def rtmp(self, **kwargs) -> NginxRtmp:
        """:class:`NginxRtmp` (``hls=``, ``root=`` for a ``dpkg -x`` tree, ...)."""
        require(nginx_missing_reason(kwargs.get("root")))
        return self._start(NginxRtmp(workdir=self._dir("nginx"), **kwargs))

    def publish(self, input: str | os.PathLike, url: str | Sequence[str], **kwargs) -> Publisher:
        """:class:`Publisher` pushing ``input`` to ``url`` (or each of several URLs; ``fmt="flv"``
        for RTMP, ``stagger_s=``, ``retry_s=``, ...)."""
        return self._start(Publisher(input, url, workdir=self._dir("pub"), **kwargs))

    def http(self, files: dict[str, str | os.PathLike], **kwargs) -> HttpStreamServer:
        """:class:`HttpStreamServer` serving ``files`` as ``/NAME.ts`` and ``/hls/NAME.m3u8``."""
        return self._start(HttpStreamServer(files, workdir=self._dir("http"), **kwargs))

    def srt(self, input: str | os.PathLike, **kwargs) -> SrtServer:
        """:class:`SrtServer` (the ffmpeg tool as an SRT listener)."""
        require(srt_missing_reason())
        return self._start(SrtServer(input, workdir=self._dir("srt"), **kwargs))

    def close(self) -> None:
        for server in reversed(self._servers):
            server.close()
        self._servers.clear()


@pytest.fixture(scope="session")
def live_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """320x240, 15 fps, 60 frames (4 s) H.264 MP4: GOP 15, no B-frames, stamped ``boxes``."""
    from media import make_video

    path = tmp_path_factory.mktemp("live") / "live_clip.mp4"
    make_video(path, width=320, height=240, fps=15, frames=60, gop=15, bframes=0, crf=23)
    return path


@pytest.fixture
def live_servers(tmp_path: Path):
    """A :class:`LiveServers`: ``.rtsp(**kw)``, ``.rtmp(**kw)``, ``.publish(input, url, **kw)``,
    ``.http(files, **kw)``, ``.srt(input, **kw)``; all killed at teardown."""
    servers = LiveServers(tmp_path)
    try:
        yield servers
    finally:
        servers.close()


@pytest.fixture
def rtsp_server(live_servers: LiveServers) -> RtspServer:
    """GStreamer's RTSP server with live ``/cam0`` and ``/cam1`` (320x240, 15 fps, H.264)."""
    return live_servers.rtsp(streams=2)


@pytest.fixture
def rtmp_stream(live_servers: LiveServers, live_clip: Path) -> tuple[NginxRtmp, Publisher]:
    """nginx-rtmp with ``live_clip`` published (looping, paced) at ``server.url("cam0")``."""
    server = live_servers.rtmp()
    return server, live_servers.publish(live_clip, server.url("cam0"))


# -- every test here is marked live; under CI=true a skipped live test fails the session -----------
_SKIPPED: list[str] = []
_LIVE_DIR = Path(__file__).resolve().parent


#: the fixtures that start servers: a test using one is a live test wherever it is
LIVE_FIXTURES = frozenset({"live_servers", "rtsp_server", "rtmp_stream"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("live") is not None:
            continue
        if item.path.resolve().is_relative_to(_LIVE_DIR) or LIVE_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.live)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    keywords = report.keywords
    if report.skipped and in_ci() and "live" in keywords:
        if "gpu" in keywords or "nvdec" in keywords or "live_optional" in keywords:
            return  # GPU tests skip on the CPU-only CI machine by design; live_optional may skip
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _SKIPPED.append(f"{report.nodeid}: {reason}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _SKIPPED and in_ci():
        print(f"\nCI=true: {len(_SKIPPED)} live-server test(s) skipped; they must run in CI:", file=sys.stderr)
        for line in _SKIPPED:
            print("  " + line, file=sys.stderr)
        if session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
