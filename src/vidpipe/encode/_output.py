"""Opening a :class:`~vidpipe.encode.VideoWriter`'s output: argument checks, the container, the
video stream (encoder options, colour tags, time base), the connection of live targets."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from vidpipe.encode.nvenc import NVENC_CODECS
from vidpipe.encode.targets import Target
from vidpipe.encode.yuv import AV_COLORSPACE, AV_PRIMARIES, AV_RANGE_LIMITED, AV_TRC, Matrix
from vidpipe.errors import ConfigError, SinkError
from vidpipe.sources.redact import redact_url

if TYPE_CHECKING:
    import torch

__all__ = ["TIME_BASE", "check_fps", "positive_int", "open_container", "add_video_stream", "add_copied_stream",
           "gop_frames", "start_encoding",
           "connect_error", "why", "pad_even", "checked_frame", "checked_planes"]

TIME_BASE = Fraction(1, 90000)
_GOP_SECONDS = 2.0
_CODEC_DEFAULTS: dict[str, dict[str, str]] = {
    "libx264": {"preset": "veryfast", "crf": "23"},
    "libx265": {"preset": "veryfast", "crf": "26", "x265-params": "log-level=error"},
}


def check_fps(value: Any) -> Fraction:
    try:
        f = Fraction(value).limit_denominator(1001 * 1000) if not isinstance(value, Fraction) else value
    except (TypeError, ValueError):
        raise ConfigError(f"fps={value!r}: expected a positive number of frames per second") from None
    if not (0 < f <= 1000):
        raise ConfigError(f"fps={value!r}: expected a positive number of frames per second up to 1000")
    return f


def positive_int(name: str, value: Any, high: int = 16384) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise ConfigError(f"{name}={value!r}: expected a whole number from 1 to {high}")
    return value


def why(exc: BaseException) -> str:
    """``Type: message`` of ``exc``, credentials masked."""
    return f"{type(exc).__name__}: {redact_url(str(exc))}" if str(exc) else type(exc).__name__


def connect_error(name: str, exc: BaseException, timeout_s: float) -> str:
    """The message of a live target that could not be opened (PyAV connects when the header is
    written, so both ``av.open`` and ``start_encoding`` failures land here)."""
    return (f"cannot publish to {name}: refused, or no answer within {timeout_s:g} s; is the server "
            f"running and the URL right? ({why(exc)})")


def open_container(target: Target, timeout_s: float) -> Any:
    """The PyAV output container of ``target``.

    Raises:
        SinkError: a missing folder, or PyAV cannot open it (its error, which may name the URL, is
            not chained).
    """
    import av

    if not target.live:
        parent = os.path.dirname(os.path.abspath(target.location))
        if not os.path.isdir(parent):
            raise SinkError(f"{target.name}: the folder {parent} does not exist; create it first")
    options = dict(target.container_options)
    if target.format == "rtsp":
        options["timeout"] = str(int(timeout_s * 1e6))  # the RTSP muxer's socket timeout
    try:
        return av.open(target.location, "w", format=target.format, container_options=options,
                       timeout=(timeout_s, timeout_s) if target.live else None)
    except Exception as exc:  # noqa: BLE001 - PyAV raises many kinds (OSError, ConnectionRefused, Timeout, ...)
        failure = SinkError(connect_error(target.name, exc, timeout_s) if target.live
                            else f"cannot create {target.name}: {why(exc)}")
    raise failure  # outside the except block: PyAV's error (it names the URL) is not chained


def add_video_stream(out: Any, target: Target, *, codec: str, fps: Fraction, width: int, height: int, matrix: Matrix,
                     options: Mapping[str, str] | None) -> Any:
    """Add the ``yuv420p`` video stream: a 1/90000 s time base, a keyframe every 2 s, the colour
    tags of ``matrix`` (limited range), the encoder's defaults with ``options`` over them.

    Raises:
        ConfigError: ``options`` not a mapping of texts.
    """
    s = out.add_stream(codec, rate=fps)
    cc = s.codec_context
    cc.width, cc.height = width, height
    cc.pix_fmt = "yuv420p"
    cc.time_base = TIME_BASE
    s.time_base = TIME_BASE
    cc.gop_size = gop_frames(fps)
    _tag_colour(cc, matrix)
    opts = dict(_CODEC_DEFAULTS.get(codec, {}))
    if target.live and codec in ("libx264", "libx265"):
        opts["tune"] = "zerolatency"
    if target.format in ("mp4", "mov", "flv"):
        # a fragmented MP4 has no edit list (FLV shifts negative decode times): B-frames'
        # reordering delay would shift every timestamp; without them each frame keeps its pts
        if codec == "libx264":
            opts["bf"] = "0"
        elif codec == "libx265":
            opts["x265-params"] = opts["x265-params"] + ":bframes=0"
    if options:
        bad = [k for k, v in options.items() if not isinstance(k, str) or not isinstance(v, str)]
        if bad:
            raise ConfigError(f"options: keys and values must be texts, got {bad[0]!r}")
        opts.update(options)
    cc.options = opts
    return s


def gop_frames(fps: Fraction) -> int:
    """Frames from one keyframe to the next: about two seconds."""
    return max(1, round(float(fps) * _GOP_SECONDS))


def _tag_colour(cc: Any, matrix: Matrix) -> None:
    cc.colorspace = AV_COLORSPACE[matrix]
    cc.color_primaries = AV_PRIMARIES[matrix]
    cc.color_trc = AV_TRC[matrix]
    cc.color_range = AV_RANGE_LIMITED


def add_copied_stream(out: Any, codec: str, sequence: bytes, *, fps: Fraction, width: int, height: int,
                      matrix: Matrix) -> Any:
    """Add a ``yuv420p`` video stream for packets encoded elsewhere (``codec``: ``"h264"`` or
    ``"hevc"``, Annex-B; ``sequence``: their parameter sets, the stream's header). No encoder is
    opened: the stream is made from a template that FFmpeg's raw ``codec`` demuxer reads from
    ``sequence``, then given the size, time base and colour tags of :func:`add_video_stream`."""
    import io

    import av

    with av.open(io.BytesIO(sequence), format=codec) as raw:
        s = out.add_stream_from_template(raw.streams.video[0])
    cc = s.codec_context
    cc.width, cc.height = width, height
    cc.pix_fmt = "yuv420p"
    cc.time_base = TIME_BASE
    cc.extradata = sequence
    cc.framerate = fps
    s.time_base = TIME_BASE
    _tag_colour(cc, matrix)
    return s


def start_encoding(out: Any, target: Target, timeout_s: float) -> None:
    """``out.start_encoding()``: opens the encoders, connects (RTMP) or announces (RTSP), writes the
    header. PyAV opens an RTMP connection with no timeout and holding the GIL (its ``timeout=`` and
    ``rw_timeout`` do not reach that connection), so an RTMP server is first checked with a
    bounded handshake of our own (:func:`~vidpipe.encode.targets.rtmp_handshake`); RTSP has the
    muxer's own socket ``timeout``."""
    if target.format == "flv" and target.live:
        from vidpipe.encode.targets import rtmp_handshake

        rtmp_handshake(target.location, timeout_s)
    out.start_encoding()


def pad_even(image: "torch.Tensor") -> "torch.Tensor":
    """``(3, H, W)`` padded to even ``H``/``W`` by repeating the last row/column."""
    import torch

    if image.shape[2] % 2:
        image = torch.cat((image, image[:, :, -1:]), dim=2)
    if image.shape[1] % 2:
        image = torch.cat((image, image[:, -1:, :]), dim=1)
    return image


def check_writer_args(*, width: Any, height: Any, fps: Any, codec: str, queue_frames: Any, timeout_s: Any):
    """A writer's arguments checked (``ConfigError`` naming the argument): ``(width, height, fps,
    queue_frames)``."""
    import av

    w, h = positive_int("width", width), positive_int("height", height)
    rate = check_fps(fps)
    q = positive_int("queue_frames", queue_frames, 1024)
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not 0 < timeout_s < math.inf:
        raise ConfigError(f"timeout_s={timeout_s!r}: expected a positive number of seconds")
    try:
        if codec not in NVENC_CODECS:  # (PyNvVideoCodec's, not FFmpeg's)
            av.codec.Codec(codec, "w")
    except Exception:  # noqa: BLE001 - unknown or not built in
        raise ConfigError(f"codec={codec!r}: not a video encoder of this PyAV/FFmpeg (try 'libx264' or "
                          "'libx265')") from None
    if codec == "libx265" and min(w, h) < 64:
        # measured: PyAV 18.1's libx265 corrupts the heap on some tiny frames (48x36)
        raise ConfigError(f"codec='libx265' needs frames of at least 64x64 pixels (got {w}x{h}); "
                          "use codec='libx264'")
    return w, h, rate, q


def checked_frame(name: str, image: Any, pts: Any, *, height: int, width: int, padded: tuple[int, int]):
    """``image`` checked as a ``(3, height, width)`` uint8 tensor and ``pts`` as seconds or
    ``None`` (``ValueError`` otherwise), padded to the even ``padded`` size when it differs."""
    import torch

    if not isinstance(image, torch.Tensor) or image.dtype != torch.uint8 or tuple(image.shape) != (3, height, width):
        raise ValueError(f"{name}: write() takes a (3, {height}, {width}) uint8 RGB tensor, got "
                         f"{type(image).__name__} {tuple(getattr(image, 'shape', ()))} {getattr(image, 'dtype', '')}")
    _check_pts(name, pts)
    return pad_even(image) if padded != (height, width) else image


def checked_planes(name: str, planes: Any, pts: Any, *, height: int, width: int):
    """``planes`` checked as a ``(height * 3 // 2, width)`` uint8 tensor of YUV 4:2:0 (``height``
    and ``width`` the encoded, even size) and ``pts`` as seconds or ``None`` (``ValueError``
    otherwise)."""
    import torch

    if (not isinstance(planes, torch.Tensor) or planes.dtype != torch.uint8
            or tuple(planes.shape) != (height * 3 // 2, width)):
        raise ValueError(f"{name}: write_yuv420() takes a ({height * 3 // 2}, {width}) uint8 tensor, got "
                         f"{type(planes).__name__} {tuple(getattr(planes, 'shape', ()))} {getattr(planes, 'dtype', '')}")
    _check_pts(name, pts)
    return planes


def _check_pts(name: str, pts: Any) -> None:
    if pts is not None and not (isinstance(pts, (int, float)) and math.isfinite(pts)):
        raise ValueError(f"{name}: pts={pts!r}: expected seconds (a finite number) or None")
