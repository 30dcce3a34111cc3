"""Lines and zones: crossings in and out per line and class, zone entries, leaves, occupancy and
dwell time of tracked objects, as events on each result and counts in the run's summary.

::

    from vidpipe.zones import Zones

    zones = Zones(lines=["door=100,400,500,400"], zones=["bay=0,0,200,0,200,200,0,200:dwell=30"])
    run = vidpipe.detect("street.mp4", track=True, stages=[zones])   # a tracker first
    for frame in run:
        frame.events          # Event(kind="cross", name="door", direction="in", track_id=7, ...)
    run.summary().stages["zones"]   # {"lines": {"door": {"in": 3, "out": 1, ...}}, "zones": {...}}

See :class:`Zones` for the options and :mod:`vidpipe.zones.geometry` for the sides of a line.
Names load on first use (numpy is imported then, not by ``import vidpipe.zones``).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from vidpipe.zones.anchors import ANCHORS

_LAZY = {
    "Line": "vidpipe.zones.geometry",
    "Zone": "vidpipe.zones.geometry",
    "Zones": "vidpipe.zones.stage",
    "ZoneSet": "vidpipe.zones.stage",
    "parse_line": "vidpipe.zones.config",
    "parse_zone": "vidpipe.zones.config",
    "line_from_value": "vidpipe.zones.config",
    "zone_from_value": "vidpipe.zones.config",
}

__all__ = ["ANCHORS", "ZonesStage", *_LAZY]


def __getattr__(name: str) -> Any:
    if name == "ZonesStage":  # the same class, under the name of its role
        name = "Zones"
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'vidpipe.zones' has no attribute {name!r}")
    return getattr(import_module(module), name)


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:
    from vidpipe.zones.config import line_from_value, parse_line, parse_zone, zone_from_value
    from vidpipe.zones.geometry import Line, Zone
    from vidpipe.zones.stage import Zones, ZoneSet

    ZonesStage = Zones
