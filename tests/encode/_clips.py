"""Generated inputs for the encode tests: decoded frames of a clip, a clip with G.711 audio."""

from __future__ import annotations

import math
from pathlib import Path

import av
import numpy as np


def decoded(path: str | Path) -> list[tuple[np.ndarray, float]]:
    """Every frame of ``path`` as ``(H, W, 3)`` uint8 RGB (PyAV/swscale) and its pts in seconds."""
    with av.open(str(path)) as f:
        return [(fr.to_ndarray(format="rgb24"), float(fr.pts * fr.time_base)) for fr in f.decode(video=0)]


def with_g711(video: str | Path, dst: str | Path, *, codec: str = "pcm_mulaw", rate: int = 8000) -> Path:
    """``video``'s video stream remuxed into ``dst`` (.mov/.mkv) beside a ``codec`` 440 Hz tone
    as long as the video (G.711, mono, ``rate`` Hz, as IP cameras send)."""
    dst = Path(dst)
    with av.open(str(video)) as src, av.open(str(dst), "w") as out:
        vin = src.streams.video[0]
        vout = out.add_stream_from_template(vin)
        aout = out.add_stream(codec, rate=rate)
        aout.layout = "mono"
        seconds = float(vin.duration * vin.time_base) if vin.duration else 2.0
        n = int(seconds * rate)
        tone = (0.3 * np.sin(2 * math.pi * 440 * np.arange(n) / rate) * 32767).astype(np.int16)
        for start in range(0, n, 400):
            frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(tone[None, start:start + 400]), format="s16",
                                               layout="mono")
            frame.sample_rate = rate
            frame.pts = start
            for p in aout.encode(frame):
                out.mux(p)
        for p in aout.encode():
            out.mux(p)
        for pkt in src.demux(vin):
            if pkt.dts is None:
                continue
            pkt.stream = vout
            out.mux(pkt)
    return dst


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return math.inf if mse == 0 else 10 * math.log10(255.0 ** 2 / mse)
