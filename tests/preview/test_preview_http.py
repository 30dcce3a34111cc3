"""The preview routes over real HTTP: MJPEG parts are JPEGs (decoded by OpenCV) of the pushed
frames, the snapshot, 404s, the client limit, a client going away, and close() while a client
streams."""

from __future__ import annotations

import http.client
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import numpy as np
import pytest

pytest.importorskip("prometheus_client")

from preview.mjpeg import decode, open_mjpeg, read_part, solid, stream_status, wait_for  # noqa: E402
from vidpipe.metrics import MetricsServer, RunMetrics  # noqa: E402
from vidpipe.preview import PreviewHub  # noqa: E402

COLORS = {0: (230, 30, 40), 1: (20, 60, 220)}


class Pusher:
    """Pushes solid frames of each stream's colour every 20 ms until stopped."""

    def __init__(self, hub: PreviewHub, colors: dict[int, tuple[int, int, int]]) -> None:
        self.colors = dict(colors)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(hub,), daemon=True)
        self._thread.start()

    def _run(self, hub: PreviewHub) -> None:
        while not self._stop.is_set():
            for sid, rgb in list(self.colors.items()):
                hub.push(sid, solid(rgb, 240, 320))
            self._stop.wait(0.02)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


@pytest.fixture
def served() -> Iterator[tuple[MetricsServer, PreviewHub, Pusher]]:
    status = {"streams": [stream_status(0, "a.mp4", fps=25.0), stream_status(1, "rtsp://cam/b"),
                          stream_status(2, "nothing-pushed.mp4")]}
    hub = PreviewHub()
    server = MetricsServer(RunMetrics(lambda: status), status=lambda: status, preview=hub)
    server.preview.max_clients = 3  # type: ignore[union-attr]
    pusher = Pusher(hub, COLORS)
    try:
        yield server, hub, pusher
    finally:
        pusher.stop()
        server.close()
        hub.close()


def _get(url: str) -> tuple[int, bytes, dict]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


def test_mjpeg_parts_are_jpegs_of_the_pushed_frames(served) -> None:
    server, hub, pusher = served
    resp = open_mjpeg(server.port, 1)
    try:
        assert resp.status == 200
        assert resp.getheader("Content-Type") == "multipart/x-mixed-replace; boundary=vidpipe-frame"
        for _ in range(3):
            headers, body = read_part(resp)
            assert headers["content-type"] == "image/jpeg"
            rgb = decode(body)
            assert rgb.shape == (240, 320, 3)
            assert np.abs(rgb.reshape(-1, 3).mean(0) - COLORS[1]).max() < 4
        pusher.colors[1] = (250, 250, 0)  # the stream changes: the next parts follow
        assert wait_for(lambda: np.abs(decode(read_part(resp)[1]).reshape(-1, 3).mean(0) - (250, 250, 0)).max() < 4,
                        timeout=5)
    finally:
        resp.close()


def test_snapshot_page_and_404s(served) -> None:
    server, _, _ = served
    base = server.url.removesuffix("/metrics")
    code, body, headers = _get(base + "/preview/0.jpg")
    assert code == 200 and headers["Content-Type"] == "image/jpeg"
    assert np.abs(decode(body).reshape(-1, 3).mean(0) - COLORS[0]).max() < 4
    code, page, headers = _get(server.preview_url)
    assert code == 200 and headers["Content-Type"].startswith("text/html")
    for sid in (0, 1, 2):
        assert f'src="/preview/{sid}.mjpg"'.encode() in page
    assert b"http://" not in page and b"https://" not in page  # no external assets
    assert _get(base + "/preview/7.jpg")[0] == 404  # not in this run
    assert _get(base + "/preview/7.mjpg")[0] == 404
    assert _get(base + "/preview/x.png")[0] == 404
    server.preview.snapshot_timeout = 0.3
    code, body, headers = _get(base + "/preview/2.jpg")  # listed, but no frame came: 503 after the wait
    assert code == 503 and headers.get("Retry-After") == "1"
    assert b"/preview" in _get(base + "/")[1]


def test_client_limit_and_a_client_going_away(served) -> None:
    server, _, _ = served
    routes = server.preview
    clients = [open_mjpeg(server.port, i % 2) for i in range(3)]
    try:
        assert all(c.status == 200 for c in clients)
        for c in clients:
            read_part(c)
        extra = open_mjpeg(server.port, 0)
        assert extra.status == 503 and "preview clients" in extra.read().decode()
        clients.pop().close()  # a browser tab closed: its slot frees promptly
        assert wait_for(lambda: routes.clients == 2, timeout=10)
        again = open_mjpeg(server.port, 0)
        assert again.status == 200
        clients.append(again)
    finally:
        for c in clients:
            c.close()
    assert wait_for(lambda: routes.clients == 0, timeout=10)


def test_a_client_of_a_still_stream_is_noticed_when_it_goes(served) -> None:
    server, hub, pusher = served
    resp = open_mjpeg(server.port, 2)  # listed, never pushed: no part comes
    assert resp.status == 200
    assert wait_for(lambda: hub.watching(2))
    resp.close()
    assert wait_for(lambda: server.preview.clients == 0 and not hub.watching(2), timeout=10)


def test_close_while_clients_stream_returns_promptly(served) -> None:
    server, _, _ = served
    clients = [open_mjpeg(server.port, 0), open_mjpeg(server.port, 2)]
    read_part(clients[0])
    t0 = time.monotonic()
    server.close()
    assert time.monotonic() - t0 < 5  # not waiting for the clients (a bound for a hang, not a timing)
    for c in clients:  # their responses end (EOF), nothing hangs
        t0 = time.monotonic()
        try:
            while c.read(65536):
                pass
        except (http.client.IncompleteRead, ConnectionError):
            pass
        assert time.monotonic() - t0 < 5
        c.close()
