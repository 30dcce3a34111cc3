"""``serve.yaml`` -> :class:`~vidpipe.serve.config.ServeConfig`, every error naming the file, the
line and the key (``serve.yaml:12: cameras[1].conf: expected a number from 0 to 1, got 'high'``).

Unknown keys are errors (with the closest known key: a typo must not silently change nothing);
``${NAME}`` in values comes from the environment (see :mod:`vidpipe.serve._yaml`). Relative paths
(outputs, model files, video files played as cameras) are relative to the config file's folder.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vidpipe.errors import ConfigError
from vidpipe.serve import _fields as F
from vidpipe.serve._yaml import Where, load_marked
from vidpipe.serve.config import (
    CAMERA_KEYS,
    EVENTS_KEYS,
    LIVE_KEYS,
    METRICS_KEYS,
    OUTPUT_KEYS,
    TOP_KEYS,
    TOP_VALIDATORS,
    CameraConfig,
    EventsConfig,
    MetricsConfig,
    OutputConfig,
    ServeConfig,
)
from vidpipe.sources.options import DECODE_LATENCIES
from vidpipe.zones.anchors import ANCHORS

__all__ = ["load_config", "parse_config"]

_LIVE_VALIDATORS: dict[str, F.Validator] = {
    "rtsp_transport": F.choice("tcp", "udp"),
    "open_timeout": F.number(0.01, 3600),
    "read_timeout": F.number(0.01, 3600),
    "stall_timeout": F.number(0.01, 3600),
    "reconnect_min": F.number(0.01, 3600),
    "reconnect_max": F.number(0.01, 3600),
    "queue_frames": F.number(1, 1024, integer=True),
    "batch_timeout": F.number(0, 60, optional=True),
    "realtime": F.boolean,
    "processes": F.number(0, 64, integer=True, optional=True),
    "decode_latency": F.choice(*DECODE_LATENCIES),
}
_CAMERA_VALIDATORS: dict[str, F.Validator] = {
    "name": F.camera_name,
    "url": F.text,
    "classes": F.classes,
    "conf": F.number(0, 1, optional=True),
    "enabled": F.boolean,
    "anchor": F.choice(*ANCHORS),
    "track": F.boolean,
    "annotate": F.text,
    "blur": F.classes,
}


def load_config(path: "str | os.PathLike[str]", *, env: Mapping[str, str] | None = None) -> ServeConfig:
    """Read and validate a ``vidpipe serve`` YAML file.

    Args:
        path: the file.
        env: where ``${NAME}`` values come from (default: ``os.environ``).

    Raises:
        ConfigError: the file cannot be read, is not valid YAML, or a value is wrong; the
            message names the file, the line and the key.
    """
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a folder; expected a YAML config file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the config file ({exc})") from None
    return parse_config(text, file=str(path), base_dir=p.resolve().parent, env=env)


def parse_config(
    text: str, *, file: str = "<config>", base_dir: "str | os.PathLike[str] | None" = None,
    env: Mapping[str, str] | None = None,
) -> ServeConfig:
    """Validate YAML ``text`` (see :func:`load_config`); relative paths are taken from ``base_dir``
    (default: the current folder)."""
    data, where = load_marked(text, file, env=env)
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    return _Builder(where, base).config(data)


class _Builder:
    def __init__(self, where: Where, base: Path) -> None:
        self.where = where
        self.base = base

    # ------------------------------------------------------------- generic checks
    def mapping(self, value: Any, path: tuple, allowed: tuple[str, ...], what: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.where.error(path, f"expected {what} (a mapping of keys), got {_type(value)}")
        for key in value:
            if key not in allowed:
                close = _suggest(key, allowed)
                hint = f"; did you mean {close!r}?" if close else f"; known keys: {', '.join(allowed)}"
                raise self.where.error(path + (key,), f"unknown key {key!r}{hint}", key=True)
        return value

    def value(self, data: dict, path: tuple, key: str, validator: F.Validator) -> Any:
        try:
            return validator(data[key])
        except F.Invalid as exc:
            got = "a value from the environment" if self.where.from_env(path + (key,)) else F.shown(data[key])
            raise self.where.error(path + (key,), f"{exc}, got {got}") from None

    def checked(self, data: dict, path: tuple, validators: dict[str, F.Validator]) -> dict[str, Any]:
        return {k: self.value(data, path, k, validators[k]) for k in data if k in validators}

    def path(self, text: str) -> str:
        """A path relative to the config file's folder (a trailing ``/`` kept)."""
        p = Path(text).expanduser()
        if p.is_absolute():
            return text
        out = str(self.base / p)
        return out + "/" if text.endswith(("/", "\\")) and not out.endswith("/") else out

    def build(self, at: tuple, make: Any, /, **kwargs: Any) -> Any:
        """``make(**kwargs)``, its ConfigError re-raised with the line of ``at``."""
        try:
            return make(**kwargs)
        except ConfigError as exc:
            raise self.where.error(at, str(exc)) from None

    # ------------------------------------------------------------- sections
    def config(self, data: Any) -> ServeConfig:
        if data is None:
            raise ConfigError(f"{self.where.file}: the file is empty; it needs at least 'cameras:'")
        data = self.mapping(data, (), TOP_KEYS, "the config")
        if "cameras" not in data:
            raise self.where.error((), "no 'cameras:' list; add the cameras to run (name and url each)")
        kwargs = self.checked(data, (), TOP_VALIDATORS)
        if "model" in kwargs:
            kwargs["model"] = self.model(kwargs["model"])
        if "decoder" in kwargs:
            self.build(("decoder",), _check_decoder, name=kwargs["decoder"])
        kwargs["cameras"] = self.cameras(data["cameras"])
        if "live" in data:
            kwargs["live"] = self.live(data["live"])
        kwargs["output"] = self.output(data.get("output", OutputConfig().path), ("output",))
        if "metrics" in data:
            kwargs["metrics"] = self.metrics(data["metrics"])
        if "events" in data:
            kwargs["events"] = self.events(data["events"])
        if "track" in data:
            kwargs["track"] = self.track(data["track"])
        return ServeConfig(**kwargs, where=self.where)

    def track(self, value: Any) -> Any:
        """``track: true | false | {track_buffer: 2, ...}`` -> a TrackConfig or None."""
        from vidpipe.track.config import track_config

        path = ("track",)
        if not isinstance(value, (bool, dict)):
            raise self.where.error(path, f"expected true, false or tracker options (track_buffer: ...), got {_type(value)}")
        return self.build(path, track_config, value=value)

    def model(self, name: str) -> str:
        """A model file relative to the config's folder; a bundled name as is."""
        candidate = self.base / Path(name).expanduser()
        return str(candidate) if not Path(name).is_absolute() and candidate.exists() else name

    def cameras(self, value: Any) -> tuple[CameraConfig, ...]:
        path = ("cameras",)
        if not isinstance(value, list) or not value:
            got = "an empty list" if value == [] else _type(value)
            raise self.where.error(path, f"expected a list of cameras, each with name: and url:, got {got}")
        out = []
        for i, item in enumerate(value):
            cpath = path + (i,)
            item = self.mapping(item, cpath, CAMERA_KEYS, "a camera")
            for required in ("name", "url"):
                if required not in item:
                    raise self.where.error(cpath, f"camera without '{required}:'")
            kwargs = self.checked(item, cpath, _CAMERA_VALIDATORS)
            kwargs["url"] = self.url(kwargs["url"])
            if "output" in item:
                kwargs["output"] = self.output(item["output"], cpath + ("output",))
            if "annotate" in item:  # a video file (relative to the config's folder) or a live URL
                target = kwargs["annotate"]
                kwargs["annotate"] = target if "://" in target else self.path(target)
                self.build(cpath + ("annotate",), CameraConfig, name=kwargs["name"], url=kwargs["url"],
                           annotate=kwargs["annotate"])
            for key in ("lines", "zones"):
                if key in item:
                    kwargs[key] = self.geometry(item[key], cpath + (key,), key, kwargs["name"])
            out.append(self.build(cpath, CameraConfig, **kwargs))
        return tuple(out)

    def geometry(self, value: Any, path: tuple, key: str, camera: str) -> tuple[Any, ...]:
        """A camera's ``lines:`` or ``zones:`` (name -> points), each error at its own line."""
        from vidpipe.zones.config import line_from_value, zone_from_value

        example = "door: [100, 400, 500, 400]" if key == "lines" else "bay: [0, 0, 200, 0, 200, 200]"
        if not isinstance(value, dict) or not value:
            raise self.where.error(path, f"expected a mapping of names to points (e.g. {example}), got {_type(value)}")
        convert = line_from_value if key == "lines" else zone_from_value
        out = []
        for name, v in value.items():
            try:
                out.append(convert(name, v, what=f"camera {camera!r} {key}"))
            except ConfigError as exc:
                raise self.where.error(path + (name,), str(exc)) from None
        return tuple(out)

    def url(self, url: str) -> str:
        """A video file played as a camera, relative to the config's folder; URLs and devices as is."""
        if "://" in url or url.isdigit() or url.startswith("/dev/"):
            return url
        candidate = self.base / Path(url).expanduser()
        return str(candidate) if not Path(url).is_absolute() and candidate.exists() else url

    def output(self, value: Any, path: tuple) -> OutputConfig:
        if isinstance(value, str):
            value = {"path": value}
        data = self.mapping(value, path, OUTPUT_KEYS, "an output (a path, or path: and format:)")
        if "path" not in data:
            raise self.where.error(path, "output without 'path:' (a table file, or a folder ending in /)")
        p = self.value(data, path, "path", F.text)
        fmt, rotate = "auto", "none"
        if "format" in data:
            fmt = self.value(data, path, "format", F.choice("auto", "csv", "jsonl", "parquet"))
        if "rotate" in data:
            rotate = self.value(data, path, "rotate", F.choice("none", "hourly"))
        return self.build(path + ("path",), OutputConfig, path=self.path(p), format=fmt, rotate=rotate)

    def metrics(self, value: Any) -> MetricsConfig:
        path = ("metrics",)
        data = self.mapping(value, path, METRICS_KEYS, "metrics settings (port:, host:, preview:)")
        kwargs = self.checked(data, path, {"port": F.port, "host": F.text, "preview": F.boolean})
        return self.build(path, MetricsConfig, **kwargs)

    def events(self, value: Any) -> EventsConfig:
        """``events:`` (table:, format:, rotate:, webhooks:, mqtt:); secrets as ``${NAME}``."""
        from vidpipe.serve.config import WebhookConfig

        path = ("events",)
        data = self.mapping(value, path, EVENTS_KEYS, "events settings (table:, format:, rotate:, webhooks:, mqtt:)")
        kwargs: dict[str, Any] = {}
        if "table" in data:
            table = self.value(data, path, "table", F.text)
            kwargs["table"] = "off" if table.strip().lower() == "off" else self.path(table)
        if "format" in data:
            kwargs["format"] = self.value(data, path, "format", F.choice("auto", "csv", "jsonl", "parquet"))
        if "rotate" in data:
            kwargs["rotate"] = self.value(data, path, "rotate", F.choice("none", "hourly"))
        if "webhooks" in data:
            hooks = data["webhooks"]
            hooks = [hooks] if isinstance(hooks, (str, dict)) else hooks
            if not isinstance(hooks, list):
                raise self.where.error(path + ("webhooks",), f"expected a list of URLs (or url: and headers:), got "
                                       f"{_type(hooks)}")
            out = []
            for i, hook in enumerate(hooks):
                hp = path + ("webhooks", i)
                if isinstance(hook, str):
                    hook = {"url": hook}
                hook = self.mapping(hook, hp, ("url", "headers"), "a webhook (a URL, or url: and headers:)")
                if "url" not in hook:
                    raise self.where.error(hp, "webhook without 'url:'")
                url = self.value(hook, hp, "url", F.text)
                headers = hook.get("headers") or {}
                if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
                    raise self.where.error(hp + ("headers",), "expected a mapping of header names to texts "
                                           "(quote a number)")
                out.append(self.build(hp + ("url",), WebhookConfig, url=url, headers=headers))
            kwargs["webhooks"] = tuple(out)
        if "mqtt" in data:
            kwargs["mqtt"] = self.value(data, path, "mqtt", F.text)
            self.build(path + ("mqtt",), _check_mqtt, url=kwargs["mqtt"])
        return self.build(path, EventsConfig, **kwargs)

    def live(self, value: Any) -> Any:
        from vidpipe.sources.options import LiveOptions

        path = ("live",)
        data = self.mapping(value, path, LIVE_KEYS, "live options")
        kwargs = self.checked(data, path, _LIVE_VALIDATORS)
        return self.build(path, LiveOptions, **kwargs)


def _suggest(key: str, allowed: tuple[str, ...]) -> str | None:
    """The known key ``key`` was probably meant to be: a close spelling, or a shorter or longer
    form (``confidence`` -> ``conf``)."""
    close = difflib.get_close_matches(key.lower(), allowed, n=1, cutoff=0.6)
    if close:
        return close[0]
    low = key.lower()
    prefixed = [a for a in allowed if min(len(a), len(low)) >= 4 and (low.startswith(a) or a.startswith(low))]
    return max(prefixed, key=len) if prefixed else None


def _check_mqtt(url: str) -> None:
    from vidpipe.events.mqtt import parse_mqtt_url

    parse_mqtt_url(url)


def _check_decoder(name: str) -> None:
    from vidpipe.pipeline_config import PipelineConfig

    PipelineConfig(decoder=name)


def _type(value: Any) -> str:
    if value is None:
        return "nothing"
    return {dict: "a mapping", list: "a list", str: f"the text {F.shown(value)}"}.get(type(value), F.shown(value))
