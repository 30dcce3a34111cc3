"""Publish a clip as live streams, the way a camera or an encoder pushes to a media server.

:func:`publish` remuxes (no re-encode: cheap enough for a hundred streams on a few cores) the
video packets of ``clip`` to each URL (``rtmp://`` as FLV, ``rtsp://`` as RTSP, ``srt://`` and
``udp://`` as MPEG-TS), paced at the clip's own rate on the monotonic clock and looped forever with
timestamps that keep increasing, one thread per stream, until ``stop`` is set. A stream whose server
goes away is reopened after a second (as a real encoder would). Packets that leave more than 33
or 100 ms after their time are counted (:meth:`Publisher.lateness`): a benchmark can tell a late
publisher (a busy machine, a server pushing back) from a slow reader.

Run as a program it publishes until SIGTERM or Ctrl-C::

    python -m vidpipe.bench.publish clip.mp4 rtmp://127.0.0.1:1935/live/cam0 rtmp://.../cam1

Started by :class:`~vidpipe.bench.publishers.PublisherProcesses`, it also ends when its parent
dies, by any signal (:mod:`vidpipe.lifetime.child`); then SIGTERM and Ctrl-C are the parent's to
give (SIGTERM ends it, Ctrl-C at a terminal is ignored). With ``VIDPIPE_PUBLISH_STATUS=FILE`` in
its environment it writes :meth:`Publisher.lateness` there as JSON twice a second.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence

from vidpipe.sources.redact import redact_url

__all__ = ["publish", "Publisher"]

logger = logging.getLogger(__name__)

#: lateness counted by :meth:`Publisher.lateness` (seconds after a packet's time)
LATE_S = (0.033, 0.1)
#: environment variable: where the program writes its lateness counts (JSON)
STATUS_ENV = "VIDPIPE_PUBLISH_STATUS"

_FORMATS = {"rtmp": "flv", "rtmps": "flv", "rtsp": "rtsp", "srt": "mpegts", "udp": "mpegts", "tcp": "mpegts"}


def _read_packets(clip: str) -> tuple[list[tuple[int, int, bytes, bool]], object, float, int]:
    """The clip's video packets ``(pts, dts, data, key)``, its time base, the loop span in
    seconds and in time-base units."""
    import av

    with av.open(clip) as inp:
        s = inp.streams.video[0]
        tb = s.time_base
        packets = [(p.pts, p.dts, bytes(p), p.is_keyframe) for p in inp.demux(s) if p.size and p.pts is not None]
    if not packets:
        raise ValueError(f"{clip}: no video packets")
    packets.sort(key=lambda p: p[1] if p[1] is not None else p[0])
    pts = sorted(p[0] for p in packets)
    step = pts[1] - pts[0] if len(pts) > 1 else 1
    span = pts[-1] - pts[0] + step
    return packets, tb, float(span * tb), span


class Publisher:
    """Streams ``clip`` to ``urls`` on background threads until :meth:`stop`."""

    def __init__(self, clip: str, urls: Sequence[str]) -> None:
        self.clip = str(clip)
        self.urls = list(urls)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.packets_sent = [0] * len(self.urls)
        self.reopens = [0] * len(self.urls)
        self.late = [[0] * len(LATE_S) for _ in self.urls]  # per stream: packets sent after each of LATE_S

    def lateness(self) -> dict[str, int]:
        """Packets sent so far, and those that left more than 33 / 100 ms after their time."""
        out = {"packets": sum(self.packets_sent)}
        for k, limit in enumerate(LATE_S):
            out[f"late_{round(limit * 1000)}ms"] = sum(row[k] for row in self.late)
        return out

    def start(self) -> "Publisher":
        data = _read_packets(self.clip)
        for i, url in enumerate(self.urls):
            t = threading.Thread(target=self._run, args=(i, url, data), name=f"publish-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=5)

    def wait(self) -> None:
        while not self._stop.wait(0.5):
            pass

    def _run(self, i: int, url: str, data) -> None:
        import av

        packets, tb, span_s, span = data
        fmt = _FORMATS.get(url.partition("://")[0].lower())
        first = packets[0][0]
        t0 = time.monotonic()
        loop = 0
        while not self._stop.is_set():
            try:
                options = {"rtsp_transport": "tcp"} if fmt == "rtsp" else {}
                with av.open(url, "w", format=fmt, options=options, timeout=(5.0, 5.0)) as out:
                    with av.open(self.clip) as template:
                        s_out = out.add_stream_from_template(template.streams.video[0])
                    while not self._stop.is_set():
                        shift = loop * span
                        for pts, dts, payload, key in packets:
                            due = t0 + loop * span_s + float((pts - first) * tb)
                            delay = due - time.monotonic()
                            if delay > 0 and self._stop.wait(delay):
                                return
                            p = av.Packet(payload)
                            p.pts, p.dts = pts + shift, (dts if dts is not None else pts) + shift
                            p.time_base, p.stream, p.is_keyframe = tb, s_out, key
                            out.mux(p)
                            self.packets_sent[i] += 1
                            late = time.monotonic() - due
                            for k, limit in enumerate(LATE_S):
                                if late > limit:
                                    self.late[i][k] += 1
                        loop += 1
            except Exception as exc:  # noqa: BLE001 - a publisher outlives its server, as encoders do
                if self._stop.is_set():
                    return
                self.reopens[i] += 1
                logger.info("publisher %s: %s; reopening in 1 s", redact_url(url), exc)
                # restart on a keyframe boundary, in step with the clock
                loop = int((time.monotonic() - t0) // span_s) + 1
                self._stop.wait(1.0)


def publish(clip: str, urls: Sequence[str]) -> Publisher:
    """Start publishing ``clip`` to every URL; call ``.stop()`` on the result to end."""
    return Publisher(clip, urls).start()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2:
        print("usage: python -m vidpipe.bench.publish CLIP URL [URL ...]", file=sys.stderr)
        return 2
    from vidpipe.lifetime.child import watch_from_env

    # first, before any thread: a keeper's child ends with its parent (SIGTERM too: see there)
    watched = watch_from_env() is not None
    logging.basicConfig(level=logging.WARNING, format="publish: %(message)s")
    pub = publish(args[0], args[1:])
    if not watched:
        stop = lambda *_: pub._stop.set()  # noqa: E731
        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
    print("publishing", len(args) - 1, "streams", flush=True)
    status = os.environ.get(STATUS_ENV)
    if status:
        threading.Thread(target=_write_status, args=(pub, status), name="publish-status", daemon=True).start()
    pub.wait()
    pub.stop()
    return 0


def _write_status(pub: Publisher, path: str) -> None:
    """Write ``pub.lateness()`` to ``path`` (whole files only: written beside it, then renamed)."""
    tmp = f"{path}.tmp"
    while not pub._stop.wait(0.5):
        try:
            with open(tmp, "w") as f:
                json.dump(pub.lateness(), f)
            os.replace(tmp, path)
        except OSError as exc:  # the folder went away: the bench is ending
            logger.debug("publisher status not written: %s", exc)
            return


if __name__ == "__main__":
    sys.exit(main())
