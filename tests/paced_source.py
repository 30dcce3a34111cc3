"""A small real live source for pipeline tests: a video file played at its own frame rate.

:class:`PacedFileSource` satisfies :class:`vidpipe.sources.base.Source` with ``live = True``: it
decodes the file with PyAV (real frames), one frame per chunk, paced at the file's frame rate (or
``fps``), looping forever by default as a camera would; it stamps each frame's capture time and
keeps the live counters of its state. It stands in for the project's ``LiveSource`` (a camera
reader written elsewhere) so the pipeline's live behaviour can be tested on local files.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

__all__ = ["PacedFileSource"]


class PacedFileSource:
    """Play ``path`` as a camera: one frame every ``1 / fps`` seconds, latest-wins downstream.

    Args:
        path: a video file.
        location: what the spec says (e.g. a URL with credentials, to test redaction); the path
            by default.
        fps: the pace (default: the file's average frame rate).
        loop: start over at the end (``False``: end like a finite stream).
        max_frames: end after this many frames.
    """

    live = True

    def __init__(self, path: Any, *, location: str | None = None, fps: float | None = None, loop: bool = True,
                 max_frames: int | None = None) -> None:
        from vidpipe.sources.spec import SourceSpec

        self.path = str(path)
        self.spec = SourceSpec("live", location or self.path)
        self.fps = fps
        self.loop = loop
        self.max_frames = max_frames

    def produce(self, state: Any, ctx: Any) -> Iterator[tuple[Any, Any]]:
        import av
        import torch

        from vidpipe.ops.letterbox import canvas_size
        from vidpipe.ops.preprocess import preprocess
        from vidpipe.types import FrameBatch, FrameMeta

        det = ctx.detector
        state.decoder, state.decoder_reason = "pyav", "paced test reader"
        state.live_state = "connecting"
        index, t0 = 0, None
        while True:
            with av.open(self.path) as container:
                stream = container.streams.video[0]
                fps = self.fps or float(stream.average_rate)
                state.live_state = "live"
                for frame in container.decode(stream):
                    if t0 is None:
                        t0 = time.monotonic()
                    delay = t0 + index / fps - time.monotonic()
                    if ctx.stop.wait(delay) if delay > 0 else ctx.stop.is_set():
                        state.stopped, state.live_state = True, "stopped"
                        return
                    rgb = frame.to_ndarray(format="rgb24")
                    mono, wall = time.monotonic(), time.time()
                    state.frames_in += 1
                    state.last_frame_at = mono
                    h, w = rgb.shape[:2]
                    meta = FrameMeta(self.spec.name, state.stream_id, index, frame.time, h, w, wall, mono)
                    data = torch.from_numpy(rgb).permute(2, 0, 1).unsqueeze(0).contiguous()
                    size = canvas_size(h, w, det.input_size, stride=det.model.info.stride, mode="square")
                    inp = preprocess(FrameBatch(data, (meta,), "rgb"), size=size, dtype=det.dtype, device=det.device)
                    yield inp, None
                    index += 1
                    if self.max_frames is not None and index >= self.max_frames:
                        state.live_state = "stopped"
                        return
            if not self.loop:
                state.live_state = "stopped"
                return
