"""The tracking flags of ``vidpipe detect`` and ``vidpipe serve``: ``--track`` (a ByteTrack
tracker per input or camera; tables get a ``track_id`` column) and ``--track-buffer SECONDS``
(how long a lost track is kept; implies ``--track``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vidpipe.track.config import TrackConfig

__all__ = ["add_track_args", "track_options"]


def _buffer(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not 0 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"expected seconds from 0 to 3600, got {text}")
    return value


def add_track_args(parser: argparse.ArgumentParser) -> None:
    """Add ``--track`` and ``--track-buffer`` (defaults ``None``: not given)."""
    g = parser.add_argument_group("tracking")
    g.add_argument("--track", action="store_true", default=None,
                   help="follow objects over frames (ByteTrack, one tracker per input or camera): tables get a "
                   "track_id column (empty for detections not in a confirmed track)")
    g.add_argument("--track-buffer", type=_buffer, default=None, metavar="SECONDS",
                   help="keep a lost track this long for it to come back (default: 1; implies --track)")


def track_options(args: argparse.Namespace, *, base: "TrackConfig | None" = None) -> "TrackConfig | None":
    """The tracker's options from the flags over ``base`` (a config file's); ``None``: no tracking."""
    from dataclasses import replace

    from vidpipe.track.config import TrackConfig

    on = bool(getattr(args, "track", None)) or getattr(args, "track_buffer", None) is not None
    if not on:
        return base
    config = base if base is not None else TrackConfig()
    if args.track_buffer is not None:
        config = replace(config, track_buffer=args.track_buffer)
    return config
