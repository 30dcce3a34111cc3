"""Benchmark video clips made with PyAV: ``1080p-h264``, ``1080p-hevc``, ``2160p-hevc``, ...

Content: a fine random texture panned across the frame plus drifting chroma, so every macroblock
changes every frame and the bitrate is high (about 13 Mbit/s for 1080p30 H.264 at the default
quality): a decoder-heavy clip, not a flat one that compresses to nothing. Keyframes every
``gop`` frames, no B-frames (``ultrafast`` preset, to keep generation quick).

Long clips are made quickly: ``encode`` frames are encoded once and the encoded packets are
written ``frames / encode`` times one after another with shifted timestamps (closed GOPs, so the
file is a valid stream of ``frames`` frames). Generated files are cached by name.

``street-720p`` / ``street-1080p`` are real footage instead, with people and bicycles in most
frames (about 1.2 detections a frame with the bundled model at 1080p): the bundled street clip
scaled, encoded once and looped (:func:`vidpipe.bench.realclip.build_real_clip`), so NMS, box
mapping, tracking and the device-to-host copy have work to do. ``street-crowd-1080p`` tiles the
same footage 2 x 2 (four moments of it in each frame): about 3.9 detections a frame.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

__all__ = ["VideoPreset", "VIDEO_PRESETS", "REAL_PRESETS", "generate_video", "parse_presets"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class VideoPreset:
    """What ``--generate NAME`` makes: ``frames`` frames (30 fps), of which the first ``encode``
    are encoded and then repeated (``None``: all encoded)."""

    width: int
    height: int
    codec: str  # "h264" | "hevc"
    frames: int
    pix_fmt: str = "yuv420p"
    encode: int | None = None


VIDEO_PRESETS: dict[str, VideoPreset] = {
    "720p-h264": VideoPreset(1280, 720, "h264", 6000, encode=1200),
    "1080p-h264": VideoPreset(1920, 1080, "h264", 6000, encode=1200),
    "1080p-hevc": VideoPreset(1920, 1080, "hevc", 6000, encode=1200),
    "1080p-hevc10": VideoPreset(1920, 1080, "hevc", 3000, "yuv420p10le", encode=600),
    "2160p-hevc": VideoPreset(3840, 2160, "hevc", 1200, encode=300),
    "2160p-h264": VideoPreset(3840, 2160, "h264", 1200, encode=300),
}

#: real footage (:func:`vidpipe.bench.realclip.build_real_clip`): name -> (width, height, frames,
#: tiles); ``street-crowd-1080p`` is a 2 x 2 grid of the clip at four moments (3.4x the objects)
REAL_PRESETS: dict[str, tuple[int, int, int, int]] = {
    "street-720p": (1280, 720, 6000, 1),
    "street-1080p": (1920, 1080, 6000, 1),
    "street-crowd-1080p": (1920, 1080, 6000, 2),
}

_ENCODER = {"h264": "libx264", "hevc": "libx265"}


def parse_presets(text: str) -> list[str]:
    """``"1080p-h264,1080p-hevc"`` -> the names, checked against :data:`VIDEO_PRESETS`."""
    from vidpipe.errors import ConfigError

    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [n for n in names if n not in VIDEO_PRESETS and n not in REAL_PRESETS]
    if bad or not names:
        raise ConfigError(
            f"invalid --generate {text!r}; expected a comma-separated list of {', '.join([*VIDEO_PRESETS, *REAL_PRESETS])}"
        )
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
    """Make the clip of ``preset`` in ``out_dir`` (reused when already there) and return its path.

    ``frames`` overrides the preset's count (then all of them are encoded, no repetition);
    ``gop`` is the keyframe interval.
    """
    import av
    import numpy as np

    name = parse_presets(preset)[0]
    if name in REAL_PRESETS:
        from vidpipe.bench.realclip import build_real_clip

        w, h, default_frames, tiles = REAL_PRESETS[name]
        return build_real_clip(out_dir, width=w, height=h, fps=fps, frames=int(frames or default_frames), gop=gop,
                               tiles=tiles)
    spec = VIDEO_PRESETS[name]
    n = int(frames or spec.frames)
    unique = n if frames or not spec.encode else min(n, spec.encode)
    out = Path(out_dir) / f"{preset}-{n}f-gop{gop}.mp4"
    if out.exists() and out.stat().st_size > 0:
        logger.info("reusing %s", out)
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    if unique < n:
        base = generate_video(preset, out_dir, frames=unique, gop=gop, fps=fps, threads=threads)
        _repeat(base, out, n)
        return out
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


def _repeat(src: Path, dst: Path, frames: int) -> None:
    """Write ``src``'s video packets again and again (timestamps shifted) until ``frames`` frames."""
    import av

    tmp = dst.with_suffix(".part.mp4")
    with av.open(str(src)) as inp:
        s_in = inp.streams.video[0]
        packets = [p for p in inp.demux(s_in) if p.size]
    span = max(p.pts for p in packets) + (packets[1].pts - packets[0].pts if len(packets) > 1 else 1)
    with av.open(str(src)) as inp, av.open(str(tmp), "w") as out:
        s_in = inp.streams.video[0]
        s_out = out.add_stream_from_template(s_in)
        written = 0
        shift = 0
        while written < frames:
            for p in inp.demux(s_in):
                if not p.size:
                    continue
                if written >= frames:
                    break
                p.pts += shift
                p.dts += shift
                p.stream = s_out
                out.mux(p)
                written += 1
            shift += span
            inp.seek(0, stream=s_in)
    tmp.replace(dst)
    logger.info("generated %s (%d frames, %.1f MB)", dst, frames, dst.stat().st_size / 1e6)
