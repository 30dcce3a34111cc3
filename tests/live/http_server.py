"""An HTTP server for the live tests: progressive MPEG-TS and HLS, from files, paced and looping.

Run by :class:`live.servers.HttpStreamServer` with the project's Python (PyAV)::

    python tests/live/http_server.py --port 8080 --file cam0=clip.mp4 --hls-dir /tmp/hls

For each ``--file NAME=PATH``:

- ``GET /NAME.ts``: an MPEG-TS of the file, remuxed for this client alone, paced at its frame
  rate and looping (a progressive stream without an end, like an HTTP camera);
- ``GET /hls/NAME.m3u8``: a live HLS playlist (1 s segments, 6 listed, old ones deleted) that
  one writer thread keeps appending to from the start; its media sequence numbers start at the
  Unix time, so after a restart they keep rising and a client's reload does not go back.

Prints ``READY <port>`` when listening and every playlist has at least ``--hls-min-segments``.
"""

from __future__ import annotations

import argparse
import functools
import os
import signal
import sys
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from publish import open_url_output, pump  # noqa: E402


class Handler(SimpleHTTPRequestHandler):
    files: dict[str, str] = {}
    stop: threading.Event
    extensions_map = {**SimpleHTTPRequestHandler.extensions_map,
                      ".m3u8": "application/vnd.apple.mpegurl", ".ts": "video/mp2t"}

    def log_message(self, fmt: str, *args) -> None:  # quiet: the log file is for errors
        pass

    def do_GET(self) -> None:  # noqa: N802
        name = self.path.lstrip("/").split("?", 1)[0]
        if name.endswith(".ts") and name[:-3] in self.files:
            self._stream_ts(self.files[name[:-3]])
            return
        if self.path.startswith("/hls/"):
            super().do_GET()
            return
        self.send_error(404)

    def _stream_ts(self, path: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "video/mp2t")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        import av

        def _open(ist):
            out = av.open(self.wfile, "w", format="mpegts")
            out.add_stream_from_template(ist)
            return out

        try:
            pump(path, _open, loop=True, realtime=True, stop=self.stop)
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass  # the client went away


def _hls_writer(name: str, path: str, folder: Path, stop: threading.Event) -> None:
    options = {"hls_time": "1", "hls_list_size": "6", "hls_flags": "delete_segments+independent_segments",
               "hls_start_number_source": "epoch", "hls_segment_filename": str(folder / f"{name}_%d.ts")}
    pump(path, open_url_output(str(folder / f"{name}.m3u8"), "hls", options), loop=True, realtime=True, stop=stop)


def _segments(playlist: Path) -> int:
    try:
        return sum(1 for line in playlist.read_text().splitlines() if line.endswith(".ts"))
    except OSError:
        return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="progressive MPEG-TS and HLS over HTTP from files")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--file", action="append", default=[], metavar="NAME=PATH")
    p.add_argument("--hls-dir", required=True)
    p.add_argument("--hls-min-segments", type=int, default=2)
    p.add_argument("--no-hls", action="store_true")
    args = p.parse_args(argv)
    files = dict(spec.split("=", 1) for spec in args.file)
    stop = threading.Event()
    hls = Path(args.hls_dir) / "hls"
    hls.mkdir(parents=True, exist_ok=True)
    handler = functools.partial(type("H", (Handler,), {"files": files, "stop": stop}), directory=args.hls_dir)
    httpd = ThreadingHTTPServer((args.host, args.port), handler)
    httpd.daemon_threads = True
    writers = []
    if not args.no_hls:
        for name, path in files.items():
            t = threading.Thread(target=_hls_writer, args=(name, path, hls, stop), daemon=True, name=f"hls-{name}")
            t.start()
            writers.append(t)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=httpd.shutdown, daemon=True).start())
    server = threading.Thread(target=httpd.serve_forever, daemon=True, name="http")
    server.start()
    deadline = time.monotonic() + 30
    while not args.no_hls and any(_segments(hls / f"{n}.m3u8") < args.hls_min_segments for n in files):
        if time.monotonic() > deadline or not all(t.is_alive() for t in writers):
            print("HLS writers did not produce segments", file=sys.stderr, flush=True)
            return 2
        time.sleep(0.05)
    print(f"READY {httpd.server_address[1]}", flush=True)
    server.join()
    stop.set()
    return 0


if __name__ == "__main__":
    sys.exit(main())
