"""PyAV frames to full-range RGB with the stream's own colour matrix and range.

swscale converts to planar ``gbrp`` (one reused context per thread) and each plane is copied once
into its channel of a ``(3, H, W)`` destination: no HWC->CHW transpose. For 8-bit input the result
is bit-identical to PyAV's ``reformat(format="rgb24")`` (the reference of :mod:`vidpipe.ops.color`);
for 10-bit input it is closer to the source (full white is 255, where rgb24 gives 253).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from vidpipe.decode.base import StreamInfo
from vidpipe.decode.probe import color_from_tags

if TYPE_CHECKING:
    import numpy as np

__all__ = ["FrameToRGB"]

logger = logging.getLogger(__name__)

_SWS_MATRIX = {"bt601": 5, "bt709": 1, "bt2020": 9}  # av.video.reformatter.Colorspace values
_SWS_RANGE = {"limited": 1, "full": 2}  # av.video.reformatter.ColorRange MPEG / JPEG
_GBRP_TO_RGB = (1, 2, 0)  # gbrp planes G, B, R -> channels 1, 2, 0


class FrameToRGB:
    """Converts the frames of one stream; callable from several threads at once.

    Frames tagged with a matrix/range use their tags; untagged frames use the stream's
    convention from :class:`StreamInfo` (BT.601 below 720 lines, else BT.709; limited range).
    """

    def __init__(self, info: StreamInfo) -> None:
        self.info = info
        self._local = threading.local()  # one VideoReformatter (SwsContext) per thread
        self._color_cache: dict[tuple[int, int, str], tuple[int, int]] = {}

    def _sws_colors(self, frame: Any) -> tuple[int, int]:
        key = (int(frame.colorspace), int(frame.color_range), frame.format.name)
        hit = self._color_cache.get(key)
        if hit is None:
            spec, specified = color_from_tags(key[0], key[1], key[2], frame.height)
            matrix = spec.matrix if specified else self.info.color.matrix
            rng = spec.range if key[1] in (1, 2) or key[2].startswith("yuvj") else self.info.color.range
            hit = (_SWS_MATRIX[matrix], _SWS_RANGE[rng])
            self._color_cache[key] = hit
            logger.debug("%s: %s %s -> RGB with %s %s range", self.info.source, key[2], key[:2], matrix, rng)
        return hit

    def __call__(self, frame: Any, out: "np.ndarray", threads: int = 1) -> None:
        """Convert ``frame`` to full-range RGB into ``out``, a ``(3, H, W)`` uint8 view.

        ``threads``: swscale's own slice threads (0: automatic). Safe to call from several
        threads at once (each has its own reformatter).
        """
        import numpy as np

        rf = getattr(self._local, "reformatter", None)
        if rf is None:
            from av.video.reformatter import VideoReformatter

            rf = self._local.reformatter = VideoReformatter()  # reused (PyAV 18 makes one per frame)
        matrix, rng = self._sws_colors(frame)
        planar = rf.reformat(
            frame,
            format="gbrp",
            src_colorspace=matrix,
            dst_colorspace=matrix,
            src_color_range=rng,
            dst_color_range=_SWS_RANGE["full"],
            threads=threads,
        )
        h, w = frame.height, frame.width
        for plane, channel in zip(planar.planes, _GBRP_TO_RGB):
            rows = np.frombuffer(plane, dtype=np.uint8).reshape(plane.height, plane.line_size)
            out[channel] = rows[:h, :w]

