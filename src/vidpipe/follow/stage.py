""":class:`FollowStage`: the auto-follow virtual camera as a pipeline stage.

Per stream: pick the target among the frame's detections of the target classes (the current
track while it lives, else the best one; :func:`~vidpipe.follow.planner.pick_target`), plan the
window (:class:`~vidpipe.follow.planner.Planner`, host side), render it on the frame's device
(:func:`~vidpipe.follow.render.render_window`) and hand the picture to the sink. Put it after
the tracker (``vidpipe.detect(..., track=True, stages=[FollowStage(...)])``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from vidpipe.errors import ConfigError
from vidpipe.follow.planner import FollowConfig, Planner, pick_target
from vidpipe.follow.render import render_window
from vidpipe.follow.timing import StepClock

if TYPE_CHECKING:
    import numpy as np
    import torch

    from vidpipe.follow.window import Window
    from vidpipe.types import FrameMeta, FrameResult

__all__ = ["FollowStage"]

Sink = Callable[["FrameMeta", "torch.Tensor"], None]


class FollowStage:
    """A :class:`~vidpipe.stages.Stage` named ``"follow"``: each frame's virtual camera view,
    ``(3, height, width)`` uint8 RGB on the frame's device, goes to ``sink(meta, image)``.

    Args:
        target: class names or ids to follow (``"sports ball"``, ``"person,dog"``, ``[32]``).
        sink: called once per frame, in order per stream, with the frame's meta and the view.
        size: the output's ``(width, height)``.
        config: the camera's motion (:class:`~vidpipe.follow.planner.FollowConfig`; its
            ``aspect`` is set from ``size``), or its options as keywords.
        nominal_fps: frames per second assumed for frames without a timestamp.

    The results pass through unchanged. :meth:`report`: ``frames``, ``frames_with_target``,
    ``target_in_frame`` (share of the frames with the target detected whose box lies inside the
    window), ``wide_frames`` (frames at the wide shot), ``plan_ms_per_frame``,
    ``render_ms_per_frame`` (GPU time on CUDA), ``sink_ms_per_frame``, ``size``.
    """

    name = "follow"
    needs_frames = True
    #: how errors about ``target`` name it (the command line sets its flag's name)
    target_option = "target"

    def __init__(
        self,
        target: "str | Sequence[str | int]",
        *,
        sink: Sink,
        size: "tuple[int, int]" = (1280, 720),
        config: FollowConfig | None = None,
        nominal_fps: float = 30.0,
        **options: Any,
    ) -> None:
        import dataclasses

        if not callable(sink):
            raise ConfigError(f"sink={sink!r}; expected a callable (meta, image) -> None")
        if len(size) != 2 or min(int(size[0]), int(size[1])) < 2:
            raise ConfigError(f"size={size!r}; expected (width, height) of 2 pixels or more")
        self.size = (int(size[0]), int(size[1]))
        base = config if config is not None else FollowConfig()
        unknown = sorted(set(options) - {f.name for f in dataclasses.fields(FollowConfig)} | ({"aspect"} & set(options)))
        if unknown:
            raise ConfigError(f"unknown option {unknown[0]}=; the camera's options are FollowConfig's fields "
                              "(margin, max_zoom, smooth, dead_zone, lead, hold, ease, ...; the aspect comes from size)")
        self.config = dataclasses.replace(base, aspect=self.size[0] / self.size[1], **options)
        self.sink = sink
        self.nominal_fps = float(nominal_fps)
        self._target_spec = target
        self._classes: "np.ndarray | None" = None
        self._planners: dict[int, Planner] = {}
        self._track: dict[int, int | None] = {}
        self.plan = StepClock()
        self.render = StepClock()
        self.sinking = StepClock()
        self.frames = 0
        self.with_target = 0
        self.in_frame = 0
        self.wide_frames = 0

    # ------------------------------------------------------------------ Stage
    def process(self, results: "Sequence[FrameResult]") -> "Sequence[FrameResult]":
        from vidpipe.track.stage import frame_time

        if not results:
            return results
        if self._classes is None:
            self._classes = self._resolve(results[0].names)
        rows = _host_rows(results)
        sid = results[0].meta.stream_id
        for r, det in zip(results, rows):
            t0 = time.perf_counter()
            meta = r.meta
            planner = self._planners.get(sid)
            if planner is None or (planner.width, planner.height) != (meta.width, meta.height):
                planner = self._planners[sid] = Planner(meta.width, meta.height, self.config)
            boxes, scores, cls, tids = det
            keep = (cls[:, None] == self._classes[None, :]).any(1) if len(cls) else cls.astype(bool)
            row, self._track[sid] = pick_target(boxes[keep], scores[keep], None if tids is None else tids[keep],
                                                self._track.get(sid))  # fmt: skip
            box = None if row is None else tuple(float(v) for v in boxes[keep][row])
            window = planner.update(frame_time(meta, self.nominal_fps), box)
            self.frames += 1
            self.wide_frames += planner.mode == "wide"
            if box is not None:
                self.with_target += 1
                self.in_frame += window.contains(box)  # type: ignore[arg-type]
            self.plan.add(time.perf_counter() - t0)
            image = self._render(r, window)
            t1 = time.perf_counter()
            self.sink(meta, image)
            self.sinking.add(time.perf_counter() - t1)
        return results

    def reset(self, stream_id: int) -> None:
        self._planners.pop(stream_id, None)
        self._track.pop(stream_id, None)

    def report(self) -> Mapping[str, Any]:
        if not self.frames:
            return {}
        return {
            "size": list(self.size),
            "frames": self.frames,
            "frames_with_target": self.with_target,
            "target_in_frame": round(self.in_frame / self.with_target, 4) if self.with_target else None,
            "wide_frames": self.wide_frames,
            "plan_ms_per_frame": self.plan.ms_per_frame(),
            "render_ms_per_frame": self.render.ms_per_frame(),
            "sink_ms_per_frame": self.sinking.ms_per_frame(),
        }

    def window(self, stream_id: int) -> "Window | None":
        """The stream's current window (the last frame's; ``None`` before its first frame)."""
        planner = self._planners.get(stream_id)
        return None if planner is None else planner.window

    def close(self) -> None:
        self.render.ms_per_frame(final=True)  # resolve the GPU timings while the device is there
        self._planners.clear()

    # ------------------------------------------------------------------ internals
    def _resolve(self, names: Sequence[str]) -> "np.ndarray":
        import numpy as np

        from vidpipe.models.detector import resolve_classes

        spec = self._target_spec
        try:
            if names:
                ids = resolve_classes(spec if isinstance(spec, str) else list(spec), names)
            else:
                items = spec.split(",") if isinstance(spec, str) else list(spec)
                ids = tuple(int(c) for c in items)
        except ConfigError as exc:
            raise ConfigError(f"{self.target_option}: {exc}") from None
        except (TypeError, ValueError):
            raise ConfigError(f"{self.target_option}={spec!r}: the model has no class names; give class ids") from None
        return np.asarray(ids, dtype=np.int64)

    def _render(self, r: "FrameResult", window: Any) -> "torch.Tensor":
        if r.image is None:
            raise ConfigError("the follow stage needs the frames: run with keep_frames (a stage that needs frames "
                              "turns it on)")  # fmt: skip
        if r.image.device.type == "cuda":
            import torch

            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            image = render_window(r.image, window, self.size)
            end.record()
            self.render.add_cuda(start, end)
            return image
        t0 = time.perf_counter()
        image = render_window(r.image, window, self.size)
        self.render.add(time.perf_counter() - t0)
        return image


def _host_rows(results: "Sequence[FrameResult]") -> "list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]]":
    """Each frame's ``(boxes, scores, class_ids, track_ids)`` as numpy, with one device->host copy
    for the whole call."""
    import numpy as np
    import torch

    dets = [r.detections for r in results]
    tracked = all(d.track_ids is not None for d in dets)
    cols = [torch.cat([d.boxes.double(), d.scores.double()[:, None], d.class_ids.double()[:, None]]
                      + ([d.track_ids.double()[:, None]] if tracked else []), 1) for d in dets]  # type: ignore[union-attr]
    packed = torch.cat(cols).cpu().numpy() if cols else np.zeros((0, 7))
    out = []
    start = 0
    for d in dets:
        part = packed[start : start + len(d)]
        start += len(d)
        out.append((part[:, :4], part[:, 4], part[:, 5].astype(np.int64),
                    part[:, 6].astype(np.int64) if tracked else None))  # fmt: skip
    return out
