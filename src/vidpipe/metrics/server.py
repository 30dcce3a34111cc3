"""The metrics endpoint of a run: ``/metrics`` (Prometheus text, from the run's own registry) and
``/status`` (the run's ``status()`` as JSON), on ``127.0.0.1`` unless told otherwise; with a
:class:`~vidpipe.preview.PreviewHub` also the live preview page ``/preview`` and its MJPEG
streams (:mod:`vidpipe.preview.routes`).

One small threaded HTTP server per run, in daemon threads; :meth:`MetricsServer.close` stops it
and frees the port (idempotent). Requests are not logged (a scrape every few seconds would drown
the log); anything but ``GET``/``HEAD`` of those paths (and ``/``) is a 404/405.
"""

from __future__ import annotations

import json
import logging
import math
import socket
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from vidpipe.errors import ConfigError

if TYPE_CHECKING:
    from vidpipe.metrics.collector import RunMetrics
    from vidpipe.preview.hub import PreviewHub
    from vidpipe.preview.routes import PreviewRoutes

logger = logging.getLogger(__name__)

__all__ = ["MetricsServer", "jsonable_status"]

_INDEX = b"vidpipe metrics: /metrics (Prometheus text), /status (JSON)\n"


def jsonable_status(value: Any) -> Any:
    """``value`` with non-finite floats as ``None`` (JSON has no NaN/Infinity)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): jsonable_status(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable_status(v) for v in value]
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], family: int, app: "MetricsServer") -> None:
        self.address_family = family
        self.app = app
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def _send(self, code: int, body: bytes, content_type: str, *, head: bool = False) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _route(self, head: bool) -> None:
        path = self.path.split("?", 1)[0].rstrip("/") or "/"
        app = self.server.app
        try:
            if path == "/metrics":
                body, ctype = app.metrics_text(self.headers.get("Accept", ""))
                self._send(200, body, ctype, head=head)
            elif path == "/status":
                self._send(200, app.status_json(), "application/json; charset=utf-8", head=head)
            elif path == "/":
                index = _INDEX if app.preview is None else _INDEX.replace(b" (JSON)", b" (JSON), /preview (live page)")
                self._send(200, index, "text/plain; charset=utf-8", head=head)
            elif app.preview is not None and (path == "/preview" or path.startswith("/preview/")):
                app.preview.handle(self, path, head)
            else:
                self._send(404, b"not found; try /metrics or /status\n", "text/plain; charset=utf-8", head=head)
        except Exception as exc:  # noqa: BLE001 - a failed scrape must not take the run down
            logger.warning("metrics endpoint: %s failed: %s", path, exc, exc_info=logger.isEnabledFor(logging.DEBUG))
            self._send(500, f"error: {type(exc).__name__}\n".encode(), "text/plain; charset=utf-8", head=head)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self._route(head=False)

    def do_HEAD(self) -> None:  # noqa: N802
        self._route(head=True)


class MetricsServer:
    """Serves ``metrics`` at ``http://host:port/metrics`` and ``status()`` at ``/status``.

    Args:
        metrics: the run's :class:`~vidpipe.metrics.collector.RunMetrics`.
        status: returns the JSON-able status dict (default: ``metrics.status``).
        host: address to listen on (default ``127.0.0.1``: this machine only).
        port: TCP port; ``0`` picks a free one (see :attr:`port`).
        preview: serve this hub's frames at ``/preview`` (or later: :meth:`attach_preview`).

    Raises:
        ConfigError: the address cannot be listened on (port taken, unknown host).
    """

    def __init__(
        self,
        metrics: "RunMetrics",
        *,
        status: Callable[[], Mapping[str, Any]] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        preview: "PreviewHub | None" = None,
    ) -> None:
        self.metrics = metrics
        self._status = status or metrics.status
        self.preview: "PreviewRoutes | None" = None
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
            family, _, _, _, sockaddr = infos[0]
            self._httpd = _Server((sockaddr[0], port), family, self)
        except OSError as exc:
            raise ConfigError(
                f"cannot serve metrics on {host}:{port} ({exc.strerror or exc}); choose another port "
                "(0 picks a free one) or host"
            ) from None
        self.host = host
        self.port: int = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.2}, name="vidpipe-metrics", daemon=True
        )
        self._thread.start()
        self._closed = False
        logger.info("metrics at %s (status at %s)", self.url, self.status_url)
        if preview is not None:
            self.attach_preview(preview)

    @property
    def url(self) -> str:
        """``http://host:port/metrics``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    @property
    def status_url(self) -> str:
        return self.url.removesuffix("/metrics") + "/status"

    @property
    def preview_url(self) -> str | None:
        """``http://host:port/preview``, or ``None`` without a preview hub."""
        return None if self.preview is None else self.url.removesuffix("/metrics") + "/preview"

    def attach_preview(self, hub: "PreviewHub", *, max_clients: int = 8) -> str:
        """Serve ``hub``'s frames at ``/preview`` from now on (at most ``max_clients`` MJPEG
        clients at once); returns :attr:`preview_url`. The hub stays the caller's to close."""
        from vidpipe.preview.routes import PreviewRoutes

        self.preview = PreviewRoutes(hub, status=self._status, max_clients=max_clients)
        return self.preview_url  # type: ignore[return-value]

    def metrics_text(self, accept: str = "") -> tuple[bytes, str]:
        """The exposition (Prometheus text, or OpenMetrics when the scraper asks for it)."""
        from prometheus_client.exposition import choose_encoder

        encoder, content_type = choose_encoder(accept)
        return encoder(self.metrics.registry), content_type

    def status_json(self) -> bytes:
        return json.dumps(jsonable_status(self._status()), allow_nan=False).encode()

    def close(self) -> None:
        """Stop serving and free the port (idempotent; waits at most a few seconds)."""
        if self._closed:
            return
        self._closed = True
        if self.preview is not None:
            self.preview.close()  # MJPEG responses end now, not at their next frame
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> "MetricsServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
