"""What ``vidpipe serve`` runs: :class:`ServeConfig` (cameras, model, thresholds, live options,
outputs, metrics), built from a YAML file by :func:`vidpipe.serve.load_config` or in Python.

Thresholds: the top-level ``conf`` and ``classes`` are what the model detects for every camera; a
camera's own ``conf`` / ``classes`` narrow that for its rows (a higher ``conf``, a subset of the
classes). A camera cannot ask for less than the model detects.

Outputs: a camera writes to its own ``output`` if it has one, else to the top-level ``output``.
An output is a table file (``.csv``, ``.jsonl``, ``.parquet``; cameras naming the same file share
it, rows interleaved as they are detected) or a folder (ending in ``/``: one table per camera,
``<folder>/<camera>.detections.<format>``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vidpipe.errors import ConfigError, VidpipeError
from vidpipe.serve import _fields as F
from vidpipe.sources.options import LiveOptions

if TYPE_CHECKING:
    from vidpipe.serve._yaml import Where
    from vidpipe.track.config import TrackConfig

__all__ = ["ServeConfig", "CameraConfig", "OutputConfig", "MetricsConfig", "EventsConfig", "WebhookConfig"]

_FORMATS = ("auto", "csv", "jsonl", "parquet")


def _check(owner: str, name: str, value: Any, validator: F.Validator) -> Any:
    try:
        return validator(value)
    except F.Invalid as exc:
        raise ConfigError(f"invalid {owner}{name}={F.shown(value)}: {exc}") from None


@dataclass(frozen=True)
class OutputConfig:
    """Where detections go.

    Attributes:
        path: a table file (``dets.csv``, ``.jsonl``, ``.parquet``) or a folder (ending in ``/``,
            or an existing folder): one table per camera, ``<camera>.detections.<format>``.
        format: ``"auto"`` (by the file's extension; CSV in a folder), ``"csv"``, ``"jsonl"``,
            ``"parquet"``.
        rotate: ``"none"`` or ``"hourly"``: one complete table per hour
            (``front.detections-2026-11-26T10.csv``), by capture time
            (:mod:`vidpipe.sinks.rotate`).
    """

    path: str = "detections/"
    format: str = "auto"
    rotate: str = "none"

    def __post_init__(self) -> None:
        _check("output.", "path", str(self.path) if isinstance(self.path, Path) else self.path, F.text)
        _check("output.", "format", self.format, F.choice(*_FORMATS))
        _check("output.", "rotate", self.rotate, F.choice("none", "hourly"))
        if isinstance(self.path, Path):
            object.__setattr__(self, "path", str(self.path) + ("/" if self.path.is_dir() else ""))
        if not self.folder and self.format == "auto":
            from vidpipe.sinks.paths import table_format

            table_format(self.path)  # raises ConfigError naming the extensions

    @property
    def folder(self) -> bool:
        """True when :attr:`path` is a folder (one table per camera)."""
        return self.path.endswith(("/", "\\")) or Path(self.path).expanduser().is_dir()

    def table_for(self, camera: str) -> tuple[Path, str]:
        """``(table path, format)`` of ``camera`` under this output."""
        if self.folder:
            fmt = "csv" if self.format == "auto" else self.format
            return Path(self.path).expanduser() / f"{camera}.detections.{fmt}", fmt
        return Path(self.path).expanduser(), self.format


@dataclass(frozen=True, repr=False)
class CameraConfig:
    """One camera (or any input played as one).

    Attributes:
        name: unique; names its table in a folder output and its metrics (``camera`` label).
        url: ``rtsp://``, ``rtmp://``, ``http(s)://``, ``srt://``, a webcam (``/dev/video0``, ``0``)
            or a video file (played at its own rate with ``live.realtime``). Shown redacted.
        classes / conf: narrow the top-level ``classes`` / raise ``conf`` for this camera.
        output: this camera's output instead of the top-level one.
        enabled: ``False`` keeps it in the config without starting it (start it later with
            :meth:`vidpipe.serve.Server.add_camera`).
        lines / zones: counting lines and zones in the camera's pixels (:mod:`vidpipe.zones`;
            a mapping ``name: [x1, y1, x2, y2, ...]`` or ``name: {points:, classes:, dwell:}``,
            ``Line``/``Zone`` objects, or ``"NAME=x1,y1,..."`` texts); need tracking.
        anchor: the box point that stands for the object for those (``bottom_center``, ...).
        track: track this camera's objects (``True``), or not (``False``); ``None``: as the
            top-level ``track`` says.
        annotate: the camera's annotated video (boxes, labels, track ids, its lines and zones):
            a file (``.mp4``, ``.mkv``, ...; fragmented MP4) or a live re-stream (``rtmp://``,
            ``rtsp://``; shown redacted); ``None``: none (:mod:`vidpipe.stages.annotate`).
        blur: classes (names or ids) whose boxes are blurred in the camera's video outputs (its
            ``annotate`` video and the preview page), as ``--blur`` does.
    """

    name: str
    url: str
    classes: tuple[str | int, ...] | None = None
    conf: float | None = None
    output: OutputConfig | None = None
    enabled: bool = True
    lines: tuple[Any, ...] = ()
    zones: tuple[Any, ...] = ()
    anchor: str = "bottom_center"
    track: bool | None = None
    annotate: str | None = None
    blur: tuple[str | int, ...] | None = None

    def __post_init__(self) -> None:
        _check("camera ", "name", self.name, F.camera_name)
        _zone_fields(self)
        _check(f"camera {self.name!r} ", "url", self.url, F.text)
        object.__setattr__(self, "classes", _check(f"camera {self.name!r} ", "classes", self.classes, F.classes))
        object.__setattr__(self, "blur", _check(f"camera {self.name!r} ", "blur", self.blur, F.classes))
        object.__setattr__(
            self, "conf", _check(f"camera {self.name!r} ", "conf", self.conf, F.number(0, 1, optional=True))
        )
        _check(f"camera {self.name!r} ", "enabled", self.enabled, F.boolean)
        if self.track is not None:
            _check(f"camera {self.name!r} ", "track", self.track, F.boolean)
        if self.annotate is not None:
            _check_annotate(self)
        if isinstance(self.output, (str, Path)):
            object.__setattr__(self, "output", OutputConfig(str(self.output)))
        elif self.output is not None and not isinstance(self.output, OutputConfig):
            raise ConfigError(
                f"invalid camera {self.name!r} output={F.shown(self.output)}: expected a path or an OutputConfig"
            )

    @property
    def source_name(self) -> str:
        """The URL as shown anywhere: credentials masked."""
        from vidpipe.sources.redact import redact_url

        return redact_url(self.url)

    def __repr__(self) -> str:
        from vidpipe.sources.redact import redact_url

        annotate = None if self.annotate is None else redact_url(str(self.annotate))
        return (
            f"CameraConfig(name={self.name!r}, url={self.source_name!r}, classes={self.classes!r}, "
            f"conf={self.conf!r}, output={self.output!r}, enabled={self.enabled!r}, track={self.track!r}, "
            f"annotate={annotate!r})"
        )


def _check_annotate(cam: "CameraConfig") -> None:
    """``cam.annotate``: a video file or an rtmp:// / rtsp:// URL (errors name the camera)."""
    from vidpipe.encode.targets import parse_target

    value = str(cam.annotate) if isinstance(cam.annotate, Path) else cam.annotate
    _check(f"camera {cam.name!r} ", "annotate", value, F.text)
    try:
        parse_target(value, codec="libx264")
    except ConfigError as exc:
        raise ConfigError(f"invalid camera {cam.name!r} annotate: {str(exc).removeprefix('target ')}") from None
    object.__setattr__(cam, "annotate", value)


def _zone_fields(cam: "CameraConfig") -> None:
    """``cam.lines`` / ``cam.zones`` as tuples of Line / Zone, ``anchor`` checked (errors name
    the camera and the key)."""
    from vidpipe.zones.anchors import ANCHORS

    _check(f"camera {cam.name!r} ", "anchor", cam.anchor, F.choice(*ANCHORS))
    if not (cam.lines or cam.zones):
        object.__setattr__(cam, "lines", ())
        object.__setattr__(cam, "zones", ())
        return
    from vidpipe.zones import Line, Zone
    from vidpipe.zones.config import line_from_value, parse_line, parse_zone, zone_from_value

    for key, cls, parse, from_value in (("lines", Line, parse_line, line_from_value),
                                        ("zones", Zone, parse_zone, zone_from_value)):
        value = getattr(cam, key)
        what = f"camera {cam.name!r} {key}"
        if isinstance(value, dict):
            items = tuple(from_value(k, v, what=what) for k, v in value.items())
        elif isinstance(value, (list, tuple)):
            items = tuple(v if isinstance(v, cls) else parse(v, what=what) if isinstance(v, str) else None
                          for v in value)
            if any(v is None for v in items):
                raise ConfigError(f"invalid {what}: expected {cls.__name__} objects or NAME=x1,y1,... texts")
        else:
            raise ConfigError(f"invalid {what}={F.shown(value)}: expected a mapping of names to points")
        names = [v.name for v in items]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup is not None:
            raise ConfigError(f"invalid {what}: the name {dup!r} is used twice")
        object.__setattr__(cam, key, items)


@dataclass(frozen=True)
class MetricsConfig:
    """The metrics endpoint: Prometheus text at ``/metrics``, JSON status at ``/status``.

    Attributes:
        port: TCP port; ``None``: no endpoint; ``0``: any free port (see ``Server.metrics_url``).
        host: address to listen on; ``127.0.0.1`` (this machine only) unless you mean otherwise.
        preview: also the live preview page at ``/preview`` (:mod:`vidpipe.preview`); needs a port.
    """

    port: int | None = None
    host: str = "127.0.0.1"
    preview: bool = False

    def __post_init__(self) -> None:
        _check("metrics.", "port", self.port, F.port)
        _check("metrics.", "host", self.host, F.text)
        _check("metrics.", "preview", self.preview, F.boolean)
        if self.preview and self.port is None:
            raise ConfigError("metrics.preview needs metrics.port (the page is served beside the metrics; 0: a free port)")


@dataclass(frozen=True, repr=False)
class WebhookConfig:
    """One webhook of ``events.webhooks`` (:class:`vidpipe.events.WebhookSink`).

    Attributes:
        url: ``http(s)://[user:password@]host[:port]/path`` (shown redacted).
        headers: request headers (e.g. ``Authorization: Bearer ${TOKEN}``); values never shown.
    """

    url: str
    headers: Any = field(default_factory=dict)

    def __post_init__(self) -> None:
        from vidpipe.events.webhook import split_credentials

        _check("events.webhooks.", "url", self.url, F.text)
        split_credentials(self.url)  # ConfigError naming the (redacted) URL
        headers = {} if self.headers is None else self.headers
        if not isinstance(headers, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and "\n" not in k + v for k, v in headers.items()
        ):
            raise ConfigError("invalid events.webhooks.headers: expected a mapping of header names to one-line texts")
        object.__setattr__(self, "headers", dict(headers))

    def __repr__(self) -> str:
        from vidpipe.sources.redact import redact_url

        return f"WebhookConfig(url={redact_url(self.url)!r}, headers={sorted(self.headers)!r})"


@dataclass(frozen=True, repr=False)
class EventsConfig:
    """Where the events of the run's stages go (zones and lines; :mod:`vidpipe.events`).

    Attributes:
        table: the events table (``.csv``, ``.jsonl``, ``.parquet``; one for every camera);
            ``"off"``: none; ``None`` (default): beside the top-level output (``dets.csv`` ->
            ``dets.events.csv``; a folder output: ``<folder>/events.<format>``) once there are
            events (from the start when a stage declares it emits them).
        format: ``"auto"`` (by extension), ``"csv"``, ``"jsonl"``, ``"parquet"``.
        rotate: ``"none"``/``"hourly"``; ``None``: as the top-level output.
        webhooks: URLs or :class:`WebhookConfig` (``url`` + ``headers``): JSON POSTs.
        mqtt: ``mqtt(s)://[user:password@]host[:port]/prefix``: each event on
            ``<prefix>/<stream_id>/<kind>`` (QoS 1); needs paho-mqtt.
    """

    table: str | None = None
    format: str = "auto"
    rotate: str | None = None
    webhooks: tuple[Any, ...] = ()
    mqtt: str | None = None

    def __post_init__(self) -> None:
        _check("events.", "table", self.table, F.optional_text)
        _check("events.", "format", self.format, F.choice(*_FORMATS))
        if self.rotate is not None:
            _check("events.", "rotate", self.rotate, F.choice("none", "hourly"))
        if self.table is not None and self.table != "off" and self.format == "auto":
            from vidpipe.sinks.paths import table_format

            table_format(self.table)  # raises ConfigError naming the extensions
        hooks = (self.webhooks,) if isinstance(self.webhooks, (str, dict, WebhookConfig)) else tuple(self.webhooks)
        out = []
        for h in hooks:
            if isinstance(h, str):
                h = WebhookConfig(h)
            elif isinstance(h, dict):
                h = WebhookConfig(h.get("url"), h.get("headers") or {})  # type: ignore[arg-type]
            elif not isinstance(h, WebhookConfig):
                raise ConfigError(f"invalid events.webhooks entry {F.shown(h)}: expected a URL or url: and headers:")
            out.append(h)
        object.__setattr__(self, "webhooks", tuple(out))
        if self.mqtt is not None:
            from vidpipe.events.mqtt import parse_mqtt_url

            _check("events.", "mqtt", self.mqtt, F.text)
            parse_mqtt_url(self.mqtt)

    def __repr__(self) -> str:
        from vidpipe.sources.redact import redact_url

        mqtt = None if self.mqtt is None else redact_url(self.mqtt)
        return (f"EventsConfig(table={self.table!r}, format={self.format!r}, rotate={self.rotate!r}, "
                f"webhooks={self.webhooks!r}, mqtt={mqtt!r})")


_TOP_VALIDATORS: dict[str, F.Validator] = {
    "model": F.text,
    "device": F.device,
    "decoder": F.text,
    "dtype": F.choice("auto", "fp16", "fp32"),
    "imgsz": F.number(32, 8192, integer=True, optional=True),
    "batch_size": F.number(1, 4096, integer=True),
    "conf": F.number(0, 1),
    "iou": F.number(0, 1),
    "max_det": F.number(1, 100000, integer=True),
    "agnostic": F.boolean,
    "classes": F.classes,
    "letterbox": F.choice("square", "rect"),
    "strict_gpu": F.boolean,
}


@dataclass(frozen=True)
class ServeConfig:
    """Everything ``vidpipe serve`` runs (see the module docstring for thresholds and outputs).

    Attributes:
        cameras: the cameras, names unique.
        model, device, decoder, dtype, imgsz, batch_size, conf, iou, max_det, agnostic, classes,
            letterbox, strict_gpu: as for :func:`vidpipe.detect`.
        live: how streams are read (:class:`~vidpipe.sources.options.LiveOptions`).
        output: where cameras without their own ``output`` write.
        metrics: the Prometheus / status endpoint.
        events: where the stages' events go (table, webhooks, MQTT).
        track: the tracker's options (:class:`~vidpipe.track.TrackConfig`) when every camera is
            tracked (a camera's ``track: false`` opts out); ``None``: only cameras with
            ``track: true`` are (with the default options). ``True`` or a dict of options are
            accepted and turned into a ``TrackConfig``. Tracked runs' tables get ``track_id``.
        where: lines of a YAML file's values (for messages naming the line); ``None`` in Python.
    """

    cameras: tuple[CameraConfig, ...] = ()
    model: str = "yolov3-tiny"
    device: str = "auto"
    decoder: str = "auto"
    dtype: str = "auto"
    imgsz: int | None = None
    batch_size: int = 32
    conf: float = 0.25
    iou: float = 0.45
    max_det: int = 300
    agnostic: bool = False
    classes: tuple[str | int, ...] | None = None
    letterbox: str = "square"
    strict_gpu: bool = False
    live: LiveOptions = field(default_factory=LiveOptions)
    output: OutputConfig = field(default_factory=OutputConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    events: EventsConfig = field(default_factory=EventsConfig)
    track: "TrackConfig | None" = None
    where: "Where | None" = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        for name, validator in _TOP_VALIDATORS.items():
            object.__setattr__(self, name, _check("", name, getattr(self, name), validator))
        object.__setattr__(self, "cameras", tuple(self.cameras))
        from vidpipe.track.config import track_config

        object.__setattr__(self, "track", track_config(self.track))  # type: ignore[arg-type]
        for kind, name in ((LiveOptions, "live"), (OutputConfig, "output"), (MetricsConfig, "metrics"),
                           (EventsConfig, "events")):
            if not isinstance(getattr(self, name), kind):
                raise ConfigError(f"invalid {name}={getattr(self, name)!r}: expected a {kind.__name__}")
        seen: dict[str, int] = {}
        for i, cam in enumerate(self.cameras):
            if not isinstance(cam, CameraConfig):
                raise ConfigError(f"invalid cameras[{i}]={cam!r}: expected a CameraConfig")
            if cam.name in seen:
                raise self.error(("cameras", i, "name"), f"the name {cam.name!r} is taken by cameras[{seen[cam.name]}]")
            seen[cam.name] = i
            self.check_camera(cam, ("cameras", i))

    # ----------------------------------------------------------------- helpers
    def check_camera(self, cam: CameraConfig, path: tuple = ()) -> None:
        """Raise ConfigError if ``cam`` asks for less than the model detects."""
        if cam.conf is not None and cam.conf < self.conf:
            raise self.error(
                path + ("conf",),
                f"camera {cam.name!r}: conf {cam.conf:g} is below the top-level conf {self.conf:g}; a camera "
                "can only raise the threshold (lower the top-level conf instead)",
            )
        if cam.classes is not None and self.classes is not None:
            top = {_norm(c) for c in self.classes}
            extra = [c for c in cam.classes if _norm(c) not in top]
            if extra:
                raise self.error(
                    path + ("classes",),
                    f"camera {cam.name!r}: classes {', '.join(map(str, extra))} are not among the top-level "
                    f"classes ({', '.join(map(str, self.classes))}); a camera can only narrow them",
                )

    def camera(self, name: str) -> CameraConfig | None:
        """The configured camera called ``name``."""
        return next((c for c in self.cameras if c.name == name), None)

    def tracks(self, cam: CameraConfig) -> bool:
        """Whether ``cam``'s objects are tracked (its own ``track``, else the top-level one; a
        camera with lines or zones always is: they count tracks)."""
        if cam.lines or cam.zones:
            return True
        return cam.track if cam.track is not None else self.track is not None

    @property
    def tracking(self) -> bool:
        """Whether any camera may be tracked (then tables have a ``track_id`` column)."""
        return self.track is not None or any(c.track or c.lines or c.zones for c in self.cameras)

    def output_of(self, cam: CameraConfig) -> OutputConfig:
        return cam.output if cam.output is not None else self.output

    def error(self, path: tuple, message: str) -> ConfigError:
        """A ConfigError naming ``path``'s file and line when this config came from a file."""
        if self.where is not None and path:
            return self.where.error(path, message)
        return ConfigError(message)

    @contextlib.contextmanager
    def located(self, path: tuple) -> Iterator[None]:
        """Re-raise vidpipe errors inside with ``path``'s file and line prefixed (a class name,
        a model file, ... found wrong only when the run is built); same exception type."""
        try:
            yield
        except VidpipeError as exc:
            if self.where is None:
                raise
            message = f"{self.where.at(path)}: {exc}"
            try:
                located = type(exc)(message)
            except Exception:  # noqa: BLE001 - an error type with another signature
                located = ConfigError(message)
            raise located from None

    def replace(self, **changes: Any) -> "ServeConfig":
        return replace(self, **changes)


def _norm(c: str | int) -> str:
    return str(c).strip().lower().replace("_", " ")


#: keys of each mapping of the YAML file (for unknown-key errors with a did-you-mean)
TOP_KEYS = tuple(f.name for f in fields(ServeConfig) if f.name != "where")
CAMERA_KEYS = tuple(f.name for f in fields(CameraConfig))
OUTPUT_KEYS = tuple(f.name for f in fields(OutputConfig))
METRICS_KEYS = tuple(f.name for f in fields(MetricsConfig))
EVENTS_KEYS = tuple(f.name for f in fields(EventsConfig))
LIVE_KEYS = tuple(f.name for f in fields(LiveOptions))
TOP_VALIDATORS = _TOP_VALIDATORS
