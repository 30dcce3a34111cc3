"""A real HTTP server on loopback that records the webhook POSTs it gets (http.server in a thread)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Receiver:
    """``Receiver(port=0).start()``; ``.url``; ``.posts`` (list of (headers dict, parsed body));
    ``.answers`` statuses to answer in order (then 200); ``.delay_s`` per request."""

    def __init__(self, port: int = 0) -> None:
        self.posts: list[tuple[dict[str, str], object]] = []
        self.answers: list[int] = []
        self.requests = 0
        self.delay_s = 0.0
        self._cond = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if receiver.delay_s:
                    time.sleep(receiver.delay_s)
                with receiver._cond:
                    receiver.requests += 1
                    status = receiver.answers.pop(0) if receiver.answers else 200
                    if status == 200:
                        receiver.posts.append((dict(self.headers), json.loads(body)))
                    receiver._cond.notify_all()
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def start(self) -> "Receiver":
        self._thread.start()
        return self

    def url(self, path: str = "/hook", *, auth: str = "") -> str:
        return f"http://{auth + '@' if auth else ''}127.0.0.1:{self.port}{path}"

    @property
    def events(self) -> list[dict]:
        with self._cond:
            return [e for _, body in self.posts for e in body]  # type: ignore[union-attr]

    def wait_events(self, n: int, timeout: float = 10.0) -> list[dict]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while sum(len(b) for _, b in self.posts) < n:  # type: ignore[arg-type]
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"got {sum(len(b) for _, b in self.posts)} of {n} events in {timeout} s")
                self._cond.wait(left)
        return self.events

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
