"""Real footage at benchmark size: a real clip scaled to 1080p (or any size), retimed and looped.

The generated presets of :mod:`vidpipe.bench.generate` have no objects in them, so NMS, box
mapping and the device-to-host copy cost nothing there. :func:`build_real_clip` takes a real video
(by default the bundled street clip ``bikes.mp4``: people and bicycles), scales every frame to
``width x height``, encodes it once as H.264 at ``fps`` with a keyframe every ``gop`` frames and no
B-frames (as cameras send it), and repeats the encoded packets with shifted timestamps until
``frames`` frames (closed GOPs, so the result is a valid stream). Results are cached by name.
"""

from __future__ import annotations

import logging
import os
import time
from fractions import Fraction
from pathlib import Path

__all__ = ["build_real_clip", "bundled_street_clip"]

logger = logging.getLogger(__name__)


def bundled_street_clip() -> Path:
    """The real street video shipped with vidpipe (640x272, 25 fps, 250 frames)."""
    from importlib.resources import files

    return Path(str(files("vidpipe.data") / "bikes.mp4"))


def build_real_clip(
    out_dir: str | os.PathLike,
    *,
    source: str | os.PathLike | None = None,
    width: int = 1920,
    height: int = 1080,
    fps: int = 30,
    frames: int = 300,
    gop: int = 30,
    crf: int = 23,
    tiles: int = 1,
) -> Path:
    """Encode ``source`` (default: :func:`bundled_street_clip`) at ``width x height``, ``fps``,
    ``frames`` frames into ``out_dir`` (reused when present) and return the path.

    Each source frame is used once per loop; timestamps follow ``fps`` (the clip plays at that
    rate). Only the source's frames are encoded (once); longer clips repeat the encoded packets.

    ``tiles`` > 1 makes a crowded scene of the same footage: every frame is a ``tiles x tiles``
    grid of the source, each tile ``width // tiles x height // tiles`` and ``1 / tiles**2`` of the
    source's length later in it than the tile before (so the tiles show different moments), which
    gives the detector and a tracker several times the objects of one copy (the bundled clip at
    1080p, its 250 frames: 1.14 detections a frame with one tile, 3.91 with 2 x 2).
    """
    import av

    if not isinstance(tiles, int) or isinstance(tiles, bool) or not 1 <= tiles <= 8:
        raise ValueError(f"tiles must be an int in 1..8, got {tiles!r}")
    if not isinstance(frames, int) or isinstance(frames, bool) or frames < 1:
        raise ValueError(f"frames must be a positive int, got {frames!r}")
    if width // tiles < 16 or height // tiles < 16:
        raise ValueError(f"{width}x{height} is too small for {tiles} x {tiles} tiles")
    src = Path(source) if source is not None else bundled_street_clip()
    grid = f"-tiles{tiles}" if tiles > 1 else ""
    out = Path(out_dir) / f"{src.stem}-{width}x{height}{grid}-{fps}fps-{frames}f-gop{gop}.mp4"
    if out.exists() and out.stat().st_size > 0:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".part.mp4")
    rate = Fraction(fps)
    t0 = time.perf_counter()
    with av.open(str(src)) as inp, av.open(str(tmp), "w") as container:
        stream = container.add_stream(
            "libx264",
            rate=rate,
            options={"preset": "veryfast", "crf": str(crf),
                     "x264-params": f"keyint={gop}:min-keyint={gop}:scenecut=0:bframes=0"},
        )
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.codec_context.gop_size = gop
        n = 0
        for img in _frames(inp, width, height, tiles, limit=frames):
            img.pts, img.time_base = n, 1 / rate
            for packet in stream.encode(img):
                container.mux(packet)
            n += 1
        for packet in stream.encode():
            container.mux(packet)
    if n < frames:
        looped = out.with_suffix(".loop.mp4")
        _loop(tmp, looped, frames)
        tmp.unlink()
        looped.replace(out)
    else:
        tmp.replace(out)
    logger.info("built %s (%d frames, %.1f MB) in %.1f s", out, frames, out.stat().st_size / 1e6,
                time.perf_counter() - t0)
    return out


def _frames(inp, width: int, height: int, tiles: int, *, limit: int):
    """The source's frames (at most ``limit``) as ``width x height`` yuv420p frames, each a grid
    of ``tiles x tiles`` moments of the source (one tile: the frame itself, scaled)."""
    import av
    import numpy as np

    if tiles == 1:
        for n, frame in enumerate(inp.decode(video=0)):
            if n >= limit:
                return
            yield frame.reformat(width=width, height=height, format="yuv420p")
        return
    source = []
    for frame in inp.decode(video=0):
        source.append(frame)
        if len(source) >= limit:
            break
    count, cells = len(source), tiles * tiles
    tw, th = (width // tiles) & ~1, (height // tiles) & ~1
    for n in range(count):
        canvas = np.zeros((height, width, 3), np.uint8)
        for t in range(cells):
            part = source[(n + t * count // cells) % count]
            row, col = divmod(t, tiles)
            canvas[row * th:(row + 1) * th, col * tw:(col + 1) * tw] = part.to_ndarray(
                width=tw, height=th, format="rgb24")
        yield av.VideoFrame.from_ndarray(canvas, format="rgb24").reformat(format="yuv420p")


def _loop(src: Path, dst: Path, frames: int) -> None:
    """Write ``src``'s packets again and again (timestamps shifted) until ``frames`` frames."""
    import av

    with av.open(str(src)) as inp:
        s_in = inp.streams.video[0]
        packets = [(p.pts, p.dts, bytes(p), p.is_keyframe) for p in inp.demux(s_in) if p.size]
        template_path = str(src)
    step = packets[1][0] - packets[0][0] if len(packets) > 1 else 1
    span = max(p[0] for p in packets) + step
    with av.open(template_path) as inp, av.open(str(dst), "w") as out:
        s_out = out.add_stream_from_template(inp.streams.video[0])
        tb = inp.streams.video[0].time_base
        written, shift = 0, 0
        while written < frames:
            for pts, dts, data, key in packets:
                if written >= frames:
                    break
                p = av.Packet(data)
                p.pts, p.dts, p.time_base, p.stream = pts + shift, dts + shift, tb, s_out
                p.is_keyframe = key
                out.mux(p)
                written += 1
            shift += span
