"""The cameras' ``annotate:`` outputs as the serve run's annotate stage."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vidpipe.serve.config import CameraConfig, ServeConfig
    from vidpipe.stages.base import Stage

__all__ = ["serve_annotate_stages"]


def serve_annotate_stages(config: "ServeConfig", camera_of: "Callable[[int], CameraConfig | None]") -> "list[Stage]":
    """``[AnnotateStage]`` when a camera has ``annotate:``, else ``[]``. Each stream is drawn
    with its camera's lines and zones; ``camera_of(stream_id)`` says which camera a stream is."""
    if not any(c.annotate for c in config.cameras):
        return []
    from vidpipe.draw import Annotator
    from vidpipe.stages.annotate import AnnotateStage

    annotators: dict[str, Any] = {}

    def target(meta: Any) -> str | None:
        cam = camera_of(meta.stream_id)
        return cam.annotate if cam is not None else None

    def render(result: Any) -> Any:
        cam = camera_of(result.meta.stream_id)
        key = cam.name if cam is not None else ""
        if key not in annotators:
            annotators[key] = Annotator(lines=cam.lines, zones=cam.zones) if cam is not None else Annotator()
        return annotators[key](result)

    return [AnnotateStage(target, render=render, on_error="log")]  # one camera's dead relay stops no other
