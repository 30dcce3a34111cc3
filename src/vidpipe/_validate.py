"""Small validators for user-facing options (never ``assert``: ``python -O`` strips it)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from vidpipe.errors import ConfigError


def check_choice(name: str, value: Any, allowed: Iterable[Any]) -> Any:
    """Return ``value`` if it is one of ``allowed``, else raise ConfigError listing them."""
    allowed = tuple(allowed)
    if value not in allowed:
        choices = ", ".join(repr(a) for a in allowed)
        raise ConfigError(f"invalid {name}={value!r}; expected one of {choices}")
    return value


def check_range(
    name: str,
    value: float,
    *,
    low: float | None = None,
    high: float | None = None,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
    integer: bool = False,
) -> Any:
    """Return ``value`` if it is a number within the bounds, else raise ConfigError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"invalid {name}={value!r}; expected a number")
    if integer and not float(value).is_integer():
        raise ConfigError(f"invalid {name}={value!r}; expected an integer")
    bad = (
        (low is not None and (value < low if low_inclusive else value <= low))
        or (high is not None and (value > high if high_inclusive else value >= high))
        or value != value  # NaN
    )
    if bad:
        lo = "-inf" if low is None else f"{low}"
        hi = "inf" if high is None else f"{high}"
        lb = "[" if low_inclusive else "("
        hb = "]" if high_inclusive else ")"
        raise ConfigError(f"invalid {name}={value!r}; expected a value in {lb}{lo}, {hi}{hb}")
    return int(value) if integer else value
