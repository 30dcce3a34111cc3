"""Parse a Darknet ``.cfg`` file into typed, validated sections.

Covers the layer types of yolov3-tiny, yolov3, yolov4-tiny and yolov4 at inference time:
``[convolutional]``, ``[maxpool]``, ``[route]``, ``[shortcut]``, ``[upsample]`` and ``[yolo]``
(plus the leading ``[net]``). Defaults follow Darknet's ``parse_*`` functions in
``src/parser.c`` (e.g. a convolution's activation defaults to ``logistic``, a maxpool's padding
to ``size - 1``). Every error is a :class:`~vidpipe.errors.ModelError` naming the file and line.

Layer indices exclude ``[net]``: the first layer after it is layer 0, as in Darknet. Relative
``route``/``shortcut`` indices are resolved to absolute ones here.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from vidpipe.errors import ModelError
from vidpipe.models.darknet.anchors import anchor_use_warning

__all__ = [
    "ACTIVATIONS",
    "ConvSection",
    "DarknetCfg",
    "LayerSection",
    "MaxpoolSection",
    "NetSection",
    "RouteSection",
    "ShortcutSection",
    "UpsampleSection",
    "YoloSection",
    "parse_cfg",
    "read_cfg",
]

logger = logging.getLogger(__name__)

ACTIVATIONS: tuple[str, ...] = ("leaky", "linear", "relu", "mish", "swish", "logistic")
_HEADER = re.compile(r"^\[\s*([A-Za-z_]+)\s*\]$")


@dataclass(frozen=True)
class NetSection:
    """``[net]``: the input the network was built for (``height x width x channels``)."""

    line: int
    width: int = 416
    height: int = 416
    channels: int = 3


@dataclass(frozen=True)
class LayerSection:
    """Base of every layer section; ``line`` is where its ``[header]`` is (1-based)."""

    kind: ClassVar[str] = ""
    line: int
    index: int


@dataclass(frozen=True)
class ConvSection(LayerSection):
    kind: ClassVar[str] = "convolutional"
    filters: int = 1
    size: int = 1
    stride: int = 1
    padding: int = 0
    groups: int = 1
    dilation: int = 1
    batch_normalize: bool = False
    activation: str = "logistic"


@dataclass(frozen=True)
class MaxpoolSection(LayerSection):
    """Darknet pads ``padding // 2`` left/top and the rest right/bottom (so size 2 stride 1 pads
    right/bottom by one), with the padded cells ignored by the max."""

    kind: ClassVar[str] = "maxpool"
    size: int = 1
    stride: int = 1
    padding: int = 0


@dataclass(frozen=True)
class RouteSection(LayerSection):
    """Concatenates ``layers`` (absolute indices) along channels; with ``groups > 1`` each input
    contributes only its ``group_id``-th channel slice (yolov4-tiny's CSP blocks)."""

    kind: ClassVar[str] = "route"
    layers: tuple[int, ...] = ()
    groups: int = 1
    group_id: int = 0


@dataclass(frozen=True)
class ShortcutSection(LayerSection):
    """Adds the previous layer's output and ``sources`` (absolute indices), then ``activation``."""

    kind: ClassVar[str] = "shortcut"
    sources: tuple[int, ...] = ()
    activation: str = "linear"


@dataclass(frozen=True)
class UpsampleSection(LayerSection):
    kind: ClassVar[str] = "upsample"
    stride: int = 2
    scale: float = 1.0


@dataclass(frozen=True)
class YoloSection(LayerSection):
    """A YOLO output: ``anchors[m]`` for ``m`` in ``mask``, ``classes`` class scores per anchor.

    ``scale_x_y`` (YOLOv4) stretches the centre offsets: ``sigmoid(t) * s - (s - 1) / 2``.
    """

    kind: ClassVar[str] = "yolo"
    mask: tuple[int, ...] = ()
    anchors: tuple[tuple[float, float], ...] = ()
    classes: int = 20
    scale_x_y: float = 1.0

    @property
    def masked_anchors(self) -> tuple[tuple[float, float], ...]:
        return tuple(self.anchors[m] for m in self.mask)


@dataclass(frozen=True)
class DarknetCfg:
    """A parsed cfg: the ``[net]`` section, the layers in order, and the text it came from."""

    source: str
    net: NetSection
    layers: tuple[LayerSection, ...]
    text: str

    def __repr__(self) -> str:
        n = self.net
        return (
            f"DarknetCfg(source={self.source!r}, layers={len(self.layers)}, classes={self.num_classes}, "
            f"input={n.height}x{n.width}x{n.channels})"
        )

    @property
    def yolo_layers(self) -> tuple[YoloSection, ...]:
        return tuple(s for s in self.layers if isinstance(s, YoloSection))

    @property
    def num_classes(self) -> int:
        yolos = self.yolo_layers
        return yolos[0].classes if yolos else 0


class _Raw:
    """One section as read: its name, header line and ``key -> (value, line)``."""

    def __init__(self, name: str, line: int) -> None:
        self.name = name
        self.line = line
        self.opts: dict[str, tuple[str, int]] = {}


class _Reader:
    """Typed access to one raw section, raising ModelError with ``file:line``."""

    def __init__(self, source: str, raw: _Raw) -> None:
        self.source = source
        self.raw = raw

    def error(self, message: str, line: int | None = None) -> ModelError:
        where = f"{self.source}:{line if line is not None else self.raw.line}"
        return ModelError(f"{where}: [{self.raw.name}] {message}")

    def has(self, key: str) -> bool:
        return key in self.raw.opts

    def text(self, key: str, default: str) -> str:
        return self.raw.opts[key][0] if key in self.raw.opts else default

    def integer(self, key: str, default: int, *, low: int | None = None) -> int:
        if key not in self.raw.opts:
            return default
        value, line = self.raw.opts[key]
        try:
            out = int(value)
        except ValueError:
            raise self.error(f"{key}={value!r} is not an integer", line) from None
        if low is not None and out < low:
            raise self.error(f"{key}={out} must be >= {low}", line)
        return out

    def number(self, key: str, default: float) -> float:
        if key not in self.raw.opts:
            return default
        value, line = self.raw.opts[key]
        try:
            return float(value)
        except ValueError:
            raise self.error(f"{key}={value!r} is not a number", line) from None

    def ints(self, key: str) -> tuple[int, ...] | None:
        if key not in self.raw.opts:
            return None
        value, line = self.raw.opts[key]
        try:
            return tuple(int(v) for v in value.split(",") if v.strip())
        except ValueError:
            raise self.error(f"{key}={value!r} is not a comma-separated list of integers", line) from None

    def floats(self, key: str) -> tuple[float, ...] | None:
        if key not in self.raw.opts:
            return None
        value, line = self.raw.opts[key]
        try:
            return tuple(float(v) for v in value.split(",") if v.strip())
        except ValueError:
            raise self.error(f"{key}={value!r} is not a comma-separated list of numbers", line) from None

    def activation(self, key: str, default: str) -> str:
        act = self.text(key, default).strip().lower()
        if act not in ACTIVATIONS:
            line = self.raw.opts[key][1] if key in self.raw.opts else None
            raise self.error(f"{key}={act!r} is not supported; expected one of {', '.join(ACTIVATIONS)}", line)
        return act

    def refuse(self, key: str, default: str, why: str) -> None:
        """Error if ``key`` is set to anything but ``default`` (a feature vidpipe does not run)."""
        if key in self.raw.opts and self.raw.opts[key][0].strip() != default:
            value, line = self.raw.opts[key]
            raise self.error(f"{key}={value} is not supported ({why})", line)

    def index(self, key: str, rel: int, current: int) -> int:
        """Resolve a layer reference: negative is relative to ``current``, else absolute."""
        absolute = current + rel if rel < 0 else rel
        if not 0 <= absolute < current:
            line = self.raw.opts[key][1] if key in self.raw.opts else None
            allowed = f"can only use layers 0..{current - 1}" if current else "is the first layer"
            raise self.error(f"{key} refers to layer {rel} (absolute {absolute}), but layer {current} {allowed}", line)
        return absolute


def _split(text: str, source: str) -> list[_Raw]:
    sections: list[_Raw] = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].split(";", 1)[0].strip()
        if not line:
            continue
        header = _HEADER.match(line)
        if header:
            sections.append(_Raw(header.group(1).lower(), number))
            continue
        if line.startswith("["):
            raise ModelError(f"{source}:{number}: malformed section header {line!r}")
        if "=" not in line:
            raise ModelError(f"{source}:{number}: expected 'key=value' or '[section]', got {line!r}")
        if not sections:
            raise ModelError(f"{source}:{number}: option {line!r} before the first [section]")
        key, value = (part.strip() for part in line.split("=", 1))
        sections[-1].opts[key.lower()] = (value, number)
    return sections


def _conv(r: _Reader, i: int) -> ConvSection:
    r.refuse("binary", "0", "XNOR/binary convolutions")
    r.refuse("xnor", "0", "XNOR/binary convolutions")
    r.refuse("deform", "0", "deformable convolutions")
    r.refuse("antialiasing", "0", "anti-aliased convolutions")
    if r.has("stride_x") or r.has("stride_y"):
        sx, sy = r.integer("stride_x", -1), r.integer("stride_y", -1)
        if sx != sy:
            raise r.error(f"stride_x={sx} and stride_y={sy} differ; only square strides are supported")
    size = r.integer("size", 1, low=1)
    pad = r.integer("pad", 0)
    padding = size // 2 if pad else r.integer("padding", 0, low=0)
    stride = r.integer("stride", 1, low=1)
    if r.has("stride_x"):
        stride = r.integer("stride_x", stride, low=1)
    return ConvSection(
        line=r.raw.line,
        index=i,
        filters=r.integer("filters", 1, low=1),
        size=size,
        stride=stride,
        padding=padding,
        groups=r.integer("groups", 1, low=1),
        dilation=r.integer("dilation", 1, low=1),
        batch_normalize=r.integer("batch_normalize", 0) != 0,
        activation=r.activation("activation", "logistic"),
    )


def _maxpool(r: _Reader, i: int) -> MaxpoolSection:
    r.refuse("maxpool_depth", "0", "channel-wise maxpool")
    r.refuse("antialiasing", "0", "anti-aliased maxpool")
    if r.has("stride_x") or r.has("stride_y"):
        raise r.error("stride_x/stride_y are not supported; use stride")
    stride = r.integer("stride", 1, low=1)
    size = r.integer("size", stride, low=1)
    return MaxpoolSection(
        line=r.raw.line, index=i, size=size, stride=stride, padding=r.integer("padding", size - 1, low=0)
    )


def _route(r: _Reader, i: int) -> RouteSection:
    rel = r.ints("layers")
    if not rel:
        raise r.error("needs layers=... (the layers to concatenate)")
    groups = r.integer("groups", 1, low=1)
    group_id = r.integer("group_id", 0, low=0)
    if group_id >= groups:
        raise r.error(f"group_id={group_id} must be < groups={groups}")
    return RouteSection(
        line=r.raw.line,
        index=i,
        layers=tuple(r.index("layers", v, i) for v in rel),
        groups=groups,
        group_id=group_id,
    )


def _shortcut(r: _Reader, i: int) -> ShortcutSection:
    r.refuse("weights_type", "none", "weighted shortcuts")
    rel = r.ints("from")
    if not rel:
        raise r.error("needs from=... (the layer to add)")
    if i == 0:
        raise r.error("cannot be the first layer (it adds the previous layer's output)")
    return ShortcutSection(
        line=r.raw.line,
        index=i,
        sources=tuple(r.index("from", v, i) for v in rel),
        activation=r.activation("activation", "linear"),
    )


def _upsample(r: _Reader, i: int) -> UpsampleSection:
    stride = r.integer("stride", 2)
    if stride < 1:
        raise r.error(f"stride={stride} is not supported (negative stride means downsampling)")
    return UpsampleSection(line=r.raw.line, index=i, stride=stride, scale=r.number("scale", 1.0))


def _yolo(r: _Reader, i: int) -> YoloSection:
    r.refuse("new_coords", "0", "Scaled-YOLOv4 box coordinates")
    num = r.integer("num", 1, low=1)
    flat = r.floats("anchors")
    if flat is None:
        raise r.error("needs anchors=w,h, w,h, ...")
    if len(flat) != 2 * num:
        raise r.error(f"anchors has {len(flat)} numbers but num={num} needs {2 * num}")
    anchors = tuple((flat[k], flat[k + 1]) for k in range(0, len(flat), 2))
    mask = r.ints("mask")
    mask = tuple(range(num)) if mask is None else mask
    if not mask or any(not 0 <= m < num for m in mask):
        raise r.error(f"mask={','.join(map(str, mask))} must index anchors 0..{num - 1}")
    return YoloSection(
        line=r.raw.line,
        index=i,
        mask=mask,
        anchors=anchors,
        classes=r.integer("classes", 20, low=1),
        scale_x_y=r.number("scale_x_y", 1.0),
    )


_PARSERS = {
    "convolutional": _conv,
    "conv": _conv,
    "maxpool": _maxpool,
    "max": _maxpool,
    "route": _route,
    "shortcut": _shortcut,
    "upsample": _upsample,
    "yolo": _yolo,
}


def parse_cfg(text: str, *, source: str = "<cfg>", check_anchors: bool = True) -> DarknetCfg:
    """Parse Darknet cfg ``text``; ``source`` names it in error messages (usually the path).

    With ``check_anchors`` a cfg whose ``[yolo]`` layers share an anchor or leave one unused gets
    a one-line ``logging`` warning (:func:`vidpipe.models.darknet.anchors.anchor_use_warning`); bundles, whose cfg was checked when
    they were converted, pass False.
    """
    raws = _split(text, source)
    if not raws or raws[0].name not in ("net", "network"):
        where = f"{source}:{raws[0].line}" if raws else source
        raise ModelError(f"{where}: a Darknet cfg must start with a [net] section")
    net_reader = _Reader(source, raws[0])
    net = NetSection(
        line=raws[0].line,
        width=net_reader.integer("width", 416, low=1),
        height=net_reader.integer("height", 416, low=1),
        channels=net_reader.integer("channels", 3, low=1),
    )
    layers: list[LayerSection] = []
    for i, raw in enumerate(raws[1:]):
        parse = _PARSERS.get(raw.name)
        if parse is None:
            supported = ", ".join(
                f"[{k}]" for k in ("convolutional", "maxpool", "route", "shortcut", "upsample", "yolo")
            )
            raise ModelError(f"{source}:{raw.line}: layer type [{raw.name}] is not supported; vidpipe runs {supported}")
        layers.append(parse(_Reader(source, raw), i))
    yolos = [s for s in layers if isinstance(s, YoloSection)]
    if not yolos:
        raise ModelError(f"{source}: no [yolo] layer; vidpipe runs Darknet YOLO detectors")
    for y in yolos[1:]:
        if y.classes != yolos[0].classes:
            raise ModelError(
                f"{source}:{y.line}: [yolo] classes={y.classes} differs from classes={yolos[0].classes} "
                f"at line {yolos[0].line}"
            )
    if check_anchors and (message := anchor_use_warning(source, yolos)):
        logger.warning("%s", message)
    return DarknetCfg(source=source, net=net, layers=tuple(layers), text=text)


def read_cfg(path: str | Path) -> DarknetCfg:
    """Read and parse a ``.cfg`` file (ModelError if it cannot be read)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ModelError(f"cannot read Darknet cfg {str(path)!r}: {exc.strerror or exc}") from exc
    return parse_cfg(text, source=str(path))
