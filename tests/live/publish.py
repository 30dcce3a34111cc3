"""Push a file as a live stream with PyAV: remuxed (no re-encode), paced at its frame rate, looping.

Run by :class:`live.servers.Publisher` with the project's Python (``sys.executable``), so it works
wherever PyAV does (also on the GPU host, which has no ``ffmpeg`` tool)::

    python tests/live/publish.py --input clip.mp4 --output rtmp://127.0.0.1:1935/live/cam0 --format flv

:func:`pump` is also used in-process by ``http_server.py`` (progressive MPEG-TS to each HTTP client,
HLS segments). Looping offsets every timestamp by the clip's length per pass, so the output
timeline keeps rising; pacing sleeps until each packet's decode time on the wall clock. Prints
``PUBLISHING <index> <format>`` once output ``index`` is open (for RTMP: connected and
publishing). Several ``--output`` URLs publish the same file to each from one process (a thread
each, ``--stagger`` apart), which keeps a bench of 100+ streams to a few processes.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable

import av


def pump(input_path: str, open_output: Callable[[av.video.stream.VideoStream], av.container.OutputContainer], *,
         loop: bool = True, realtime: bool = True, stop: threading.Event | None = None,
         on_open: Callable[[], None] | None = None) -> int:
    """Copy the first video stream of ``input_path`` into the container ``open_output(in_stream)``
    returns (it must add one stream from the template); return the packets written.

    ``loop``: start again at the end (timestamps keep rising); ``realtime``: pace packets at the
    stream's rate; ``stop``: set to end. The output is closed on return.
    """
    out = None
    written = 0
    offset = 0  # added to every pts/dts, in the input stream's time base
    t0 = None
    first_dts = None
    try:
        while stop is None or not stop.is_set():
            with av.open(input_path) as inp:
                ist = inp.streams.video[0]
                if out is None:
                    out = open_output(ist)
                    ost = out.streams.video[0]
                    if on_open is not None:
                        on_open()
                tb = ist.time_base
                end = offset
                for pkt in inp.demux(ist):
                    if stop is not None and stop.is_set():
                        return written
                    if pkt.dts is None or pkt.size == 0:
                        continue
                    dts = pkt.dts + offset
                    pts = (pkt.pts if pkt.pts is not None else pkt.dts) + offset
                    end = max(end, pts + (pkt.duration or 0))
                    if realtime:
                        now = time.monotonic()
                        if t0 is None:
                            t0, first_dts = now, dts
                        delay = t0 + float((dts - first_dts) * tb) - now
                        if delay > 0:
                            if stop is not None:
                                if stop.wait(delay):
                                    return written
                            else:
                                time.sleep(delay)
                    pkt.pts, pkt.dts = pts, dts
                    pkt.time_base = tb
                    pkt.stream = ost
                    out.mux(pkt)
                    written += 1
                offset = end
            if not loop:
                break
        return written
    finally:
        if out is not None:
            try:
                out.close()
            except Exception:  # noqa: BLE001 - the peer may be gone already
                pass


def open_url_output(url: str, fmt: str, options: dict[str, str] | None = None):
    """An ``open_output`` for :func:`pump` writing to ``url`` (a path or a network URL)."""

    def _open(ist):
        out = av.open(url, "w", format=fmt, options=options or {})
        out.add_stream_from_template(ist)
        return out

    return _open


_PRINT = threading.Lock()


def _say(line: str) -> None:
    """One whole line on stdout (threads' prints must not interleave: the parent parses them)."""
    with _PRINT:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def _publish_one(index: int, url: str, args: argparse.Namespace, options: dict[str, str]) -> None:
    if args.stagger > 0:
        time.sleep(index * args.stagger)
    while True:
        try:
            n = pump(args.input, open_url_output(url, args.format, options), loop=not args.once,
                     realtime=not args.no_realtime,
                     on_open=lambda: _say(f"PUBLISHING {index} {args.format}"))
            _say(f"DONE {index} {n} packets")
            return
        except (OSError, av.FFmpegError) as exc:  # the message may hold the URL: print the type only
            if args.retry is None:
                _say(f"FAILED {index} {type(exc).__name__}")
                return
            _say(f"output {index} failed ({type(exc).__name__}); retrying in {args.retry} s")
            time.sleep(args.retry)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="push a file as paced, looping live streams (PyAV remux)")
    p.add_argument("--input", required=True)
    p.add_argument("--output", required=True, action="append",
                   help="a URL; repeat to publish the same file to several (one thread each)")
    p.add_argument("--format", default="flv", help="flv (RTMP), mpegts, rtsp, hls, ...")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="muxer/protocol option")
    p.add_argument("--once", action="store_true", help="do not loop")
    p.add_argument("--no-realtime", action="store_true", help="as fast as possible")
    p.add_argument("--retry", type=float, default=None, metavar="SECONDS",
                   help="when the output fails (server gone), open it again after SECONDS, forever")
    p.add_argument("--stagger", type=float, default=0.0, metavar="SECONDS",
                   help="start output i after i*SECONDS (keyframes of many streams not all at once)")
    args = p.parse_args(argv)
    options = dict(o.split("=", 1) for o in args.option)
    threads = [threading.Thread(target=_publish_one, args=(i, url, args, options), name=f"publish-{i}")
               for i, url in enumerate(args.output)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
