"""Demuxing with PyAV: the compressed packets of a source's video stream, and its keyframes.

Shared by the decoders: the PyAV backend decodes these packets itself; hardware backends (NVDEC)
take :class:`~vidpipe.types.Packet` bytes, in Annex-B form for H.264/HEVC (``annexb=True``), and
split a file at the keyframes :meth:`Demuxer.keyframes` finds (demux only, nothing is decoded).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from vidpipe.decode.probe import discard_other_streams, is_url, open_input, read_packets, to_fraction
from vidpipe.errors import DecodeError, UnsupportedError
from vidpipe.sources.redact import redact_url, redacted_cause

__all__ = ["Demuxer", "Keyframe", "ANNEXB_FILTERS"]

logger = logging.getLogger(__name__)

#: codec name -> the FFmpeg bitstream filter turning its MP4/Matroska form into Annex-B.
ANNEXB_FILTERS: dict[str, str] = {"h264": "h264_mp4toannexb", "hevc": "hevc_mp4toannexb"}


@dataclass(frozen=True, slots=True)
class Keyframe:
    """A keyframe packet of the video stream, where decoding can start.

    Attributes:
        packet: the packet's number among the stream's packets, in decode order (0-based).
        pts: presentation timestamp in ``time_base`` units (``None`` if the container has none).
        time: ``pts`` in seconds from the start of the stream (``None`` if unknown).
        pos: byte offset of the packet in the file (``None`` if the demuxer does not say).
    """

    packet: int
    pts: int | None
    time: float | None
    pos: int | None


class Demuxer:
    """The video packets of one source, in decode order, from the current position.

    Args:
        source: path or URL.
        annexb: pass H.264/HEVC packets through ``h264_mp4toannexb``/``hevc_mp4toannexb`` so
            each packet is a start-code-delimited access unit with parameter sets in-band before
            keyframes (what NVDEC parses). Other codecs are passed unchanged.
        stream_id: written into every :class:`~vidpipe.types.Packet`.
        options: FFmpeg demuxer options (e.g. ``{"rtsp_transport": "tcp"}``).

    Use as a context manager or call :meth:`close`.
    """

    def __init__(
        self,
        source: str | os.PathLike,
        *,
        annexb: bool = False,
        stream_id: int = 0,
        options: dict[str, str] | None = None,
    ) -> None:
        #: what opens the input (a URL with its credentials); :attr:`source` is what is shown
        self.location = os.fspath(source)
        self.source = redact_url(self.location)
        self.stream_id = stream_id
        self._options = options
        self._container, self._stream = open_input(self.location, options=options)
        discard_other_streams(self._container, self._stream)
        self.codec: str = self._stream.codec_context.name
        self.time_base: Fraction = to_fraction(self._stream.time_base) or Fraction(1, 1000)
        self.stream_index: int = int(self._stream.index)
        #: the stream's first timestamp (time_base units); times in seconds count from it
        self.start_pts: int = int(self._stream.start_time or 0)
        self._bsf = self._make_filter() if annexb else None
        self.annexb = self._bsf is not None
        self.packets_read = 0

    # ---------------------------------------------------------------------------------- setup

    def _make_filter(self) -> Any | None:
        name = ANNEXB_FILTERS.get(self.codec)
        if name is None:
            return None
        from av.bitstream import BitStreamFilterContext

        try:
            return BitStreamFilterContext(name, in_stream=self._stream)
        except Exception as exc:  # noqa: BLE001 - FFmpeg error or a build without the filter
            raise UnsupportedError(
                f"{self.source}: cannot convert {self.codec} to Annex-B with the {name} "
                f"bitstream filter ({exc}); convert the file with ffmpeg -c copy -bsf:v {name}"
            ) from redacted_cause(exc)

    @property
    def container(self) -> str:
        """FFmpeg's name of the container format (``"mov,mp4,m4a,3gp,3g2,mj2"``, ``"matroska,webm"``, ...)."""
        return str(self._container.format.name)

    @property
    def extradata(self) -> bytes | None:
        """The codec's global header (avcC/hvcC/...; ``None`` if empty)."""
        data = self._stream.codec_context.extradata
        return bytes(data) if data else None

    # ----------------------------------------------------------------------------- iteration

    def _wrap(self, pkt: Any) -> Any:
        from vidpipe.types import Packet

        return Packet(
            data=bytes(pkt),
            pts=pkt.pts,
            dts=pkt.dts,
            time_base=self.time_base,
            is_key=bool(pkt.is_keyframe),
            stream_id=self.stream_id,
        )

    def raw_packets(self) -> Iterator[Any]:
        """PyAV packets of the video stream (unfiltered, empty flush packets dropped)."""
        import av

        try:
            for pkt in read_packets(self._container, self._stream):  # not demux(): see read_packets
                self.packets_read += 1
                yield pkt
        except av.error.FFmpegError as exc:
            reason = getattr(exc, "strerror", None) or exc
            raise DecodeError(
                f"{self.source}: reading packets stopped after packet {self.packets_read} ({reason}); "
                "the file may be truncated or damaged"
            ) from redacted_cause(exc)

    def packets(self) -> Iterator[Any]:
        """:class:`~vidpipe.types.Packet` objects in decode order (Annex-B when ``annexb``)."""
        if self._bsf is None:
            for pkt in self.raw_packets():
                yield self._wrap(pkt)
            return
        for pkt in self.raw_packets():
            for out in self._bsf.filter(pkt):
                yield self._wrap(out)
        for out in self._bsf.filter(None):  # drain; the filter is reset on the next seek
            yield self._wrap(out)

    def __iter__(self) -> Iterator[Any]:
        return self.packets()

    # ------------------------------------------------------------------------- random access

    def seek(self, seconds: float) -> None:
        """Move to the keyframe at or before ``seconds`` (from the start of the stream, as
        :attr:`Keyframe.time`); the next packets start there.

        ``seconds <= 0`` reopens the file instead: a seek to the first timestamp is not exact in
        every format (in MPEG-TS FFmpeg's timestamp search lands on a later keyframe)."""
        if seconds <= 0 and not is_url(self.location):
            self._container.close()
            self._container, self._stream = open_input(self.location, options=self._options)
            discard_other_streams(self._container, self._stream)
        else:
            ts = self.start_pts + int(round(seconds / self.time_base))
            self._container.seek(ts, stream=self._stream, backward=True, any_frame=False)
        if self._bsf is not None:
            self._bsf.flush()
        self.packets_read = 0  # numbering restarts: it no longer matches keyframes() numbers

    def keyframes(self) -> list[Keyframe]:
        """Every keyframe of the stream, from a scan of the packets (no decoding).

        Reads the whole stream from the start, then seeks back to the start.
        """
        self.seek(0.0)
        out: list[Keyframe] = []
        tb = self.time_base
        for number, pkt in enumerate(self.raw_packets()):
            if pkt.is_keyframe:
                pts = pkt.pts
                pos = pkt.pos if pkt.pos is not None and pkt.pos >= 0 else None
                time = None if pts is None else float((pts - self.start_pts) * tb)
                out.append(Keyframe(packet=number, pts=pts, time=time, pos=pos))
        self.seek(0.0)
        logger.debug("%s: %d keyframes", self.source, len(out))
        return out

    # ------------------------------------------------------------------------------ lifetime

    def close(self) -> None:
        """Close the file. Safe to call twice."""
        if self._container is not None:
            self._container.close()
            self._container = None

    def __enter__(self) -> "Demuxer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
