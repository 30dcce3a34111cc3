"""The cameras' ``annotate:`` outputs as the serve run's annotate stage."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vidpipe.serve.config import CameraConfig, ServeConfig
    from vidpipe.stages.base import Stage

__all__ = ["CameraRender", "serve_annotate_stages"]


class CameraRender:
    """Renders each stream with its camera's lines, zones and blur (one
    :class:`vidpipe.draw.Annotator` per camera): ``render(result)``, or ``render.many(results)``
    for a batch (frames drawn together per camera)."""

    def __init__(self, camera_of: "Callable[[int], CameraConfig | None]") -> None:
        self._camera_of = camera_of
        self._annotators: dict[str, Any] = {}

    def _annotator(self, stream_id: int) -> Any:
        from vidpipe.draw import Annotator

        cam = self._camera_of(stream_id)
        key = cam.name if cam is not None else ""
        if key not in self._annotators:
            self._annotators[key] = (Annotator(lines=cam.lines, zones=cam.zones, blur=cam.blur or ())
                                     if cam is not None else Annotator())
        return self._annotators[key]

    def __call__(self, result: Any) -> Any:
        return self._annotator(result.meta.stream_id)(result)

    def many(self, results: "Sequence[Any]") -> list:
        by: dict[int, list[int]] = {}
        ann: dict[int, Any] = {}
        for i, r in enumerate(results):
            a = self._annotator(r.meta.stream_id)
            ann[id(a)] = a
            by.setdefault(id(a), []).append(i)
        out: list[Any] = [None] * len(results)
        for key, rows in by.items():
            for i, image in zip(rows, ann[key].many([results[i] for i in rows])):
                out[i] = image
        return out


def serve_annotate_stages(config: "ServeConfig", camera_of: "Callable[[int], CameraConfig | None]") -> "list[Stage]":
    """``[AnnotateStage]`` when a camera has ``annotate:``, else ``[]``. Each stream is drawn
    with its camera's lines and zones; ``camera_of(stream_id)`` says which camera a stream is."""
    if not any(c.annotate for c in config.cameras):
        return []
    from vidpipe.stages.annotate import AnnotateStage

    def target(meta: Any) -> str | None:
        cam = camera_of(meta.stream_id)
        return cam.annotate if cam is not None else None

    outputs = sum(1 for c in config.cameras if c.annotate)  # their encoders share the CPU (and any added later)
    return [AnnotateStage(target, render=CameraRender(camera_of), on_error="log",  # one dead relay stops no other
                          streams=outputs)]
