"""The line and zone flags of ``vidpipe detect``: ``--line``, ``--zone``, ``--anchor``, ``--dwell``,
``--hysteresis``, and the zones stage they build (:func:`zone_stages`).

Lines and zones count tracked objects: ``--line``/``--zone`` imply tracking
(:func:`needs_tracking`); the tracker stage must come before the zones stage in ``stages``.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from vidpipe.errors import ConfigError

if TYPE_CHECKING:
    from vidpipe.stages.base import Stage
    from vidpipe.zones import Line, Zone

__all__ = ["add_zone_args", "needs_tracking", "zone_stages"]


def _typed(parse, flag: str):
    def convert(text: str):
        try:
            return parse(text, what=flag)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix(f"{flag} ")) from None

    return convert


def _line(text: str) -> "Line":
    from vidpipe.zones.config import parse_line

    return _typed(parse_line, "--line")(text)


def _zone(text: str) -> "Zone":
    from vidpipe.zones.config import parse_zone

    return _typed(parse_zone, "--zone")(text)


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not (value > 0 and value < float("inf")):
        raise argparse.ArgumentTypeError(f"expected seconds > 0, got {text}")
    return value


def _frames(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of frames, got {text!r}") from None
    if not 1 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"expected frames from 1 to 1000, got {text}")
    return value


def add_zone_args(parser: argparse.ArgumentParser) -> None:
    """Add the line and zone flags (defaults: none given)."""
    from vidpipe.zones.anchors import ANCHORS

    g = parser.add_argument_group("lines and zones (count tracked objects; imply tracking)")
    g.add_argument("--line", action="append", type=_line, default=[], metavar="NAME=x1,y1,x2,y2",
                   help="a counting line in source pixels (repeatable); objects crossing to its left as drawn "
                   "from (x1,y1) to (x2,y2) count 'in', to its right 'out'; add :classes=person,car to count "
                   "only those")
    g.add_argument("--zone", action="append", type=_zone, default=[], metavar="NAME=x1,y1,x2,y2,x3,y3,...",
                   help="a zone polygon in source pixels (repeatable): entries, leaves, occupancy, dwell; "
                   "add :classes=car and :dwell=SECONDS (a dwell event past that time)")
    g.add_argument("--anchor", choices=tuple(ANCHORS), default="bottom_center",
                   help="the point of a box that stands for the object (default: %(default)s)")
    g.add_argument("--dwell", type=_positive, default=None, metavar="SECONDS",
                   help="dwell event threshold for zones without their own :dwell=")
    g.add_argument("--hysteresis", type=_frames, default=3, metavar="FRAMES",
                   help="observations on the other side / in or out before a crossing, entry or leave counts "
                   "(default: %(default)s)")


def needs_tracking(args: argparse.Namespace) -> bool:
    """Whether the flags ask for lines or zones (which need track ids: run the tracker)."""
    return bool(getattr(args, "line", None) or getattr(args, "zone", None))


def zone_stages(args: argparse.Namespace) -> "list[Stage]":
    """``[Zones(...)]`` for ``--line``/``--zone``, else ``[]``. Goes after the tracker's stage."""
    if not needs_tracking(args):
        for flag, given in (("--dwell", args.dwell is not None), ("--anchor", args.anchor != "bottom_center")):
            if given:
                args.parser.error(f"{flag} needs --line or --zone")
        return []
    for kind, items in (("--line", args.line), ("--zone", args.zone)):
        seen: set[str] = set()
        for item in items:
            if item.name in seen:
                args.parser.error(f"{kind}: the name {item.name!r} is given twice; names must be unique")
            seen.add(item.name)
    from vidpipe.zones import Zones

    return [Zones(args.line, args.zone, anchor=args.anchor, dwell=args.dwell, hysteresis=args.hysteresis)]
