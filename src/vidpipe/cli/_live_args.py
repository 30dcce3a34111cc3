"""The live-stream flags of ``vidpipe detect`` and ``vidpipe serve``, and what they switch on
while a run goes: the metrics endpoint and the live per-stream table.

Flags (each left out keeps the default, or ``serve``'s config value): ``--rtsp-transport``,
``--stall-timeout``, ``--realtime``, ``--batch-timeout``, ``--metrics-port``, ``--metrics-host``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import replace
from typing import TYPE_CHECKING

from vidpipe.sources.options import DECODE_LATENCIES, LiveOptions

if TYPE_CHECKING:
    from vidpipe.cli._live_table import LiveTable
    from vidpipe.metrics import MetricsServer
    from vidpipe.pipeline import DetectionRun
    from vidpipe.types import FrameResult

logger = logging.getLogger("vidpipe.cli")

__all__ = ["add_live_args", "live_options", "LiveWatch"]


def _bounded(kind: type, what: str, low: float, high: float):
    """An argparse type: ``kind(text)`` within ``[low, high]``, else a one-line error."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected {what} from {low:g} to {high:g}, got {text}")
        return value

    return parse


def _seconds(low: float, high: float):
    return _bounded(float, "seconds", low, high)


def _count(low: int, high: int):
    return _bounded(int, "a whole number", low, high)


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535 (0: any free port), got {text}")
    return value


def add_live_args(parser: argparse.ArgumentParser) -> None:
    """Add the live-stream flags (defaults ``None``: not given)."""
    g = parser.add_argument_group("live streams")
    g.add_argument("--rtsp-transport", choices=("tcp", "udp"), default=None,
                   help="RTSP over TCP (default: interleaved, survives NAT and loss) or UDP")
    g.add_argument("--stall-timeout", type=_seconds(0.01, 3600), default=None, metavar="SECONDS",
                   help="a stream that decodes no frame for this long is reconnected (default: 15)")
    g.add_argument("--realtime", action="store_true", default=None,
                   help="play video files at their own frame rate, as cameras (latest wins, drops counted)")
    g.add_argument("--batch-timeout", type=_seconds(0.0, 60), default=None, metavar="SECONDS",
                   help="longest wait for a fuller batch before the model runs on what it has "
                   "(default: about one frame interval of the fastest live stream)")
    g.add_argument("--queue-frames", type=_count(1, 1024), default=None, metavar="N",
                   help="decoded frames held per live stream while the model is busy; then the oldest is "
                   f"dropped (default: {LiveOptions.queue_frames})")
    g.add_argument("--decode-latency", choices=DECODE_LATENCIES, default=None,
                   help="when NVDEC hands a frame out (default: auto, as soon as decoded; 'low' for streams "
                   "with B-frames)")
    g.add_argument("--metrics-port", type=_port, default=None, metavar="PORT",
                   help="serve Prometheus metrics at http://HOST:PORT/metrics and JSON at /status")
    g.add_argument("--metrics-host", default=None, metavar="HOST",
                   help="address of the metrics endpoint (default: 127.0.0.1, this machine only)")


def live_options(args: argparse.Namespace, base: LiveOptions | None = None) -> LiveOptions:
    """``base`` (default: the defaults) with the flags given on the command line."""
    changes = {
        key: getattr(args, key)
        for key in ("rtsp_transport", "stall_timeout", "realtime", "batch_timeout", "queue_frames", "decode_latency")
        if getattr(args, key, None) is not None
    }
    return replace(base or LiveOptions(), **changes)


def any_live(det_run: "DetectionRun") -> bool:
    """Whether any input of ``det_run`` is read live (a stream, a webcam, a file with --realtime)."""
    if det_run.config.live.realtime:
        return True
    try:
        return any(s.get("kind") == "live" for s in det_run.status().get("streams", ()))
    except AttributeError:  # a run without status()
        return any(st.spec.kind == "live" for st in det_run.states)


class LiveWatch:
    """What ``--metrics-port`` and live inputs add to ``vidpipe detect``: the metrics endpoint
    and, when any input is live, the per-stream table (``table`` True: it replaces the bar).

    Use: ``observe(batch)`` for each delivered batch, ``close()`` at the end (idempotent).
    """

    def __init__(self, metrics: "MetricsServer | None", table: "LiveTable | None") -> None:
        self.metrics = metrics
        self._table = table
        self._observe = metrics.metrics.observe if metrics is not None else None

    @property
    def table(self) -> bool:
        return self._table is not None

    @classmethod
    def from_args(cls, args: argparse.Namespace, det_run: "DetectionRun", *, tty: bool | None = None) -> "LiveWatch":
        """Start what ``args`` and ``det_run``'s inputs ask for. ``tty``: whether stderr is a
        terminal the table may draw on (default: ``sys.stderr.isatty()`` and not ``-q``)."""
        metrics = None
        if args.metrics_host is not None and args.metrics_port is None:
            args.parser.error("--metrics-host needs --metrics-port PORT (the endpoint is off without a port)")
        if args.metrics_port is not None:
            from vidpipe.errors import ConfigError
            from vidpipe.metrics import serve_metrics

            try:
                metrics = serve_metrics(det_run, port=args.metrics_port, host=args.metrics_host or "127.0.0.1")
            except ConfigError as exc:
                args.parser.error(f"--metrics-port {args.metrics_port}: {exc}")
        table = None
        if any_live(det_run):
            from vidpipe.cli._live_table import LiveTable

            if tty is None:
                tty = sys.stderr.isatty() and not args.quiet and getattr(args, "progress", "auto") != "off"
            table = LiveTable(det_run.status, tty=tty).start()
        return cls(metrics, table)

    def observe(self, batch: "list[FrameResult]") -> None:
        if self._observe is not None:
            self._observe(batch)

    def close(self) -> None:
        if self._table is not None:
            self._table.close()
            self._table = None
        if self.metrics is not None:
            self.metrics.close()
            self.metrics = None

    def __enter__(self) -> "LiveWatch":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
