"""Lines and zones from text (``--line``, ``--zone``) and from config values (``vidpipe serve``).

Text form, source pixels::

    NAME=x1,y1,x2,y2[:classes=person,bicycle]                  a line from (x1, y1) to (x2, y2)
    NAME=x1,y1,x2,y2,x3,y3,...[:classes=car][:dwell=30]        a zone, 3 or more vertices

Config form (YAML), per camera::

    lines:
      door: [100, 400, 500, 400]                 # or "100,400,500,400"
      gate: {points: [0, 300, 200, 300], classes: [person]}
    zones:
      bay: {points: [0, 0, 200, 0, 200, 200, 0, 200], classes: [car], dwell: 30}

Every error names where the value came from (``what``: ``--line``, ``lines``, ...).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from vidpipe.errors import ConfigError
from vidpipe.zones.geometry import Line, Zone

__all__ = ["parse_line", "parse_zone", "line_from_value", "zone_from_value", "NAME_RULE"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
NAME_RULE = "letters, digits, '_', '.' or '-' (up to 64, starting with a letter or digit)"
_OPTIONS = {"line": ("classes",), "zone": ("classes", "dwell")}


def _name(what: str, shown: str, name: str) -> str:
    if not _NAME.match(name):
        raise ConfigError(f"{what} {shown}: the name {name!r} must be {NAME_RULE}")
    return name


def _numbers(what: str, shown: str, value: Any) -> list[float]:
    if isinstance(value, str):
        parts = [p.strip() for p in value.split(",")]
        try:
            nums = [float(p) for p in parts]
        except ValueError:
            raise ConfigError(f"{what} {shown}: expected comma-separated numbers (pixels), got {value!r}") from None
    elif isinstance(value, (list, tuple)):
        if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in value):
            raise ConfigError(f"{what} {shown}: expected a list of numbers (pixels), got {value!r}")
        nums = [float(v) for v in value]
    else:
        raise ConfigError(f"{what} {shown}: expected x1,y1,x2,y2,... as numbers (pixels), got {value!r}")
    if not all(math.isfinite(v) for v in nums):
        raise ConfigError(f"{what} {shown}: the coordinates must be finite numbers, got {value!r}")
    return nums


def _pairs(nums: list[float]) -> list[tuple[float, float]]:
    return [(nums[i], nums[i + 1]) for i in range(0, len(nums), 2)]


def _dwell(what: str, shown: str, value: Any) -> float:
    try:
        d = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        d = math.nan
    if not (d > 0 and math.isfinite(d)):
        raise ConfigError(f"{what} {shown}: dwell must be a number of seconds > 0, got {value!r}")
    return d


def _classes(what: str, shown: str, value: Any) -> tuple[str | int, ...]:
    items = [s.strip() for s in value.split(",")] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not items or any(
        isinstance(c, bool) or not isinstance(c, (str, int)) or c == "" for c in items
    ):
        raise ConfigError(f"{what} {shown}: classes must be class names or ids, e.g. person,car; got {value!r}")
    return tuple(items)


def _build(kind: str, what: str, shown: str, name: str, nums: list[float], opts: Mapping[str, Any]) -> Line | Zone:
    classes = _classes(what, shown, opts["classes"]) if "classes" in opts else None
    if kind == "line":
        if len(nums) != 4:
            raise ConfigError(f"{what} {shown}: a line is x1,y1,x2,y2 (4 numbers), got {len(nums)}")
        a, b = _pairs(nums)
        if a == b:
            raise ConfigError(f"{what} {shown}: the two points are the same; a line needs two different points")
        return Line(name, a, b, classes=classes)
    if len(nums) < 6 or len(nums) % 2:
        raise ConfigError(
            f"{what} {shown}: a zone is x1,y1,x2,y2,x3,y3,... (3 or more points, an even count of numbers), "
            f"got {len(nums)} number{'s' if len(nums) != 1 else ''}"
        )
    dwell = _dwell(what, shown, opts["dwell"]) if "dwell" in opts else None
    try:
        return Zone(name, tuple(_pairs(nums)), classes=classes, dwell=dwell)
    except ConfigError as exc:
        raise ConfigError(f"{what} {shown}: {str(exc).split(': ', 1)[-1]}") from None


def _parse(kind: str, text: str, what: str) -> Line | Zone:
    shown = repr(text)
    form = "NAME=x1,y1,x2,y2" if kind == "line" else "NAME=x1,y1,x2,y2,x3,y3,..."
    if not isinstance(text, str) or "=" not in text:
        raise ConfigError(f"{what} {shown}: expected {form} (source pixels), e.g. "
                          + ("door=100,400,500,400" if kind == "line" else "bay=0,0,200,0,200,200,0,200"))
    name, rest = text.split("=", 1)
    name = _name(what, shown, name.strip())
    coords, *extras = rest.split(":")
    opts: dict[str, str] = {}
    for extra in extras:
        key, sep, value = extra.partition("=")
        key = key.strip().lower()
        if not sep or key not in _OPTIONS[kind]:
            allowed = " and ".join(f":{k}=..." for k in _OPTIONS[kind])
            raise ConfigError(f"{what} {shown}: unknown option {extra!r}; a {kind} takes {allowed}")
        opts[key] = value
    return _build(kind, what, shown, name, _numbers(what, shown, coords), opts)


def parse_line(text: str, *, what: str = "--line") -> Line:
    """``"NAME=x1,y1,x2,y2[:classes=a,b]"`` -> :class:`Line` (errors name ``what``)."""
    return _parse("line", text, what)  # type: ignore[return-value]


def parse_zone(text: str, *, what: str = "--zone") -> Zone:
    """``"NAME=x1,y1,...,xn,yn[:classes=a,b][:dwell=SECONDS]"`` -> :class:`Zone`."""
    return _parse("zone", text, what)  # type: ignore[return-value]


def _from_value(kind: str, name: Any, value: Any, what: str) -> Line | Zone:
    shown = repr(name)
    if not isinstance(name, str):
        raise ConfigError(f"{what} {shown}: a {kind}'s name must be a text")
    _name(what, shown, name)
    if isinstance(value, Mapping):
        allowed = ("points",) + _OPTIONS[kind]
        unknown = [k for k in value if k not in allowed]
        if unknown:
            raise ConfigError(f"{what} {shown}: unknown key {unknown[0]!r}; a {kind} takes {', '.join(allowed)}")
        if "points" not in value:
            raise ConfigError(f"{what} {shown}: no 'points:' (x1, y1, x2, y2, ... in source pixels)")
        opts = {k: v for k, v in value.items() if k != "points"}
        value = value["points"]
    else:
        opts = {}
    if isinstance(value, (list, tuple)) and value and all(isinstance(p, (list, tuple)) for p in value):
        value = [c for p in value for c in p]  # [[x, y], ...] as well as [x, y, ...]
    return _build(kind, what, shown, name, _numbers(what, shown, value), opts)


def line_from_value(name: Any, value: Any, *, what: str = "lines") -> Line:
    """A config file's line ``name: value`` (see the module docstring) -> :class:`Line`."""
    return _from_value("line", name, value, what)  # type: ignore[return-value]


def zone_from_value(name: Any, value: Any, *, what: str = "zones") -> Zone:
    """A config file's zone ``name: value`` -> :class:`Zone`."""
    return _from_value("zone", name, value, what)  # type: ignore[return-value]
