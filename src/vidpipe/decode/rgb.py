"""PyAV frames to full-range RGB with the stream's own colour matrix and range.

8-bit frames (and 4:4:4 / 4:2:2 of any depth): swscale converts to planar ``gbrp`` (one reused
context per thread) and each plane is copied once into its channel of a ``(3, H, W)``
destination: no HWC->CHW transpose. For 8-bit input the result is bit-identical to PyAV's
``reformat(format="rgb24")`` and to the ``ffmpeg`` command line's rgb24: swscale's fast 4:2:0
path gives each chroma sample to its 2x2 luma block (no interpolation).

8-bit 4:2:0 frames of odd width or height take swscale's generic path (interpolated chroma) on the
command line too; vidpipe then converts exactly as ``ffmpeg ... -pix_fmt rgb24`` does (packed
``rgb24``, ``bicubic``: its default flags) and is bit-exact with it, except for streams whose
chroma is tagged as sited (MPEG-4 Part 2: the command line passes the siting to swscale, PyAV
cannot).

4:2:0 frames of more than 8 bits (HEVC Main10, H.264 High10, AV1 10-bit): swscale has no fast path
for them; its generic path *interpolates* chroma (bilinear in PyAV, bicubic in the ffmpeg
command line, whose rgb24 output then also loses levels: full white is 253), which differs from
the 8-bit result by up to ~180 levels at sharp colour edges. vidpipe gives each chroma sample to
its 2x2 luma block itself (numpy, into a reused ``yuv444p10le`` frame) and lets swscale convert
that 4:4:4 frame to ``gbrp``: the same chroma rule as 8-bit video and as the NVDEC path's P010
kernels (which compute in float: within 1 level of this), bit-exact with
``ffmpeg -vf scale=...:flags=neighbor -pix_fmt gbrp``, and the closest of these to the source
picture (measured in ``tests/decode/test_ffmpeg_parity.py``). (PyAV's own ``POINT`` interpolation
misplaces chroma by a sample: not usable here.)
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
#: 8-bit 4:2:0 formats that take swscale's generic path at odd sizes (converted as ffmpeg does)
_ODD_420 = frozenset({"yuv420p", "yuvj420p"})
#: little-endian planar 4:2:0 formats of more than 8 bits -> bits per sample
_DEEP_420 = {f"yuv420p{bits}le": bits for bits in (9, 10, 12, 14, 16)}


class FrameToRGB:
    """Converts the frames of one stream; callable from several threads at once.

    Frames tagged with a matrix/range use their tags; untagged frames use the stream's
    convention from :class:`StreamInfo` (BT.601 below 720 lines, else BT.709; limited range).
    """

    def __init__(self, info: StreamInfo) -> None:
        self.info = info
        self._local = threading.local()  # one VideoReformatter (SwsContext) per thread
        self._color_cache: dict[tuple[int, int, str], tuple[str, str]] = {}

    def _colors(self, frame: Any) -> tuple[str, str]:
        """``(matrix, range)`` names for ``frame``: its tags, else the stream's convention."""
        key = (int(frame.colorspace), int(frame.color_range), frame.format.name)
        hit = self._color_cache.get(key)
        if hit is None:
            spec, specified = color_from_tags(key[0], key[1], key[2], frame.height)
            matrix = spec.matrix if specified else self.info.color.matrix
            rng = spec.range if key[1] in (1, 2) or key[2].startswith("yuvj") else self.info.color.range
            hit = (matrix, rng)
            self._color_cache[key] = hit
            logger.debug("%s: %s %s -> RGB with %s %s range", self.info.source, key[2], key[:2], matrix, rng)
        return hit

    def __call__(self, frame: Any, out: "np.ndarray", threads: int = 1) -> None:
        """Convert ``frame`` to full-range RGB into ``out``, a ``(3, H, W)`` uint8 view.

        ``threads``: swscale's own slice threads (0: automatic). Safe to call from several
        threads at once (each has its own reformatter).
        """
        import numpy as np

        matrix, rng = self._colors(frame)
        depth = _DEEP_420.get(frame.format.name)
        if depth is not None:  # swscale would interpolate chroma: upsample it here, nearest
            frame = _deep_444(frame, self._local, depth)
        rf = getattr(self._local, "reformatter", None)
        if rf is None:
            from av.video.reformatter import VideoReformatter

            rf = self._local.reformatter = VideoReformatter()  # reused (PyAV 18 makes one per frame)
        colour = {
            "src_colorspace": _SWS_MATRIX[matrix],
            "dst_colorspace": _SWS_MATRIX[matrix],
            "src_color_range": _SWS_RANGE[rng],
            "dst_color_range": _SWS_RANGE["full"],
            "threads": threads,
        }
        if frame.format.name in _ODD_420 and (frame.width % 2 or frame.height % 2):
            packed = rf.reformat(frame, format="rgb24", interpolation="BICUBIC", **colour)
            out[...] = packed.to_ndarray().transpose(2, 0, 1)
            return
        planar = rf.reformat(frame, format="gbrp", **colour)
        h, w = frame.height, frame.width
        for plane, channel in zip(planar.planes, _GBRP_TO_RGB):
            rows = np.frombuffer(plane, dtype=np.uint8).reshape(plane.height, plane.line_size)
            out[channel] = rows[:h, :w]


def _upsample_into(plane: Any, chroma: "np.ndarray", h: int, w: int) -> None:
    """Write ``chroma`` (``ceil(h/2) x ceil(w/2)``) into the full-size ``plane``, each sample over
    its 2x2 block."""
    import numpy as np

    dst = np.frombuffer(plane, dtype=np.uint16).reshape(plane.height, plane.line_size // 2)[:h, :w]
    hh, ww = h // 2, w // 2
    dst[0::2, 0::2] = chroma
    dst[1::2, 0::2] = chroma[:hh]
    dst[0::2, 1::2] = chroma[:, :ww]
    dst[1::2, 1::2] = chroma[:hh, :ww]


def _deep_444(frame: Any, local: Any, depth: int) -> Any:
    """``frame`` (``yuv420p{depth}le``) as a ``yuv444p{depth}le`` frame with each chroma sample
    over its 2x2 block (a per-thread frame, reused)."""
    import av
    import numpy as np

    h, w = frame.height, frame.width
    fmt = f"yuv444p{depth}le"
    out = getattr(local, "deep444", None)
    if out is None or (out.width, out.height, out.format.name) != (w, h, fmt):
        out = local.deep444 = av.VideoFrame(w, h, fmt)
    src_y, src_u, src_v = (
        np.frombuffer(p, dtype=np.uint16).reshape(p.height, p.line_size // 2)[:, : p.width] for p in frame.planes
    )
    dst_y = np.frombuffer(out.planes[0], dtype=np.uint16).reshape(h, out.planes[0].line_size // 2)
    dst_y[:, :w] = src_y
    _upsample_into(out.planes[1], src_u, h, w)
    _upsample_into(out.planes[2], src_v, h, w)
    return out
