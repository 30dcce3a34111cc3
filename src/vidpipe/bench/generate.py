"""Benchmark video clips made with PyAV: ``1080p-h264``, ``1080p-hevc``, ``2160p-hevc``, ...

Content: a fine random texture panned across the frame plus drifting chroma, so every macroblock
changes every frame and the bitrate is high (about 13 Mbit/s for 1080p30 H.264 at the default
quality): a decoder-heavy clip, not a flat one that compresses to nothing. Keyframes every
``gop`` frames, no B-frames (``ultrafast``/``superfast`` presets, to keep generation quick).
Generated files are cached by name in the output folder.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

__all__ = ["VideoPreset", "VIDEO_PRESETS", "generate_video", "parse_presets"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class VideoPreset:
    """What ``--generate NAME`` makes."""

    width: int
    height: int
    codec: str  # "h264" | "hevc"
    frames: int
    pix_fmt: str = "yuv420p"


VIDEO_PRESETS: dict[str, VideoPreset] = {
    "720p-h264": VideoPreset(1280, 720, "h264", 1800),
    "1080p-h264": VideoPreset(1920, 1080, "h264", 1200),
    "1080p-hevc": VideoPreset(1920, 1080, "hevc", 1200),
    "1080p-hevc10": VideoPreset(1920, 1080, "hevc", 600, "yuv420p10le"),
    "2160p-hevc": VideoPreset(3840, 2160, "hevc", 300),
    "2160p-h264": VideoPreset(3840, 2160, "h264", 300),
}

_ENCODER = {"h264": "libx264", "hevc": "libx265"}


def parse_presets(text: str) -> list[str]:
    """``"1080p-h264,1080p-hevc"`` -> the names, checked against :data:`VIDEO_PRESETS`."""
    from vidpipe.errors import ConfigError

    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [n for n in names if n not in VIDEO_PRESETS]
    if bad or not names:
        raise ConfigError(f"invalid --generate {text!r}; expected a comma-separated list of {', '.join(VIDEO_PRESETS)}")
    return names


def generate_video(
    preset: str,
    out_dir: str | os.PathLike,
    *,
    frames: int | None = None,
    gop: int = 30,
    fps: int = 30,
    threads: int = 0,
) -> Path:
    """Encode the clip of ``preset`` into ``out_dir`` (reused when already there) and return its path.

    ``frames`` overrides the preset's count; ``gop`` is the keyframe interval.
    """
    import av
    import numpy as np

    spec = VIDEO_PRESETS[parse_presets(preset)[0]]
    n = int(frames or spec.frames)
    out = Path(out_dir) / f"{preset}-{n}f-gop{gop}.mp4"
    if out.exists() and out.stat().st_size > 0:
        logger.info("reusing %s", out)
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".part.mp4")
    w, h = spec.width, spec.height
    rng = np.random.default_rng(0)
    small = rng.integers(16, 236, (h // 8 + 16, w // 8 + 16), dtype=np.uint8)
    texture = np.kron(small, np.ones((8, 8), np.uint8))  # 8x8 blocks: high detail, cheap to make
    u0 = np.linspace(64, 192, w // 2, dtype=np.float32)[None, :].repeat(h // 2, 0)
    v0 = np.linspace(192, 64, h // 2, dtype=np.float32)[:, None].repeat(w // 2, 1)
    rate = Fraction(fps)
    t0 = time.perf_counter()
    params = f"keyint={gop}:min-keyint={gop}:scenecut=0:bframes=0"
    if spec.codec == "h264":
        options = {"preset": "ultrafast", "x264-params": params}
    else:
        options = {"preset": "ultrafast", "x265-params": f"log-level=error:{params}"}
    with av.open(str(tmp), "w") as container:
        stream = container.add_stream(_ENCODER[spec.codec], rate=rate, options=options)
        stream.width, stream.height, stream.pix_fmt = w, h, spec.pix_fmt
        cc = stream.codec_context
        cc.gop_size = gop
        cc.colorspace, cc.color_primaries, cc.color_trc, cc.color_range = 1, 1, 1, 1  # BT.709 limited
        cc.thread_count = threads
        arr = np.empty((h * 3 // 2, w), np.uint8)
        for i in range(n):
            dx, dy = (i * 3) % 64, (i * 2) % 64
            arr[:h] = texture[dy : dy + h, dx : dx + w]
            arr[h : h + h // 4] = np.clip(u0 + (i % 32), 0, 255).astype(np.uint8).reshape(h // 4, w)
            arr[h + h // 4 :] = np.clip(v0 - (i % 32), 0, 255).astype(np.uint8).reshape(h // 4, w)
            frame = av.VideoFrame.from_ndarray(arr, format="yuv420p")
            frame.colorspace, frame.color_range = 1, 1
            frame.pts = i
            frame.time_base = 1 / rate
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    tmp.replace(out)
    logger.info(
        "generated %s (%d frames, %.1f MB) in %.1f s", out, n, out.stat().st_size / 1e6, time.perf_counter() - t0
    )
    return out
