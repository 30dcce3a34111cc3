"""Building a sink from what the user passed: a path, a function or a ready sink."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from vidpipe._validate import check_choice
from vidpipe.errors import ConfigError
from vidpipe.sinks.base import Sink
from vidpipe.sinks.callback import CallbackSink
from vidpipe.sinks.rotate import ROTATIONS, RotatingTableSink
from vidpipe.sinks.table import TableSink

if TYPE_CHECKING:
    from vidpipe.types import FrameResult

__all__ = ["make_sink"]


def make_sink(
    target: "str | os.PathLike[str] | Callable[[FrameResult], Any] | Sink",
    *,
    names: Sequence[str] = (),
    format: str = "auto",
    tracking: bool = False,
    row_group_size: int = 65536,
    metadata: bool = True,
    capture_times: bool = False,
    rotate: str = "none",
) -> Sink:
    """A sink for ``target``:

    - a :class:`Sink`: returned as is;
    - a path: a :class:`TableSink`, its format chosen by ``format`` or the extension
      (``.csv``, ``.jsonl``, ``.ndjson``, ``.parquet``, ``.pq``); with ``rotate="hourly"`` a
      :class:`~vidpipe.sinks.rotate.RotatingTableSink` (one file per hour); ``capture_times``
      adds the ``captured_at``/``latency_ms`` columns (live sources);
    - a callable: a :class:`CallbackSink` calling it once per frame.

    Raises:
        ConfigError: unknown extension or format, or a target of another type.
        SinkError: the path cannot be written.
    """
    if isinstance(target, Sink):
        return target
    check_choice("rotate", rotate, ROTATIONS)
    if isinstance(target, (str, os.PathLike)) and rotate == "hourly":
        return RotatingTableSink(
            target,
            rotate="hourly",
            capture_times=capture_times,
            format=format,
            names=names,
            tracking=tracking,
            row_group_size=row_group_size,
            metadata=metadata,
        )
    if isinstance(target, (str, os.PathLike)):
        return TableSink(
            target,
            format=format,  # type: ignore[arg-type]
            names=names,
            tracking=tracking,
            row_group_size=row_group_size,
            metadata=metadata,
            capture_times=capture_times,
        )
    if callable(target):
        return CallbackSink(target)
    raise ConfigError(f"cannot make an output of {type(target).__name__}; expected a path, a function or a Sink")
