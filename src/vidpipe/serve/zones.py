"""The zones stage of a ``vidpipe serve`` run: each camera's ``lines:`` / ``zones:`` / ``anchor:``
(:class:`~vidpipe.serve.config.CameraConfig`) on its own stream."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vidpipe.serve.config import CameraConfig, ServeConfig
    from vidpipe.stages.base import Stage

__all__ = ["serve_zone_stages", "needs_tracking"]


def needs_tracking(config: "ServeConfig") -> bool:
    """Whether a camera has lines or zones (they count tracked objects: run the tracker)."""
    return any(c.lines or c.zones for c in config.cameras)


def serve_zone_stages(config: "ServeConfig", camera_of: "Callable[[int], CameraConfig | None]") -> "list[Stage]":
    """``[Zones]`` when a camera has lines or zones, else ``[]``; ``camera_of(stream_id)`` says
    which camera a stream is (looked up at the stream's first frame). Goes after the tracker."""
    if not needs_tracking(config):
        return []
    from vidpipe.zones import Zones, ZoneSet

    def per_stream(stream_id: int) -> "ZoneSet":
        cam = camera_of(stream_id)
        if cam is None:
            return ZoneSet()
        return ZoneSet(cam.lines, cam.zones, anchor=cam.anchor)

    return [Zones(per_stream=per_stream)]
