"""Validators of single config values, shared by the YAML loader and the dataclasses.

Each validator returns the value (normalised: a class list becomes a tuple) or raises
:class:`Invalid` with what was expected. The YAML loader turns that into
``file:LINE: key: expected ..., got ...``; the dataclasses into ``invalid name=value: expected ...``
(each interface speaks its own names).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

__all__ = ["Invalid", "number", "boolean", "choice", "text", "device", "classes", "camera_name", "shown"]

Validator = Callable[[Any], Any]

_DEVICE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class Invalid(Exception):
    """A value that does not fit; ``str()`` says what was expected."""


def shown(value: Any) -> str:
    """A value for a message: URLs with their credentials masked, long text cut."""
    from vidpipe.sources.redact import redact_text

    text = redact_text(repr(value))
    return text if len(text) <= 80 else text[:77] + "..."


def number(low: float, high: float, *, integer: bool = False, optional: bool = False) -> Validator:
    """A number (a whole number with ``integer``) in ``[low, high]``; ``None`` with ``optional``."""
    kind = "a whole number" if integer else "a number"
    bounds = f"{kind} from {low:g} to {high:g}"

    def check(value: Any) -> Any:
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise Invalid(f"expected {bounds}" + (" or null" if optional else ""))
        if integer and not (isinstance(value, int) or float(value).is_integer()):
            raise Invalid(f"expected {bounds}")
        if math.isnan(value) or not low <= value <= high:
            raise Invalid(f"expected {bounds}")
        return int(value) if integer else float(value)

    return check


def boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise Invalid("expected true or false")
    return value


def choice(*options: str) -> Validator:
    def check(value: Any) -> str:
        if value not in options:
            raise Invalid("expected one of " + ", ".join(options))
        return value

    return check


def text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise Invalid("expected a non-empty text")
    return value


def optional_text(value: Any) -> str | None:
    return None if value is None else text(value)


def device(value: Any) -> str:
    if not isinstance(value, str) or not _DEVICE.match(value.strip().lower()):
        raise Invalid("expected auto, cpu, cuda or cuda:N")
    return value.strip().lower()


def classes(value: Any) -> tuple[str | int, ...] | None:
    """``None``, ``"person,car"`` or a list of class names and ids -> a tuple (or ``None``)."""
    if value is None:
        return None
    if isinstance(value, str):
        items: list[Any] = [s.strip() for s in value.split(",") if s.strip()]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise Invalid("expected a list of class names or ids, e.g. [person, car]")
    if not items:
        raise Invalid("expected at least one class name or id")
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (str, int)) or (isinstance(item, str) and not item.strip()):
            raise Invalid(f"expected class names or ids, got the item {item!r}")
        if isinstance(item, int) and item < 0:
            raise Invalid(f"class ids are 0 or more, got {item}")
    return tuple(items)


def camera_name(value: Any) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise Invalid(
            "expected a name of letters, digits, '_', '.' or '-' (up to 64, starting with a letter "
            "or digit); it names the camera's table and its metrics"
        )
    return value


def port(value: Any) -> int | None:
    return number(0, 65535, integer=True, optional=True)(value)
