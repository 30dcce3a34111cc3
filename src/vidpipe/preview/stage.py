"""The stage that feeds a :class:`~vidpipe.preview.hub.PreviewHub` from a run's results.

::

    hub = PreviewHub()
    run = vidpipe.detect(["rtsp://cam1/s", "rtsp://cam2/s"], stages=[PreviewStage(hub, render=Annotator())])

Per stream and batch it looks at the last result only (the hub keeps only the latest frame) and
renders it (``render(result) -> (3, H, W) uint8``; default: the decoded frame itself) only when
the hub says a browser watches the stream, at most ``hub.max_fps`` times a second. When nobody
watches it still refreshes the stream's frame every ``idle_interval`` seconds (default 1), so a
page opened later, a snapshot, or a stream that has ended shows a recent frame at once; with
``idle_interval=None`` it does nothing at all until someone watches.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from vidpipe.errors import ConfigError

if TYPE_CHECKING:
    import torch

    from vidpipe.preview.hub import PreviewHub
    from vidpipe.types import FrameResult

__all__ = ["PreviewStage", "raw_frame"]


def raw_frame(result: "FrameResult") -> "torch.Tensor":
    """The result's decoded frame as it is (``FrameResult.image``)."""
    if result.image is None:
        raise ValueError(f"stream {result.meta.stream_id} frame {result.meta.index}: the result carries no frame")
    return result.image


def _own(image: "torch.Tensor") -> "torch.Tensor":
    """``image``, or a compact copy when it is a view into a larger allocation (a frame of a
    decoded batch): the hub keeps it, and must not keep the whole batch alive."""
    if image.untyped_storage().nbytes() > image.numel() * image.element_size():
        return image.clone()
    return image


class PreviewStage:
    """Pushes each stream's newest rendered frame to ``hub`` while someone watches.

    Args:
        hub: where frames go (the caller owns and closes it).
        render: ``FrameResult -> (3, H, W)`` uint8 RGB tensor on any device; a new tensor, or
            the frame itself (default :func:`raw_frame`, the undrawn frame); e.g.
            ``vidpipe.draw.Annotator(...)``. Called on the run's thread, only for frames pushed.
        idle_interval: seconds between pushes when nobody watches (``None``: none).
    """

    name = "preview"
    needs_frames = True

    def __init__(
        self,
        hub: "PreviewHub",
        *,
        render: "Callable[[FrameResult], torch.Tensor] | None" = None,
        idle_interval: float | None = 1.0,
    ) -> None:
        from vidpipe.preview.hub import PreviewHub

        if not isinstance(hub, PreviewHub):
            raise ConfigError(f"PreviewStage: hub={hub!r}; expected a PreviewHub")
        if render is not None and not callable(render):
            raise ConfigError(f"PreviewStage: render={render!r}; expected a callable FrameResult -> Tensor")
        if idle_interval is not None and not (isinstance(idle_interval, (int, float)) and idle_interval > 0):
            raise ConfigError(f"PreviewStage: idle_interval={idle_interval!r}; expected seconds above 0, or None")
        self.hub = hub
        self.render = render or raw_frame
        self.idle_interval = idle_interval
        self._pushed_at: dict[int, float] = {}
        self._pushed = 0
        self._render_s = 0.0

    def process(self, results: "Sequence[FrameResult]") -> "Sequence[FrameResult]":
        if not results:
            return results
        last = results[-1]
        sid = last.meta.stream_id
        now = time.monotonic()
        since = now - self._pushed_at.get(sid, -math.inf)
        if self.hub.watching(sid):
            if since < 1.0 / self.hub.max_fps:
                return results
        elif self.idle_interval is None or since < self.idle_interval:
            return results
        if last.image is None:
            return results
        t0 = time.perf_counter()
        image = _own(self.render(last))
        self._render_s += time.perf_counter() - t0
        self.hub.push(sid, image, meta=last.meta)
        self._pushed_at[sid] = now
        self._pushed += 1
        return results

    def reset(self, stream_id: int) -> None:
        self._pushed_at.pop(stream_id, None)

    def report(self) -> Mapping[str, Any]:
        if not self._pushed:
            return {}
        return {
            "frames_pushed": self._pushed,
            "render_ms_per_frame": round(1000 * self._render_s / self._pushed, 3),
            **self.hub.report(),
        }

    def close(self) -> None:
        """Nothing to release: the hub belongs to the caller."""
