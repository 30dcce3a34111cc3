"""The source's audio in the output: packets copied (remuxed), or transcoded to AAC where the
container cannot hold the codec (G.711 ``pcm_mulaw``/``pcm_alaw`` in MP4 or FLV, PCM in MP4, ...).

Timestamps follow the video's: the output's time 0 is the first video frame's time in the source
(``origin``), and every audio packet keeps its time in the source minus ``origin``. Packets that
start before the first video frame (a ``--start`` trim) are skipped, audio from the end of the
last video frame on is dropped. Transcoded audio is AAC at 48 kHz (its encoder delay, 1024
samples, is then 21 ms; at G.711's 8 kHz it would be 128 ms, and a fragmented MP4, which has no
edit list, plays that delay). Audio follows the video as it is written
(:meth:`AudioTrack.mux_until`), so the muxer interleaves the two and a killed run's fragments hold
both.
"""

from __future__ import annotations

import logging
from fractions import Fraction
from typing import Any

from vidpipe.errors import SinkError, SourceError
from vidpipe.sources.redact import redact_url

__all__ = ["AudioTrack"]

logger = logging.getLogger(__name__)

#: samples FFmpeg's AAC encoder puts in front (its ``initial_padding``): its packets come
#: this much before the frames' pts. Frames are given pts that much later, so the first packet is
#: at 0: a negative one made the muxer shift every video frame after the first by 21 ms (the
#: first, already written, stayed: a 61 ms first frame at 25 fps, measured with PyAV).
_AAC_PRIMING = 1024


class AudioTrack:
    """The first audio stream of ``source`` added to ``output`` (an open PyAV output container).

    ``mode`` is ``"copy"`` or ``"aac"`` (transcoded), or ``None`` when the source has no audio
    (then nothing is added and every method does nothing).

    Raises:
        SourceError: ``source`` cannot be opened.
    """

    def __init__(self, source: str, output: Any, *, copyable) -> None:
        import av

        self._name = redact_url(source)
        try:
            self._in = av.open(source, "r")
        except Exception as exc:  # noqa: BLE001 - PyAV's many open errors
            raise SourceError(f"audio_from {self._name}: cannot open it ({type(exc).__name__}: "
                              f"{redact_url(str(exc))})") from None
        streams = self._in.streams.audio
        self.mode: str | None = None
        self.packets = 0
        self.source_codec: str | None = None
        self._start: float | None = None
        self._done = False
        self._pending: list[Any] = []
        if not streams:
            self._in.close()
            self._in = None
            return
        self._src = streams[0]
        codec = self._src.codec_context.name
        self.source_codec = codec
        if copyable(codec):
            self.mode = "copy"
            self._out = output.add_stream_from_template(self._src)
        else:
            self.mode = "aac"
            rate = 48000
            layout = "mono" if (self._src.codec_context.channels or 1) == 1 else "stereo"
            self._out = output.add_stream("aac", rate=rate, layout=layout)
            self._resampler = av.AudioResampler(format="fltp", layout=layout, rate=rate,
                                                frame_size=self._out.codec_context.frame_size or 1024)
            self._rate = rate
            self._next_sample: int | None = None
        self._tb = self._src.time_base
        self._demux = None

    @property
    def present(self) -> bool:
        return self.mode is not None

    def start(self, first_video_s: float) -> None:
        """Position the source at the first video frame's time (seconds, the source's timeline),
        which becomes the output's time 0."""
        if not self.present:
            return
        self._start = first_video_s
        self._offset = round(first_video_s / self._tb)  # origin in the source's time base
        if first_video_s > 1.0:
            try:
                self._in.seek(int(first_video_s / self._tb), stream=self._src, backward=True, any_frame=False)
            except Exception:  # noqa: BLE001 - unseekable: read from the start and skip
                logger.debug("audio_from %s: cannot seek; reading from the start", self._name)
        self._demux = self._in.demux(self._src)

    def _packets(self, until_s: float):
        """Source packets with ``pts < until_s`` (keeps the first packet past it for later)."""
        while True:
            if self._pending:
                pkt = self._pending[0]
            else:
                if self._demux is None or self._done:
                    return
                try:
                    pkt = next(self._demux)
                except StopIteration:
                    self._done = True
                    return
                if pkt.dts is None and pkt.pts is None:  # the demuxer's flush packet
                    continue
                self._pending.append(pkt)
            t = float((pkt.pts if pkt.pts is not None else pkt.dts) * self._tb)
            if t >= until_s:
                return
            self._pending.pop(0)
            if self._start is not None and t < self._start - 1e-6:
                continue  # starts before the first video frame
            yield pkt

    def mux_until(self, output: Any, until_s: float) -> None:
        """Mux the source's audio up to ``until_s`` seconds of the source's timeline (the video
        written so far)."""
        if not self.present or self._start is None:
            return
        try:
            for pkt in self._packets(until_s):
                if self.mode == "copy":
                    if pkt.pts is not None:
                        pkt.pts -= self._offset
                    if pkt.dts is not None:
                        pkt.dts -= self._offset
                    pkt.stream = self._out
                    output.mux(pkt)
                    self.packets += 1
                else:
                    self._transcode(output, pkt)
        except SinkError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise SinkError(f"audio from {self._name}: {type(exc).__name__}: {redact_url(str(exc))}") from None

    def _transcode(self, output: Any, pkt: Any) -> None:
        for frame in pkt.decode():
            self._encode(output, frame)

    def _encode(self, output: Any, frame: Any) -> None:
        if frame is not None and self._next_sample is None:
            t = float(frame.pts * self._tb) if frame.pts is not None else (self._start or 0.0)
            self._next_sample = max(0, int(round((t - (self._start or 0.0)) * self._rate)))
        for out in self._resampler.resample(frame):
            out.pts = self._next_sample + _AAC_PRIMING
            out.time_base = Fraction(1, self._rate)
            self._next_sample += out.samples
            for p in self._out.encode(out):
                output.mux(p)
                self.packets += 1

    def finish(self, output: Any, end_s: float) -> None:
        """Mux what is left up to ``end_s`` (the end of the last video frame, source's timeline) and
        flush the encoder."""
        if not self.present:
            return
        if self._start is None:
            self.close()
            return
        self.mux_until(output, end_s)
        if self.mode == "aac":
            try:
                if self._next_sample is not None:
                    self._encode(output, None)
                for p in self._out.encode(None):
                    output.mux(p)
                    self.packets += 1
            except Exception as exc:  # noqa: BLE001
                raise SinkError(f"audio from {self._name}: {type(exc).__name__}: {redact_url(str(exc))}") from None
        self.close()

    def close(self) -> None:
        if self._in is not None:
            self._in.close()
            self._in = None
            self._demux = None
