"""``vidpipe serve CONFIG.yaml``: run the cameras of a config file until Ctrl-C or SIGTERM.

Rows are written as they are detected (see ``vidpipe detect``); Ctrl-C or SIGTERM stop every
camera, write what was detected, finalise the tables (marked partial with the signal) and exit
130 (SIGINT) or 143 (SIGTERM). When every camera has ended (video files played as cameras) the
command ends by itself: exit 0, or 2 if a camera failed. ``--check`` validates the file, loads
the model, resolves the classes and exits (0 if all is well) without opening any camera.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading

from vidpipe.cli._event_args import add_event_args, serve_events
from vidpipe.cli._live_args import add_live_args, live_options
from vidpipe.cli._track_args import add_track_args, track_options

logger = logging.getLogger("vidpipe.cli")


def add_parser(sub, common) -> None:
    p = sub.add_parser(
        "serve",
        parents=[common],
        help="run the cameras of a YAML config until stopped",
        description=(
            "Run the cameras of CONFIG (a YAML file: cameras, model, thresholds, outputs, live options, "
            "metrics; see examples/serve.yaml) through one detector, writing each camera's rows as they "
            "are detected. Ctrl-C or SIGTERM stop cleanly with the tables finalised. Flags override the file."
        ),
    )
    p.add_argument("config", metavar="CONFIG", help="the YAML config file")
    p.add_argument("--check", action="store_true",
                   help="validate CONFIG, load the model, resolve the classes, then exit (no camera is opened)")
    p.add_argument("--preview", action="store_true",
                   help="serve the live preview page at http://HOST:PORT/preview beside the metrics "
                   "(needs --metrics-port or metrics: port:; same as metrics: preview: true)")
    p.add_argument("--table", choices=("auto", "on", "off"), default="auto",
                   help="live per-stream table on stderr (auto: on a terminal, off with -q; "
                   "off a terminal a log line per minute)")
    add_live_args(p)
    add_event_args(p)
    add_track_args(p)
    p.set_defaults(func=run, parser=p)


def _config(args: argparse.Namespace):
    from vidpipe.serve import MetricsConfig, load_config

    config = load_config(args.config)
    changes = {}
    live = live_options(args, base=config.live)
    if live != config.live:
        changes["live"] = live
    if (track := track_options(args, base=config.track)) != config.track:
        changes["track"] = track  # --track: every camera (but those with track: false)
    if args.metrics_host is not None and args.metrics_port is None and config.metrics.port is None:
        args.parser.error("--metrics-host needs --metrics-port PORT (or metrics: port: in the config)")
    preview = getattr(args, "preview", False)
    if preview and args.metrics_port is None and config.metrics.port is None:
        args.parser.error("--preview needs --metrics-port PORT (or metrics: port: in the config)")
    if args.metrics_port is not None or args.metrics_host is not None or preview:
        changes["metrics"] = MetricsConfig(
            port=args.metrics_port if args.metrics_port is not None else config.metrics.port,
            host=args.metrics_host or config.metrics.host,
            preview=preview or config.metrics.preview,
        )
    return serve_events(args, config.replace(**changes) if changes else config)


def _check(config, args: argparse.Namespace) -> int:
    """Validate everything that can be checked without opening a camera."""
    from vidpipe.serve.runner import build_detector_for, camera_spec

    detector = build_detector_for(config)
    from vidpipe.models.detector import resolve_classes

    lines = []
    for i, cam in enumerate(config.cameras):
        with config.located(("cameras", i, "url")):
            spec = camera_spec(cam)
        for key in ("classes", "blur"):
            if getattr(cam, key) is not None:
                with config.located(("cameras", i, key)):
                    resolve_classes(list(getattr(cam, key)), detector.names)
        table, fmt = config.output_of(cam).table_for(cam.name)
        state = "" if cam.enabled else " (disabled)"
        lines.append(f"  {cam.name}{state}: {spec.name} ({spec.kind}) -> {table} ({fmt})")
    metrics = (f"metrics on {config.metrics.host}:{config.metrics.port}" if config.metrics.port is not None
               else "no metrics endpoint")  # fmt: skip
    if not args.quiet:
        print(f"{args.config}: OK: {len(config.cameras)} camera(s), model {detector.model.info.name} on "
              f"{detector.device}, {metrics}")  # fmt: skip
        print("\n".join(lines))
    return 0


def run(args: argparse.Namespace) -> int:
    from vidpipe.errors import VidpipeError

    try:  # errors name the config file's line and key, not command-line flags
        config = _config(args)
        if args.check:
            return _check(config, args)
        return _serve(config, args)
    except VidpipeError as exc:
        if args.debug:
            logger.exception("error")
        print(f"vidpipe: error: {exc}", file=sys.stderr)
        return 2


def _serve(config, args: argparse.Namespace) -> int:
    from vidpipe.cli._live_table import LiveTable
    from vidpipe.cli._signals import StopOnSignal
    from vidpipe.serve import Server
    from vidpipe.sources.redact import redact_text

    server = Server(config)
    stop = threading.Event()

    def on_signal() -> None:  # signal-safe: sets flags only
        stop.set()
        if server.run is not None:
            server.run.stop()

    table = None
    if args.table != "off":  # on a terminal a table; elsewhere a log line per minute
        tty = args.table == "on" or (not args.quiet and sys.stderr.isatty())
        table = LiveTable(server.status, tty=tty)
    with StopOnSignal(on_signal) as interrupt:  # a signal while the model loads stops it right after
        server.start()
        try:
            if stop.is_set():
                server.run.stop()  # type: ignore[union-attr]
            if table is not None:
                table.start()
            while not stop.is_set() and not server.wait(0.5):
                if server.idle:  # every camera ended (files played as cameras) or failed
                    break
        except BaseException as exc:
            if table is not None:
                table.close()
            second = isinstance(exc, KeyboardInterrupt)
            server.stop(reason="interrupted (second signal)" if second else f"{type(exc).__name__}: {exc}")
            raise
        if table is not None:
            table.close()
        stopped_by = interrupt.signal_name
        summary = server.stop(reason=f"interrupted ({stopped_by})" if stopped_by else None)
    if not args.quiet:
        print(summary.format_text(errors=False), flush=True)
    if stopped_by is not None:
        print(f"vidpipe: {stopped_by}: stopped after {summary.frames} frames; the tables hold every one of them",
              file=sys.stderr)
        return interrupt.exit_code or 130
    bad = [s for s in summary.sources if s.status not in ("ok",)]
    for s in bad:
        print(f"vidpipe: error: {redact_text(s.error or s.source + ': ' + s.status)}", file=sys.stderr)
    return 2 if bad else 0
