"""Video out: :class:`VideoWriter` encodes RGB frames (any device) to a file or a live stream
(RTMP, RTSP) with PyAV on a background thread; :func:`rgb_to_yuv420` is its device-side colour
conversion."""

from vidpipe.encode.writer import VideoWriter
from vidpipe.encode.yuv import matrix_for_height, rgb_to_yuv420

__all__ = ["VideoWriter", "rgb_to_yuv420", "matrix_for_height"]
