"""Open a live input exactly once per connection: URLs, webcams and files played as cameras.

:func:`live_target` says what a :class:`~vidpipe.sources.spec.SourceSpec` is opened as
(:class:`Target`); :func:`open_target` opens it with PyAV (one ``av.open``, no separate probe)
and returns a :class:`Connection`: the container, its first video stream and a
:class:`~vidpipe.decode.base.StreamInfo` read from that same open.

FFmpeg options per input (:func:`ffmpeg_options`):

- every URL: ``av.open(timeout=(open_timeout, read_timeout))`` (PyAV's interrupt callback: it
  bounds the open and every read, whatever the protocol) (not ``fflags=nobuffer``: it drops
  the packets read while probing, the first keyframe among them),
  ``flags=low_delay``, ``probesize=32768`` bytes and ``analyzeduration=100000`` µs: FFmpeg's
  5 MB / 5 s defaults add seconds to every (re)connect. Measured here (320x240 15 fps, 1 s GOP,
  median of 4-5 opens, open -> first decoded frame): HTTP MPEG-TS 2.14 s with 256 kB / 1 s,
  1.14 s with these; RTMP (nginx) 3.0 -> 2.0 s; RTSP 1.7 -> 1.2 s, all with ``nobuffer``
  still on; without it (the probed keyframe kept, 5 opens each, loaded 2-core machine): RTSP
  0.32-0.61 s (median 0.51), RTMP 0.50-1.63 s (median 1.20). Going lower (32 bytes / 0) opens
  faster still but may leave the pixel format and size unknown until the first frame (then
  NVDEC cannot be chosen at open);
- ``rtsp(s)://``: ``rtsp_transport`` ``tcp`` (default) or ``udp``, ``timeout`` = read_timeout
  in µs (socket I/O; FFmpeg >= 5 renamed ``stimeout`` to ``timeout``; its listen timeout is now
  ``listen_timeout``);
- ``rtmp(s)://``: ``rw_timeout`` in µs. Never ``timeout``: for RTMP it is a listen timeout in
  seconds and turns the client into a server (``-h protocol=rtmp``: "Implies -rtmp_listen 1");
- ``http(s)://`` (HLS ``.m3u8``, MPEG-TS): ``rw_timeout`` and ``timeout`` in µs (the HLS demuxer
  passes ``rw_timeout`` on to the playlist and segment requests);
- ``srt://``: ``timeout`` (µs) and ``connect_timeout`` (ms); an FFmpeg without libsrt (the PyAV
  wheels have none) gives :class:`~vidpipe.errors.UnsupportedError`;
- webcams (``/dev/videoN``, or a bare index ``N``: ``/dev/video{N}``): format ``v4l2``;
- files played at their own rate (``LiveOptions.realtime``): opened as files, no options.

Errors: :class:`OpenFailed` (transient: refused, timed out, 404, a server not up yet: retried)
or a :class:`~vidpipe.errors.VidpipeError` that can never succeed (:func:`is_permanent`): no
such protocol, no such webcam device or file, no video stream. Every message names the input by
its redacted name and passes FFmpeg's own text through
:func:`~vidpipe.sources.redact.redact_text`.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import threading
import time
from dataclasses import dataclass, field
from fractions import Fraction
from urllib.parse import urlsplit
from typing import TYPE_CHECKING, Any, Literal

from vidpipe.errors import SourceError, UnsupportedError, VidpipeError
from vidpipe.sources.redact import redact_text

if TYPE_CHECKING:
    from vidpipe.decode.base import StreamInfo
    from vidpipe.sources.options import LiveOptions
    from vidpipe.sources.spec import SourceSpec

__all__ = [
    "Target", "Connection", "OpenFailed", "live_target", "ffmpeg_options", "open_target", "is_permanent",
    "webcam_device",
]  # fmt: skip

logger = logging.getLogger(__name__)

_WEBCAM_PATH = re.compile(r"^/dev/video\d+$")
_WEBCAM_INDEX = re.compile(r"^\d{1,3}$")
#: probesize (bytes) and analyzeduration (µs) for live inputs: quick opens
PROBESIZE = 32_768
ANALYZEDURATION = 100_000


class OpenFailed(SourceError):
    """A live input could not be opened or read this time (retried: the server may come back).
    ``reason``: the cause alone (redacted), without the input's name."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason if reason is not None else message


@dataclass(frozen=True)
class Target:
    """What one live spec is opened as.

    Attributes:
        kind: ``"url"`` (a network stream), ``"webcam"`` (a V4L2 device) or ``"file"`` (a file
            played at its own frame rate).
        location: what ``av.open`` gets (a bare webcam index becomes ``/dev/videoN``).
        name: the redacted name shown everywhere.
        scheme: the URL scheme in lower case (``None`` for webcams and files).
        format: the FFmpeg input format to force (``"v4l2"`` for webcams), else ``None``.
    """

    kind: Literal["url", "webcam", "file"]
    location: str
    name: str
    scheme: str | None = None
    format: str | None = None


#: schemes that always connect to a server, so a URL of theirs without a host is a mistake
_CLIENT_SCHEMES = frozenset({"rtsp", "rtsps", "rtmp", "rtmps", "http", "https"})


def webcam_device(text: str) -> str | None:
    """``/dev/videoN`` for a webcam input (``/dev/videoN`` itself, or a bare index ``N`` when no
    file of that name exists), else ``None``."""
    if _WEBCAM_PATH.match(text):
        return text
    if _WEBCAM_INDEX.match(text) and not os.path.exists(text):
        return f"/dev/video{int(text)}"
    return None


def live_target(spec: "SourceSpec") -> Target:
    """The :class:`Target` of ``spec`` (``kind="live"``: a URL or webcam; ``kind="file"``: a
    file played at its own rate)."""
    loc = spec.location
    if spec.kind == "file":
        return Target("file", loc, spec.name)
    device = webcam_device(loc)
    if device is not None:
        return Target("webcam", device, spec.name, format="v4l2")
    head, sep, _ = loc.partition("://")
    if not sep:
        raise SourceError(f"{spec.name} is not a stream URL or a webcam (/dev/videoN or an index like 0)")
    try:  # a malformed URL can never open: fail now instead of retrying it forever
        host = urlsplit(loc).hostname
    except ValueError as exc:
        raise SourceError(f"{spec.name} is not a valid URL ({exc})") from None
    if not host and head.lower() in _CLIENT_SCHEMES:  # udp://:1234, srt://:9000?mode=listener listen
        raise SourceError(f"{spec.name} names no host; expected e.g. {head.lower()}://HOST[:PORT]/PATH")
    return Target("url", loc, spec.name, scheme=head.lower())


def ffmpeg_options(target: Target, options: "LiveOptions") -> dict[str, str]:
    """The FFmpeg options ``av.open`` gets for ``target`` (see the module docstring)."""
    if target.kind == "file":
        return {}
    # no fflags=nobuffer: it discards the packets read while probing, i.e. the first keyframe,
    # so every connection waited a whole GOP for its first frame (and a short HTTP file lost it)
    out = {"flags": "low_delay"}
    if target.kind == "webcam":
        return out
    read_us = str(int(options.read_timeout * 1_000_000))
    out.update(probesize=str(PROBESIZE), analyzeduration=str(ANALYZEDURATION))
    scheme = target.scheme or ""
    if scheme in ("rtsp", "rtsps"):
        out.update(rtsp_transport=options.rtsp_transport, timeout=read_us)
    elif scheme in ("rtmp", "rtmps"):
        out.update(rw_timeout=read_us)  # never "timeout": it makes RTMP listen
    elif scheme in ("http", "https"):
        out.update(rw_timeout=read_us, timeout=read_us)
    elif scheme == "srt":
        out.update(timeout=read_us, connect_timeout=str(int(options.open_timeout * 1000)))
    elif scheme in ("tcp", "udp"):
        out.update(timeout=read_us)
    return out


def is_permanent(exc: BaseException) -> bool:
    """``True`` for errors retrying can never fix (the source then fails): a missing protocol,
    webcam device or file, an input without video, a codec nothing here decodes, credentials the
    server refuses (401/403)."""
    return isinstance(exc, VidpipeError) and not isinstance(exc, OpenFailed)


def _reason(exc: BaseException) -> str:
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return redact_text(str(text)).strip().rstrip(".")


def _check_webcam(target: Target) -> None:
    try:
        st = os.stat(target.location)
    except FileNotFoundError:
        raise SourceError(
            f"no webcam at {target.location} (input {target.name}): the device does not exist; "
            "list cameras with `v4l2-ctl --list-devices` or `ls /dev/video*`"
        ) from None
    except OSError as exc:
        raise SourceError(f"cannot use webcam {target.location} ({exc.strerror or exc})") from None
    if not stat.S_ISCHR(st.st_mode):
        raise SourceError(f"{target.location} is not a video device (input {target.name})")
    if not os.access(target.location, os.R_OK | os.W_OK):
        raise SourceError(
            f"cannot open webcam {target.location} (permission denied); add the user to the 'video' group"
        )


@dataclass
class Connection:
    """One open live input (owned by the thread reading it; see :meth:`release`).

    Attributes:
        container / stream: PyAV's input container and its first video stream.
        info: the stream as :class:`~vidpipe.decode.base.StreamInfo` (``source`` is the
            redacted name), read from this open: no second open to probe.
        opened_at: ``time.monotonic()`` when ``av.open`` returned; ``open_seconds``: how long
            it took.
    """

    target: Target
    container: Any
    stream: Any
    info: "StreamInfo"
    opened_at: float
    open_seconds: float
    _users: int = 2  # the packet reader and the decoder
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def release(self) -> None:
        """One user (reader or decoder) is done; the last one closes the container, so the
        decoder never uses a codec context whose container is gone."""
        with self._lock:
            self._users -= 1
            last = self._users == 0
        if last:
            self.close()

    def close(self) -> None:
        c, self.container = self.container, None
        if c is not None:
            try:
                c.close()
            except Exception as exc:  # noqa: BLE001 - a dead connection may fail to close cleanly
                logger.debug("%s: closing: %s", self.target.name, _reason(exc))

    def camera_epoch(self) -> float | None:
        """UTC seconds of the stream's timestamp origin from RTCP sender reports
        (``AVFormatContext.start_time_realtime``, set by FFmpeg's RTSP demuxer once the first
        sender report arrives), else ``None``."""
        c = self.container
        if c is None:
            return None
        value = getattr(c, "start_time_realtime", None)
        if value is None or value <= 0:
            return None
        return value / 1_000_000


def open_target(target: Target, options: "LiveOptions", *, first: bool = False) -> Connection:
    """Open ``target`` once with PyAV; see the module docstring for options and errors.

    ``first``: no connection to this input has opened yet in this run. Then a server that
    answers but refuses the stream (HTTP/RTSP 4xx such as 404) or sends something that is not a
    video is a mistake in the input, not an offline camera: :class:`SourceError` (the source
    fails with the reason). Once the input has been live, the same answers are retried (a camera
    being reconfigured or restarted). Unreachable servers (refused, timed out) are always
    retried: a camera may start offline.
    """
    import av

    from vidpipe.decode.probe import discard_other_streams

    if target.kind == "webcam":
        _check_webcam(target)
    elif target.kind == "file" and not os.path.isfile(target.location):
        raise SourceError(f"no such file: {target.name}")
    timeout = None if target.kind == "file" else (options.open_timeout, options.read_timeout)
    t0 = time.monotonic()
    try:
        container = av.open(
            target.location, mode="r", format=target.format, options=ffmpeg_options(target, options), timeout=timeout
        )
    except av.error.ProtocolNotFoundError as exc:
        raise UnsupportedError(
            f"cannot open {target.name}: this PyAV's FFmpeg has no {target.scheme} protocol "
            f"({_reason(exc)}); use a PyAV built with it (e.g. FFmpeg with libsrt for srt://)"
        ) from None
    except (av.error.HTTPUnauthorizedError, av.error.HTTPForbiddenError) as exc:
        # a camera that refuses the credentials is misconfigured, not offline: retrying would
        # hide the mistake (and hammer the camera's login); fail with the reason
        raise SourceError(
            f"cannot open {target.name}: the server refused the credentials ({_reason(exc)}); "
            "check the user and password in the URL"
        ) from None
    except av.error.FFmpegError as exc:
        if target.kind == "file":
            raise SourceError(f"{target.name} is not a video PyAV can read ({_reason(exc)})") from None
        if first and isinstance(exc, (av.error.HTTPClientError, av.error.InvalidDataError)):
            raise SourceError(
                f"cannot open {target.name} ({_reason(exc)}); the server answered but has no video stream "
                "there: check the URL's path"
            ) from None
        raise OpenFailed(f"cannot open {target.name} ({_reason(exc)})", _reason(exc)) from None
    except OSError as exc:
        raise OpenFailed(f"cannot open {target.name} ({_reason(exc)})", _reason(exc)) from None
    t1 = time.monotonic()
    try:
        if not container.streams.video:
            raise SourceError(f"{target.name} has no video stream")
        stream = container.streams.video[0]
        discard_other_streams(container, stream)
        info = stream_info(target, container, stream)
    except BaseException:
        container.close()
        raise
    return Connection(target, container, stream, info, opened_at=t1, open_seconds=t1 - t0)


def stream_info(target: Target, container: Any, stream: Any) -> "StreamInfo":
    """:class:`~vidpipe.decode.base.StreamInfo` of an open live stream (what the open read; a
    size of 0 means the parameters come with the first frame)."""
    import av

    from vidpipe.decode.base import StreamInfo
    from vidpipe.decode.probe import _chroma, color_from_tags, to_fraction

    cc = stream.codec_context
    tb = to_fraction(stream.time_base) or Fraction(1, 90000)
    fps_q = to_fraction(stream.average_rate) or to_fraction(stream.guessed_rate) or to_fraction(stream.base_rate)
    pix_fmt = cc.pix_fmt
    fmt = None
    if pix_fmt:
        try:
            fmt = av.VideoFormat(pix_fmt, 16, 16)
        except Exception:  # noqa: BLE001 - exotic format
            fmt = None
    bits = max((c.bits for c in fmt.components if not c.is_alpha), default=8) if fmt else 8
    color, specified = color_from_tags(cc.colorspace, cc.color_range, pix_fmt, cc.height or 0)
    return StreamInfo(
        source=target.name,
        container=container.format.name,
        codec=cc.name,
        profile=stream.profile or None,
        width=int(cc.width or 0),
        height=int(cc.height or 0),
        pix_fmt=pix_fmt,
        bit_depth=int(bits),
        chroma=_chroma(fmt),
        fps=float(fps_q) if fps_q else None,
        frame_count=None,
        frame_count_exact=False,
        duration=None,
        time_base=tb,
        start_time=float(stream.start_time * tb) if stream.start_time is not None else None,
        bit_rate=None,
        color=color,
        color_specified=specified,
        stream_index=int(stream.index),
        extra={"live": target.kind, "reorder": _reorder_depth(cc)},
    )


def _reorder_depth(cc: Any) -> int | None:
    """Frames the stream's decoder holds back to reorder (``0``: no B-frames, decode order is
    display order), as FFmpeg read it from the stream's parameters; ``None`` when unknown."""
    depth = getattr(cc, "reorder_depth", None)
    if depth is None:
        has_b = getattr(cc, "has_b_frames", None)
        return None if has_b is None else int(bool(has_b))
    return int(depth)
