"""A real HTTP server on loopback that serves files only with HTTP Basic credentials.

``AuthHTTPServer(root, user, password)`` serves the files of ``root`` (GET and HEAD, with
``Content-Length``) to a request carrying ``Authorization: Basic <user:password>``, answers 401
with ``WWW-Authenticate`` otherwise (FFmpeg then retries with the URL's user info), and 404 for
a missing file. It records the ``Authorization`` values it saw, so a test can tell that the
credentials of the URL reached the server (the URL was opened with them, not with a redacted
copy).
"""

from __future__ import annotations

import base64
import http.server
import threading
from pathlib import Path


class AuthHTTPServer:
    def __init__(self, root: Path, user: str, password: str) -> None:
        self.root = Path(root)
        self.expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        self.seen: list[str] = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _serve(self, body: bool) -> None:
                auth = self.headers.get("Authorization")
                if auth:
                    owner.seen.append(auth)
                if auth != owner.expected:
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="cam"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                path = owner.root / self.path.lstrip("/").split("?")[0]
                if not path.is_file():
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                data = path.read_bytes()
                self.send_response(200)
                self.send_header("Content-Type", "video/mp2t")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if body:
                    self.wfile.write(data)

            def do_GET(self):  # noqa: N802
                self._serve(True)

            def do_HEAD(self):  # noqa: N802
                self._serve(False)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="auth-http", daemon=True)

    def __enter__(self) -> "AuthHTTPServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)

    @property
    def authorized(self) -> bool:
        """Whether a request carried the right credentials."""
        return self.expected in self.seen
