"""The preview's HTTP routes, served by :class:`vidpipe.metrics.MetricsServer` when it has a hub:

- ``/preview``: the page (:mod:`vidpipe.preview.page`);
- ``/preview/<stream_id>.mjpg``: the stream as MJPEG (``multipart/x-mixed-replace``), each part
  one JPEG, as fast as the hub encodes them (``max_fps``); at most ``max_clients`` at once
  (others get 503);
- ``/preview/<stream_id>.jpg``: one JPEG of the latest frame.

A stream is known when it has pushed a frame or ``/status`` lists it; else 404. An MJPEG response
ends when the client goes (noticed within ~0.25 s, also between frames) and at :meth:`close`,
which shuts the sockets of the responses still going.
"""

from __future__ import annotations

import logging
import re
import select
import socket
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from http.server import BaseHTTPRequestHandler

    from vidpipe.preview.hub import PreviewHub

logger = logging.getLogger(__name__)

__all__ = ["PreviewRoutes", "BOUNDARY"]

BOUNDARY = "vidpipe-frame"
_STREAM = re.compile(r"^/preview/(\d{1,9})\.(mjpg|jpg)$")
_TEXT = "text/plain; charset=utf-8"


def _client_gone(sock: socket.socket) -> bool:
    """Whether the peer closed the connection (readable with nothing to read)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


class PreviewRoutes:
    """Answers ``/preview`` requests from ``hub``'s frames and ``status()``'s streams.

    Args:
        hub: the frames.
        status: the run's status (``{"streams": [{"stream_id", ...}, ...]}``).
        max_clients: most MJPEG responses at once (default 8).
        snapshot_timeout: longest wait for a frame of ``/preview/<id>.jpg``, seconds.
    """

    def __init__(
        self,
        hub: "PreviewHub",
        *,
        status: Callable[[], Mapping[str, Any]],
        max_clients: int = 8,
        snapshot_timeout: float = 5.0,
    ) -> None:
        self.hub = hub
        self._status = status
        self.max_clients = max_clients
        self.snapshot_timeout = snapshot_timeout
        self._lock = threading.Lock()
        self._active: set[socket.socket] = set()
        self._closing = threading.Event()

    @property
    def clients(self) -> int:
        """MJPEG responses going now."""
        with self._lock:
            return len(self._active)

    def _streams(self) -> list[Mapping[str, Any]]:
        try:
            return list(self._status().get("streams", ()))
        except Exception as exc:  # noqa: BLE001 - the page still shows the frames
            logger.debug("preview: status failed: %s", exc)
            return []

    def _known(self, sid: int) -> bool:
        return self.hub.has(sid) or any(int(s.get("stream_id", -1)) == sid for s in self._streams())

    @staticmethod
    def _send(h: "BaseHTTPRequestHandler", code: int, body: bytes, ctype: str, head: bool, **headers: str) -> None:
        h.send_response(code)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(body)))
        h.send_header("Cache-Control", "no-store")
        for k, v in headers.items():
            h.send_header(k.replace("_", "-"), v)
        h.end_headers()
        if not head:
            h.wfile.write(body)

    def handle(self, h: "BaseHTTPRequestHandler", path: str, head: bool) -> None:
        """Answer ``path`` (``/preview`` or ``/preview/...``, query and trailing ``/`` stripped)."""
        try:
            self._handle(h, path, head)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            h.close_connection = True  # the client went away (a page reloaded, a tab closed)

    def _handle(self, h: "BaseHTTPRequestHandler", path: str, head: bool) -> None:
        from vidpipe.preview.page import preview_page

        if path == "/preview":
            streams = self._streams()
            listed = {int(s["stream_id"]) for s in streams}
            streams += [{"stream_id": sid, "source": f"stream {sid}"} for sid in self.hub.streams() if sid not in listed]
            self._send(h, 200, preview_page(streams), "text/html; charset=utf-8", head)
            return
        m = _STREAM.match(path)
        if m is None:
            self._send(h, 404, b"not found; try /preview, /preview/<stream_id>.mjpg or .jpg\n", _TEXT, head)
            return
        sid, kind = int(m.group(1)), m.group(2)
        if not self._known(sid):
            self._send(h, 404, f"no stream {sid} in this run; see /status\n".encode(), _TEXT, head)
            return
        if kind == "jpg":
            got = self.hub.snapshot(sid, timeout=self.snapshot_timeout)
            if got is None:
                self._send(h, 503, f"no frame of stream {sid} yet; try again\n".encode(), _TEXT, head, Retry_After="1")
                return
            jpeg, meta = got
            extra = {"X_Vidpipe_Frame": str(meta.index)} if meta is not None else {}
            self._send(h, 200, jpeg, "image/jpeg", head, **extra)
            return
        self._mjpeg(h, sid, head)

    def _mjpeg(self, h: "BaseHTTPRequestHandler", sid: int, head: bool) -> None:
        sock = h.connection
        with self._lock:
            full = self._closing.is_set() or len(self._active) >= self.max_clients
            if not full:
                self._active.add(sock)
        if full:
            why = "the server is closing" if self._closing.is_set() else f"{self.max_clients} preview clients already"
            self._send(h, 503, f"{why}; try again later\n".encode(), _TEXT, head, Retry_After="5")
            return
        try:
            h.close_connection = True
            h.send_response(200)
            h.send_header("Content-Type", f"multipart/x-mixed-replace; boundary={BOUNDARY}")
            h.send_header("Cache-Control", "no-store")
            h.send_header("Connection", "close")
            h.end_headers()
            if head:
                return
            with self.hub.watch(sid) as watcher:
                while not self._closing.is_set():
                    jpeg = watcher.next(timeout=0.25)
                    if jpeg is None:
                        if _client_gone(sock):
                            break
                        continue
                    index = "" if watcher.meta is None else f"X-Vidpipe-Frame: {watcher.meta.index}\r\n"
                    h.wfile.write(
                        f"--{BOUNDARY}\r\nContent-Type: image/jpeg\r\nContent-Length: {len(jpeg)}\r\n{index}\r\n".encode()
                        + jpeg + b"\r\n"
                    )
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, TimeoutError):
            pass  # the client went away
        except OSError as exc:
            if not self._closing.is_set():
                logger.debug("preview: stream %d: client connection error: %s", sid, exc)
        finally:
            with self._lock:
                self._active.discard(sock)

    def close(self) -> None:
        """End every MJPEG response now (their sockets are shut) and refuse new ones (idempotent)."""
        self._closing.set()
        with self._lock:
            socks = list(self._active)
        self.hub.wake()
        for sock in socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
