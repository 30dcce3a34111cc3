"""The event-output flags of ``vidpipe detect`` and ``vidpipe serve``: ``--events``,
``--webhook``, ``--mqtt`` (see :mod:`vidpipe.events`).

- ``--events PATH``: the events table (one for the run; ``.csv``/``.jsonl``/``.parquet``);
  ``--events off``: none. Without it, ``vidpipe detect`` writes one beside each detection table
  (``out.csv`` -> ``out.events.csv``, ``video.detections.csv`` -> ``video.events.csv``) when the
  run's stages emit events, and ``vidpipe serve`` follows its config's ``events:`` block.
- ``--webhook URL`` (repeatable): POST the events as JSON lists to each URL; the header
  ``Authorization: <value of $VIDPIPE_WEBHOOK_AUTHORIZATION>`` is added when that variable is set
  (keeps a token out of the command line).
- ``--mqtt mqtt://[user:pass@]host[:port]/prefix``: publish each event to
  ``<prefix>/<stream_id>/<kind>`` (QoS 1).

Credentials in these URLs are never shown (logs, errors, summary, metadata); a command line is
visible to other users of the machine (``ps``): prefer ``${ENV}`` in a serve config for secrets.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vidpipe.events.outputs import EventOutputs

__all__ = ["add_event_args", "detect_events", "serve_events", "AUTH_ENV"]

AUTH_ENV = "VIDPIPE_WEBHOOK_AUTHORIZATION"


def _webhook(text: str) -> str:
    from vidpipe.errors import ConfigError
    from vidpipe.events.webhook import split_credentials

    try:
        split_credentials(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _mqtt(text: str) -> str:
    from vidpipe.errors import ConfigError
    from vidpipe.events.mqtt import parse_mqtt_url

    try:
        parse_mqtt_url(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _events(text: str) -> str:
    from vidpipe.errors import ConfigError
    from vidpipe.sinks.paths import table_format

    if text.lower() == "off":
        return "off"
    try:
        table_format(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def add_event_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("events (zone entered/left, line crossed, dwell; from the run's stages)")
    g.add_argument("--events", type=_events, default=None, metavar="PATH|off",
                   help="events table (.csv, .jsonl, .parquet), or off (default: beside each detection table, "
                   "out.csv -> out.events.csv, when the run has stages that emit events)")
    g.add_argument("--webhook", type=_webhook, action="append", default=[], metavar="URL",
                   help="POST events as JSON lists to URL (repeatable; https://user:pass@host/path sends basic "
                   f"auth; ${AUTH_ENV} sets an Authorization header)")
    g.add_argument("--mqtt", type=_mqtt, default=None, metavar="URL",
                   help="publish each event as JSON to an MQTT broker, mqtt://[user:pass@]host[:port]/prefix: "
                   "topic <prefix>/<stream_id>/<kind>, QoS 1 (needs paho-mqtt: pip install 'vidpipe[mqtt]')")


def _headers() -> dict[str, str] | None:
    value = os.environ.get(AUTH_ENV)
    return {"Authorization": value} if value else None


def detect_events(args: argparse.Namespace, det_run: Any, spec: Any) -> "EventOutputs | None":
    """The event outputs of a ``vidpipe detect`` run (``spec``: its :class:`OutputSpec`), or
    ``None`` when there is nothing to do."""
    from vidpipe.errors import ConfigError
    from vidpipe.events.outputs import EventOutputs, emits_events, events_path

    table = getattr(args, "events", None)
    fmt, table_for, single = "auto", None, None
    if table is not None and table != "off":
        path = single = Path(table).expanduser()
        table_for = lambda r: path  # noqa: E731 - one table for the run
    elif table is None and spec.mode == "single":
        path = single = events_path(spec.path)
        fmt, table_for = spec.format, (lambda r: path)
    elif table is None and spec.mode in ("beside", "folder"):
        fmt = "csv" if spec.format == "auto" else spec.format
        table_for = lambda r: events_path(spec.table_for(r.source))  # noqa: E731
    webhooks, mqtt = list(getattr(args, "webhook", []) or []), getattr(args, "mqtt", None)
    if table_for is None and not webhooks and not mqtt:
        return None
    eager = table not in (None, "off") or emits_events(det_run.stages.stages)
    try:
        events = EventOutputs(
            table_for=table_for, eager=eager,
            format=fmt, rotate=spec.rotate, live_of=lambda sid: det_run.kind_of(sid) == "live",
            webhooks=webhooks, mqtt=mqtt, headers=_headers(),
        )
    except ConfigError as exc:
        det_run.close()
        args.parser.error(str(exc))
    if single is not None and eager:  # one table for the run: it exists from the start
        live = any(det_run.kind_of(i) == "live" for i in range(len(det_run.states)))
        events.open_table(single, live=live)
    return events


def serve_events(args: argparse.Namespace, config: Any) -> Any:
    """``config`` with ``--events``/``--webhook``/``--mqtt`` applied over its ``events:`` block."""
    from dataclasses import replace

    ev = config.events
    changes: dict[str, Any] = {}
    if getattr(args, "events", None) is not None:
        changes["table"] = args.events
    if getattr(args, "webhook", None):
        headers = _headers() or {}
        changes["webhooks"] = tuple(ev.webhooks) + tuple({"url": u, "headers": headers} for u in args.webhook)
    if getattr(args, "mqtt", None):
        changes["mqtt"] = args.mqtt
    return config.replace(events=replace(ev, **changes)) if changes else config
