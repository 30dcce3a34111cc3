"""A video file read again from a given frame on: :class:`ResumedFileSource` (``--resume``).

The frame to start at is known by its number ``frame`` (FFmpeg's ``n`` in the run's selected
range) and its presentation time ``pts`` (seconds, from the table's last row). The file is read
as :class:`~vidpipe.sources.file.FileSource` reads it, with ``start`` moved to ``pts`` (every
decoder seeks to the keyframe before it and numbers frames from the first frame at or after it)
and the frame numbers shifted back by ``frame``: the frames come out with the numbers and times
an uninterrupted run gives them. ``frame`` is a kept frame (a multiple of ``frame_skip`` in the
range), so the stride stays in step; ``max_frames`` is reduced by the kept frames before it.

The first frame delivered must be ``frame`` at ``pts`` (to the table's microsecond); when it is
not (a file whose timestamps are not unique, a seek that lands elsewhere), the input fails with a
:class:`~vidpipe.errors.DecodeError` saying so, rather than writing rows under wrong numbers.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

from vidpipe.errors import DecodeError
from vidpipe.sources.file import FileSource

if TYPE_CHECKING:
    from vidpipe.pipeline_config import SourceState
    from vidpipe.sources.base import Chunk, SourceContext
    from vidpipe.sources.spec import SourceSpec

logger = logging.getLogger(__name__)

__all__ = ["ResumedFileSource"]

#: the table's pts have 6 decimals: the start time sits this far before the written pts
_PTS_SLACK = 2e-6


class ResumedFileSource:
    """A video file decoded from frame ``frame`` (at ``pts`` seconds) on, numbered as in the full run."""

    live = False

    def __init__(self, spec: "SourceSpec", *, frame: int, pts: float) -> None:
        if frame < 0 or pts < 0:
            raise ValueError(f"frame={frame}, pts={pts}: expected values >= 0")
        self.spec = spec
        self.frame = int(frame)
        self.pts = float(pts)

    def __repr__(self) -> str:
        return f"ResumedFileSource({self.spec.name!r}, frame={self.frame}, pts={self.pts:.6f})"

    def produce(self, state: "SourceState", ctx: "SourceContext") -> Iterator["Chunk"]:
        """The chunks of :class:`FileSource` from ``frame`` on, with their original numbers."""
        config = ctx.config
        stride = config.frame_skip
        max_frames = config.max_frames
        if max_frames is not None:
            max_frames -= self.frame // stride  # kept frames before `frame` (frames 0, k, 2k, ...)
            if max_frames <= 0:
                state.expected_frames = 0
                return
        start = max(self.pts - _PTS_SLACK, config.start or 0.0)
        sub = dataclasses.replace(config, start=start if start > 0 else None, max_frames=max_frames)
        logger.info("%s: resuming at frame %d (%.6f s)", self.spec.name, self.frame, self.pts)
        first = True
        for inp, ready in FileSource(self.spec).produce(state, dataclasses.replace(ctx, config=sub)):
            frames = inp.frames
            if first:
                first = False
                if frames[0].index != 0 or frames[0].pts is None or abs(frames[0].pts - self.pts) > 1e-5:
                    got = "no time" if frames[0].pts is None else f"{frames[0].pts:.6f} s"
                    raise DecodeError(
                        f"{self.spec.name}: cannot resume exactly at frame {self.frame} ({self.pts:.6f} s): the "
                        f"decoder's first frame from there is at {got}; run without --resume to start it over"
                    )
            shifted = tuple(dataclasses.replace(m, index=m.index + self.frame) for m in frames)
            yield dataclasses.replace(inp, frames=shifted), ready
