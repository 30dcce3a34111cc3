"""What a video source is, read by PyAV without decoding: :func:`probe` -> :class:`StreamInfo`.

Also the PyAV helpers the demuxer and the PyAV decoder share: :func:`open_input` (opens a source
with clear :class:`~vidpipe.errors.SourceError` messages) and :func:`to_fraction` (PyAV 18 gives
``fractions.Fraction`` or ``None`` for rationals, PyAV 19 gives ``av.rational.AVRational``, falsy
when unset).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vidpipe.decode.base import StreamInfo
from vidpipe.decode.rotation import stream_orientation
from vidpipe.errors import SourceError
from vidpipe.sources.redact import guard_ffmpeg_logs, redact_text, redact_url, redacted_cause
from vidpipe.types import ColorSpec

if TYPE_CHECKING:
    import av.container
    import av.video.stream

__all__ = [
    "probe",
    "format_info",
    "open_input",
    "discard_other_streams",
    "read_packets",
    "to_fraction",
    "is_url",
    "color_from_tags",
]

logger = logging.getLogger(__name__)

_URL_TIMEOUT = 10.0  # seconds, for opening a URL and for each read from it
_URL_SCHEMES = ("rtsp", "rtsps", "rtmp", "rtmps", "http", "https", "srt", "udp", "tcp", "rtp", "file")

# FFmpeg AVColorSpace values -> matrix; AVColorRange values -> range.
_MATRIX_BY_SPACE = {1: "bt709", 4: "bt601", 5: "bt601", 6: "bt601", 7: "bt601", 9: "bt2020", 10: "bt2020"}
_RANGE_BY_TAG = {1: "limited", 2: "full"}
# FFmpeg demuxers that read a display matrix (MP4/MOV tkhd, Matroska projection): the formats
# whose first frame probe() decodes to read it where PyAV has no stream-level accessor (~20 ms
# at 1080p); other formats carry none.
_MATRIX_CONTAINERS = ("mov", "matroska")


def is_url(source: str) -> bool:
    """``True`` for ``scheme://...`` sources FFmpeg opens as a protocol (rtsp, http, ...)."""
    head, sep, _ = source.partition("://")
    return bool(sep) and head.lower() in _URL_SCHEMES


def to_fraction(value: Any) -> Fraction | None:
    """A PyAV rational (``Fraction``, ``AVRational`` or ``None``) as a ``Fraction``; ``None`` when
    unset, zero or undefined (``0/0``, ``1/0``)."""
    if value is None:
        return None
    num, den = int(value.numerator), int(value.denominator)
    if den == 0 or num == 0:
        return None
    return Fraction(num, den)


def color_from_tags(colorspace: int, color_range: int, pix_fmt: str | None, height: int) -> tuple[ColorSpec, bool]:
    """The :class:`ColorSpec` of FFmpeg colour tags, and whether the matrix was tagged.

    Unspecified matrix: BT.601 below 720 lines, else BT.709 (what players assume). Unspecified
    range: limited, except for the JPEG ``yuvj*`` pixel formats, which are full range.
    """
    matrix = _MATRIX_BY_SPACE.get(int(colorspace))
    specified = matrix is not None
    if matrix is None:
        matrix = "bt601" if height < 720 else "bt709"
    rng = _RANGE_BY_TAG.get(int(color_range))
    if rng is None:
        rng = "full" if pix_fmt and pix_fmt.startswith("yuvj") else "limited"
    return ColorSpec(matrix=matrix, range=rng), specified


def _ffmpeg_reason(exc: BaseException) -> str:
    """FFmpeg's reason for ``exc`` (``strerror``, else the message), credentials masked."""
    reason = getattr(exc, "strerror", None) or str(exc)
    return redact_text(str(reason).strip().rstrip("."))


def _check_path(source: str) -> Path:
    path = Path(source)
    try:
        st = path.stat()
    except FileNotFoundError:
        raise SourceError(f"no such file: {source}") from None
    except PermissionError:
        raise SourceError(f"cannot read {source} (permission denied)") from None
    except OSError as exc:
        raise SourceError(f"cannot read {source} ({exc.strerror or exc})") from None
    if path.is_dir():
        raise SourceError(
            f"{source} is a folder, not a video file; pass a video file, or the folder to "
            "`vidpipe detect` to read the images or videos inside it"
        )
    if st.st_size == 0:
        raise SourceError(f"{source} is empty (0 bytes)")
    if not os.access(path, os.R_OK):
        raise SourceError(f"cannot read {source} (permission denied)")
    return path


def _looks_like_mp4(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            head = fh.read(12)
    except OSError:
        return False
    return len(head) == 12 and head[4:8] == b"ftyp"


def open_input(
    source: str | os.PathLike, *, options: dict[str, str] | None = None, timeout: float | None = None
) -> tuple["av.container.InputContainer", "av.video.stream.VideoStream"]:
    """Open ``source`` with PyAV and return ``(container, first video stream)``.

    ``timeout``: seconds to wait for a URL to open and for each read (default 10 s for URLs, so
    a dead stream fails instead of hanging; none for files).

    Raises :class:`SourceError` naming the input for a missing path, a folder, an empty file, a
    file FFmpeg cannot read, or one without a video stream. The caller closes the container.
    """
    import av

    text = os.fspath(source)
    name = redact_url(text)  # what messages show; ``text`` (with any credentials) only opens it
    path = None if is_url(text) else _check_path(text)
    if timeout is None and path is None:
        timeout = _URL_TIMEOUT
    if path is None:
        guard_ffmpeg_logs()  # FFmpeg's own messages about this URL, should PyAV's logging be on
    failure: BaseException | None = None
    try:
        container = av.open(text, mode="r", options=options or {}, timeout=timeout, **_tag_decoding(av))
    except (av.error.FFmpegError, OSError) as exc:
        failure = exc
    if failure is not None:
        # raised here, outside the handler, so that PyAV's exception (whose message names the
        # URL with its credentials) is not kept as the context; a redacted stand-in is the cause
        raise _open_error(name, path, failure) from redacted_cause(failure)
    if not container.streams.video:
        kinds = [f"{s.type} {s.codec_context.name if s.codec_context else '?'}" for s in container.streams]
        container.close()
        listed = ", ".join(kinds) if kinds else "none"
        raise SourceError(f"{name} has no video stream (streams: {listed})")
    return container, container.streams.video[0]


def _open_error(name: str, path: Path | None, exc: BaseException) -> SourceError:
    """The :class:`SourceError` of a failed ``av.open`` of ``name`` (already redacted)."""
    import av

    if not isinstance(exc, av.error.FFmpegError):
        return SourceError(f"cannot open {name} ({_ffmpeg_reason(exc)})")
    reason = _ffmpeg_reason(exc)
    if path is None:
        return SourceError(f"cannot open {name} ({reason}); check the URL and that the stream is live")
    hint = "check the file or convert it with ffmpeg"
    if _looks_like_mp4(path):
        hint = (
            "it looks like an MP4 whose index (moov atom) is missing or damaged, as an "
            "interrupted recording leaves it; recover it with a tool such as untrunc, or re-record it"
        )
    return SourceError(f"{name} is not a video PyAV can read ({reason}); {hint}")


def discard_other_streams(container: Any, keep: Any) -> None:
    """Let the demuxer drop every stream's packets but ``keep``'s before they reach Python."""
    from av.stream import Discard

    for other in container.streams:
        if other.index != keep.index:
            other.discard = Discard.all


def _tag_decoding(av: Any) -> dict[str, str]:
    """``av.open`` arguments so damaged tags (not UTF-8) never stop a video from being read: PyAV
    18 and older decode them strictly unless told ``metadata_errors``; PyAV 19 dropped that
    argument and always decodes them with ``surrogateescape``."""
    try:
        major = int(str(av.__version__).split(".")[0])
    except ValueError:
        major = 0
    return {"metadata_errors": "replace"} if major < 19 else {}


def read_packets(container: Any, stream: Any) -> Iterator[Any]:
    """The packets of ``stream``, in file order, without PyAV's end-of-file flush packets.

    Use instead of ``container.demux(stream)``. Streams can appear in the middle of a file (an
    MPEG-TS packet on a PID the programme table never announced, which corrupt bytes easily make
    look like one); PyAV 18 and 19 then crash at the end of ``demux()``: its flush loop walks the
    grown stream count through a mask allocated for the streams known at the start (reading past
    it, so whether it crashes depends on memory contents) and indexes ``container.streams`` past
    its end (``IndexError: list index out of range``). The demuxer's
    end comes first as the flush packet of ``stream`` itself (no data, no timestamps); stopping
    there never reaches that loop. Decoders flush with ``stream.decode(None)`` themselves.
    FFmpeg read errors (:class:`av.error.FFmpegError`) propagate.
    """
    packets = container.demux(stream)
    try:
        for packet in packets:
            if packet.size == 0 and packet.pts is None and packet.dts is None:
                return  # the flush packet: the demuxer reached the end of the file
            if packet.stream.index == stream.index and packet.size:
                yield packet
    finally:
        packets.close()


def _chroma(fmt: Any) -> str | None:
    if fmt is None or fmt.has_palette:
        return None
    if fmt.is_rgb:
        return "444"
    colour = [c for c in fmt.components if not c.is_alpha]
    if len(colour) == 1:
        return "400"
    cw, ch = fmt.chroma_width(16), fmt.chroma_height(16)
    return {(8, 8): "420", (8, 16): "422", (16, 16): "444"}.get((cw, ch))


def _stream_matrix(stream: Any) -> bytes | None:
    """The stream's display matrix (36 bytes), or ``None`` when this PyAV cannot give it or the
    stream has none: PyAV 19 exposes it (``codec_context.coded_side_data``), PyAV 18 does not;
    :func:`~vidpipe.decode.rotation.stream_orientation` then reads the first frame's.
    """
    side = getattr(stream.codec_context, "coded_side_data", None)
    if side is None:
        return None
    try:
        raw = side.get("display_matrix")
    except Exception:  # noqa: BLE001 - defensive: a PyAV without the mapping
        return None
    return bytes(raw) if raw else None


def probe(source: str | os.PathLike, *, options: dict[str, str] | None = None) -> StreamInfo:
    """Describe the first video stream of ``source`` without decoding frames.

    Raises :class:`~vidpipe.errors.SourceError` (naming the input and what to try) when the
    source is missing, empty, a folder, not readable media, or has no video stream.
    """
    import av

    text = os.fspath(source)
    info_name = redact_url(text)
    container, stream = open_input(text, options=options)
    try:
        cc = stream.codec_context
        time_base = to_fraction(stream.time_base) or Fraction(1, 1000)
        fps_q = to_fraction(stream.average_rate) or to_fraction(stream.guessed_rate) or to_fraction(stream.base_rate)
        fps = float(fps_q) if fps_q else None
        if stream.duration:
            duration: float | None = float(stream.duration * time_base)
        elif container.duration:
            duration = container.duration / av.time_base
        else:
            duration = None
        if stream.frames and stream.frames > 0:
            frame_count, exact = int(stream.frames), True
        elif duration and fps:
            frame_count, exact = int(round(duration * fps)), False
        else:
            frame_count, exact = None, False
        start_time = float(stream.start_time * time_base) if stream.start_time is not None else None
        pix_fmt = cc.pix_fmt
        fmt = None
        if pix_fmt:
            try:
                fmt = av.VideoFormat(pix_fmt, 16, 16)
            except Exception:  # noqa: BLE001 - an exotic format PyAV cannot describe
                fmt = None
        bit_depth = max((c.bits for c in fmt.components if not c.is_alpha), default=8) if fmt else 8
        color, specified = color_from_tags(cc.colorspace, cc.color_range, pix_fmt, cc.height)
        bit_rate = cc.bit_rate or container.bit_rate or None
        width, height = int(cc.width), int(cc.height)
        if width <= 0 or height <= 0:
            raise SourceError(
                f"{info_name}: the video stream has no frame size (codec {cc.name}); the file may be "
                "damaged; check it with ffprobe or convert it with ffmpeg"
            )
        info = StreamInfo(
            source=text,
            container=container.format.name,
            codec=cc.name,
            profile=stream.profile or None,
            width=width,
            height=height,
            pix_fmt=pix_fmt,
            bit_depth=int(bit_depth),
            chroma=_chroma(fmt),
            fps=fps,
            frame_count=frame_count,
            frame_count_exact=exact,
            duration=duration,
            time_base=time_base,
            start_time=start_time,
            bit_rate=int(bit_rate) if bit_rate else None,
            color=color,
            color_specified=specified,
            stream_index=int(stream.index),
            extra={
                "colorspace_tag": int(cc.colorspace),
                "color_range_tag": int(cc.color_range),
                "color_primaries_tag": int(cc.color_primaries),
                "color_trc_tag": int(cc.color_trc),
                "base_rate": float(to_fraction(stream.base_rate) or 0) or None,
                "video_streams": len(container.streams.video),
                "audio_streams": len(container.streams.audio),
                "size_bytes": None if is_url(text) else Path(text).stat().st_size,
            },
        )
        # last: it may decode the first frame (PyAV 18 has no stream-level display matrix)
        decode = not is_url(text) and container.format.name.startswith(_MATRIX_CONTAINERS)
        turn, known = stream_orientation(container, stream, stream_matrix=_stream_matrix(stream), decode=decode)
        known = known or not (decode or is_url(text))  # a local file of a format without a matrix
        extra = {**info.extra, "rotation_known": known, "mirror": turn.mirror}
        info = dataclasses.replace(info, rotation=turn.degrees, extra=extra)
    finally:
        container.close()
    logger.debug("probe %s: %s %dx%d %s fps=%s", info.source, info.codec, info.width, info.height, info.pix_fmt, info.fps)
    return info


def format_info(info: StreamInfo) -> str:
    """Human-readable lines describing ``info`` (what ``vidpipe info`` prints)."""
    lines = [f"input      {info.source} ({info.container})"]
    profile = f" ({info.profile})" if info.profile else ""
    chroma = f" {info.chroma[0]}:{info.chroma[1]}:{info.chroma[2]}" if info.chroma else ""
    lines.append(
        f"video      {info.codec}{profile}, {info.width}x{info.height}, "
        f"{info.pix_fmt or 'unknown pixel format'} {info.bit_depth}-bit{chroma}"
    )
    lines.append(f"fps        {info.fps:.3f}" if info.fps else "fps        unknown")
    if info.frame_count is None:
        lines.append("frames     unknown")
    else:
        how = "" if info.frame_count_exact else " (estimated from the duration)"
        lines.append(f"frames     {info.frame_count}{how}")
    lines.append(f"duration   {info.duration:.3f} s" if info.duration is not None else "duration   unknown")
    if info.start_time:
        lines.append(f"start      {info.start_time:.3f} s")
    tagged = "tagged" if info.color_specified else "not tagged; assumed"
    lines.append(f"colour     {info.color.matrix} {info.color.range} range ({tagged})")
    if info.bit_rate:
        lines.append(f"bit rate   {info.bit_rate / 1000:.0f} kb/s")
    if info.rotation or info.extra.get("mirror"):
        w, h = (info.height, info.width) if info.rotation in (90, 270) else (info.width, info.height)
        turn = f"{info.rotation} degrees counter-clockwise" + (", then mirrored" if info.extra.get("mirror") else "")
        lines.append(f"rotation   {turn} (frames are delivered upright, {w}x{h})")
    others = []
    if info.extra.get("audio_streams"):
        others.append(f"{info.extra['audio_streams']} audio")
    if info.extra.get("video_streams", 1) > 1:
        others.append(f"{info.extra['video_streams'] - 1} more video")
    if others:
        lines.append(f"streams    {', '.join(others)} (only the first video stream is read)")
    return "\n".join(lines)
