"""Test media made with PyAV: real encoded clips with known content, frame counts and timestamps.

Every clip is rendered in RGB, converted to YUV here in numpy with the requested matrix and range
(independently of swscale, so decoders are checked against an outside reference), encoded with a
real encoder and muxed into the container named by the file suffix. The stream is *tagged* with
the matrix and range, so a decoder that reads the tags reproduces the RGB pattern.

Patterns (all with a frame-number stamp in the top band unless ``stamp=False``):

- ``boxes``: pure red, green and blue boxes moving left/right over a grey background, one lane
  each; :attr:`Clip.boxes` gives every box of every frame.
- ``bars``: eight static full-intensity colour bars (:data:`BAR_COLORS`).
- ``gradient``: red ramp along x, green ramp along y, blue level changing with the frame.

The stamp is ``STAMP_BITS`` black/white blocks across the top ``STAMP_ROWS`` rows encoding the frame
number (mod 2**STAMP_BITS); :func:`read_stamp` reads it back from a decoded RGB frame, so tests can
tell which frame a decoder delivered.

Usage from tests: ``from media import make_video`` (tests/conftest.py puts tests/ on sys.path).
"""

from __future__ import annotations

import math
import os
import shutil
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

__all__ = [
    "Clip",
    "make_video",
    "make_size_change",
    "vfr_times",
    "make_audio",
    "make_empty",
    "make_text",
    "truncate",
    "corrupt_middle",
    "read_tags",
    "read_stamp",
    "rgb_to_yuv",
    "available_codecs",
    "BOX_COLORS",
    "BAR_COLORS",
    "BACKGROUND",
    "STAMP_ROWS",
    "STAMP_BITS",
]

os.environ.setdefault("SVT_LOG", "1")  # SVT-AV1 prints its banner to stderr unless told not to

BOX_COLORS: dict[str, tuple[int, int, int]] = {"red": (255, 0, 0), "green": (0, 255, 0), "blue": (0, 0, 255)}
BAR_COLORS: tuple[tuple[str, tuple[int, int, int]], ...] = (
    ("white", (255, 255, 255)),
    ("yellow", (255, 255, 0)),
    ("cyan", (0, 255, 255)),
    ("green", (0, 255, 0)),
    ("magenta", (255, 0, 255)),
    ("red", (255, 0, 0)),
    ("blue", (0, 0, 255)),
    ("black", (0, 0, 0)),
)
BACKGROUND = (96, 96, 96)
STAMP_ROWS = 8
STAMP_BITS = 8

# Luma/chroma matrix coefficients (Kr, Kb) and the ffmpeg tags written for each.
_KRKB = {"bt601": (0.299, 0.114), "bt709": (0.2126, 0.0722), "bt2020": (0.2627, 0.0593)}
_TAGS = {  # colorspace (AVColorSpace), primaries (AVColorPrimaries), transfer (AVColorTransferCharacteristic)
    "bt601": (6, 6, 6),  # SMPTE 170M
    "bt709": (1, 1, 1),
    "bt2020": (9, 9, 14),  # BT.2020 NCL, BT.2020 primaries, BT.2020 10-bit transfer
}
_VFR_CLOCK = 90000  # ticks per second of variable-rate clips (the MP4 video convention)
_RANGE_TAG = {"limited": 1, "full": 2}  # AVCOL_RANGE_MPEG, AVCOL_RANGE_JPEG
_SPACE_NAMES = {1: "bt709", 5: "bt601", 6: "bt601", 9: "bt2020", 10: "bt2020"}

# codec name -> (encoder candidates, pixel formats it accepts here, needs even width/height for 4:2:0)
_ENCODERS: dict[str, tuple[tuple[str, ...], tuple[str, ...], bool]] = {
    "h264": (("libx264",), ("yuv420p", "yuv444p", "yuv420p10le"), True),
    "hevc": (("libx265",), ("yuv420p", "yuv444p", "yuv420p10le"), True),
    "vp9": (("libvpx-vp9",), ("yuv420p", "yuv444p"), False),
    "av1": (("libsvtav1", "libaom-av1"), ("yuv420p", "yuv420p10le"), False),
    "mpeg4": (("mpeg4",), ("yuv420p",), False),
    "mjpeg": (("mjpeg",), ("yuv420p", "yuv444p"), False),
}


@dataclass(frozen=True)
class Clip:
    """A generated video and what a correct decoder must find in it.

    Attributes:
        path: the file.
        codec: the codec asked for ("h264", ...); ``encoder`` the encoder that wrote it.
        frames: number of frames encoded (all of them are presentable).
        pts: presentation time of every frame in seconds (``i / fps``; containers with a
            millisecond time base such as Matroska round them, so compare within 1 ms).
        keyframes: indices of the frames encoded as keyframes (every ``gop`` frames).
        boxes: for ``pattern="boxes"``, per frame a dict colour name -> ``(x1, y1, x2, y2)``
            in pixels, ``x2``/``y2`` exclusive; empty otherwise.
    """

    path: Path
    codec: str
    encoder: str
    container: str
    width: int
    height: int
    fps: Fraction
    frames: int
    gop: int
    bframes: int
    pix_fmt: str
    colorspace: str
    color_range: str
    pattern: str
    pts: tuple[float, ...]
    keyframes: tuple[int, ...]
    boxes: tuple[dict[str, tuple[int, int, int, int]], ...] = field(default=(), repr=False)
    sizes: tuple[tuple[int, int], ...] = field(default=(), repr=False)  # (width, height) per frame

    @property
    def duration(self) -> float:
        return float(self.frames / self.fps)

    def rgb(self, index: int) -> np.ndarray:
        """The RGB frame ``index`` as rendered before encoding: ``(H, W, 3)`` uint8."""
        return _render(self.pattern, index, self.width, self.height, self.frames, stamp=True)[0]


def available_codecs() -> list[str]:
    """Codec names :func:`make_video` can encode with the local PyAV/FFmpeg build."""
    return [name for name in _ENCODERS if _pick_encoder(name) is not None]


def _pick_encoder(codec: str) -> str | None:
    for enc in _ENCODERS[codec][0]:
        try:
            av.codec.Codec(enc, "w")
        except Exception:  # noqa: BLE001 - not built into this FFmpeg
            continue
        return enc
    return None


# ----------------------------------------------------------------------------------- rendering


def _box_layout(width: int, height: int) -> tuple[int, int, int, int]:
    """(top of the first lane, lane height, box width, box height)."""
    top = STAMP_ROWS if height >= 3 * STAMP_ROWS else 0
    lane = (height - top) // 3
    bw = max(4, (width // 5) & ~1)
    bh = max(4, (lane * 3 // 4) & ~1)
    return top, lane, bw, bh


def _box_positions(index: int, width: int, height: int) -> dict[str, tuple[int, int, int, int]]:
    top, lane, bw, bh = _box_layout(width, height)
    span = max(1, width - bw)
    out = {}
    for k, (name, speed) in enumerate((("red", 2), ("green", 3), ("blue", 5))):
        travel = (index * speed + k * span // 3) % (2 * span)
        x = travel if travel <= span else 2 * span - travel  # bounce between the edges
        x = min(x & ~1, width - bw)
        y = top + k * lane + (lane - bh) // 2
        out[name] = (x, y, x + bw, y + bh)
    return out


def _render(
    pattern: str, index: int, width: int, height: int, frames: int, *, stamp: bool
) -> tuple[np.ndarray, dict[str, tuple[int, int, int, int]]]:
    img = np.empty((height, width, 3), dtype=np.uint8)
    boxes: dict[str, tuple[int, int, int, int]] = {}
    if pattern == "boxes":
        img[:] = BACKGROUND
        boxes = _box_positions(index, width, height)
        for name, (x1, y1, x2, y2) in boxes.items():
            img[y1:y2, x1:x2] = BOX_COLORS[name]
    elif pattern == "bars":
        edges = np.linspace(0, width, len(BAR_COLORS) + 1).round().astype(int)
        for (_, rgb), a, b in zip(BAR_COLORS, edges[:-1], edges[1:]):
            img[:, a:b] = rgb
    elif pattern == "gradient":
        img[..., 0] = np.linspace(0, 255, width).round().astype(np.uint8)[None, :]
        img[..., 1] = np.linspace(0, 255, height).round().astype(np.uint8)[:, None]
        img[..., 2] = (index * 255 // max(1, frames - 1)) if frames > 1 else 128
    else:
        raise ValueError(f"pattern={pattern!r}; expected 'boxes', 'bars' or 'gradient'")
    if stamp and height >= 3 * STAMP_ROWS:
        img[:STAMP_ROWS] = 0
        bw = width // STAMP_BITS
        for bit in range(STAMP_BITS):
            if (index >> bit) & 1:
                img[:STAMP_ROWS, bit * bw : (bit + 1) * bw] = 255
    return img, boxes


def read_stamp(rgb: np.ndarray) -> int:
    """The frame number stamped by :func:`make_video` (mod ``2**STAMP_BITS``).

    ``rgb``: ``(H, W, 3)`` or ``(3, H, W)`` uint8 (numpy or anything ``np.asarray`` accepts).
    """
    a = np.asarray(rgb)
    if a.ndim == 3 and a.shape[0] == 3 and a.shape[-1] != 3:
        a = a.transpose(1, 2, 0)
    bw = a.shape[1] // STAMP_BITS
    value = 0
    for bit in range(STAMP_BITS):
        # sample the centre of each block, away from edges blurred by compression / subsampling
        block = a[2 : STAMP_ROWS - 2, bit * bw + bw // 4 : (bit + 1) * bw - bw // 4]
        if block.mean() > 127:
            value |= 1 << bit
    return value


def rgb_to_yuv(
    rgb: np.ndarray, *, colorspace: str = "bt601", color_range: str = "limited", bits: int = 8
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Full-resolution ``(Y, U, V)`` float planes (code values) of an ``(H, W, 3)`` uint8 image."""
    kr, kb = _KRKB[colorspace]
    x = rgb.astype(np.float64) / 255.0
    y = kr * x[..., 0] + (1 - kr - kb) * x[..., 1] + kb * x[..., 2]
    u = (x[..., 2] - y) / (2 * (1 - kb))
    v = (x[..., 0] - y) / (2 * (1 - kr))
    scale = 1 << (bits - 8)
    if color_range == "limited":
        return (16 + 219 * y) * scale, (128 + 224 * u) * scale, (128 + 224 * v) * scale
    top = (1 << bits) - 1
    mid = 1 << (bits - 1)
    return y * top, mid + u * top, mid + v * top


def _subsample(plane: np.ndarray) -> np.ndarray:
    """2x2 mean (4:2:0 chroma), replicating the last row/column of odd sizes."""
    h, w = plane.shape
    p = np.pad(plane, ((0, h % 2), (0, w % 2)), mode="edge")
    return (p[0::2, 0::2] + p[1::2, 0::2] + p[0::2, 1::2] + p[1::2, 1::2]) / 4


def _fill_plane(plane, values: np.ndarray, dtype) -> None:
    item = np.dtype(dtype).itemsize
    buf = np.zeros((plane.height, plane.line_size // item), dtype=dtype)
    buf[: values.shape[0], : values.shape[1]] = values
    plane.update(buf.tobytes())


def _yuv_frame(rgb: np.ndarray, pix_fmt: str, colorspace: str, color_range: str) -> av.VideoFrame:
    bits = 10 if "10" in pix_fmt else 8
    dtype = np.uint16 if bits > 8 else np.uint8
    y, u, v = rgb_to_yuv(rgb, colorspace=colorspace, color_range=color_range, bits=bits)
    if "420" in pix_fmt:
        u, v = _subsample(u), _subsample(v)
    top = (1 << bits) - 1
    h, w = rgb.shape[:2]
    frame = av.VideoFrame(w, h, pix_fmt)
    for plane, values in zip(frame.planes, (y, u, v)):
        _fill_plane(plane, np.clip(np.rint(values), 0, top).astype(dtype), dtype)
    frame.colorspace = _TAGS[colorspace][0]
    frame.color_range = _RANGE_TAG[color_range]
    return frame


# ------------------------------------------------------------------------------------ encoding


def _encoder_options(codec: str, gop: int, bframes: int, crf: int) -> dict[str, str]:
    if codec == "h264":
        return {
            "preset": "veryfast",
            "crf": str(crf),
            "x264-params": f"keyint={gop}:min-keyint={gop}:scenecut=0:bframes={bframes}",
        }
    if codec == "hevc":
        return {
            "preset": "veryfast",
            "crf": str(crf),
            "x265-params": f"log-level=error:keyint={gop}:min-keyint={gop}:scenecut=0:bframes={bframes}",
        }
    if codec == "vp9":
        return {"crf": str(crf), "b": "0", "deadline": "realtime", "cpu-used": "8", "lag-in-frames": "0"}
    if codec == "av1":
        return {"preset": "12", "crf": str(crf), "svtav1-params": f"keyint={gop}:scd=0"}
    return {}


def make_video(
    path: str | os.PathLike,
    *,
    codec: str = "h264",
    width: int = 160,
    height: int = 96,
    frames: int = 30,
    fps: int | float | Fraction = 25,
    gop: int = 10,
    bframes: int = 2,
    pix_fmt: str = "yuv420p",
    colorspace: str = "bt601",
    color_range: str = "limited",
    pattern: str = "boxes",
    crf: int = 16,
    tag_color: bool = True,
    faststart: bool = False,
    audio: bool = False,
    rotation: int = 0,
    timestamps: tuple[float, ...] | None = None,
) -> Clip:
    """Encode a clip of ``frames`` frames and return what a decoder must find in it.

    ``codec``: one of :func:`available_codecs` ("h264", "hevc", "vp9", "av1", "mpeg4", "mjpeg").
    The container comes from the suffix (.mp4, .mkv, .avi, .webm, .mov). Frames are converted to
    ``pix_fmt`` with ``colorspace``'s matrix and ``color_range``; with ``tag_color`` the stream and
    frames are tagged with them (``tag_color=False`` leaves them unspecified, to test the
    conventions decoders assume). ``faststart`` puts the MP4 index first, so a truncated copy
    still opens. ``audio`` adds an AAC tone track as long as the video. ``rotation``
    (degrees counter-clockwise) writes a display matrix (MP4/MOV). ``gop``: distance between
    keyframes; ``bframes``: consecutive B-frames allowed (h264/hevc). Odd sizes need an
    encoder/pix_fmt allowing them (4:4:4, vp9, av1, mpeg4, mjpeg).

    ``timestamps``: variable frame rate, like a phone: the presentation time of each frame in
    seconds (increasing, one per frame; ``frames`` is then ``len(timestamps)``), written on a
    1/90000 s time base (MP4/MOV keep it; Matroska rounds to 1 ms). ``fps`` stays the nominal
    rate given to the encoder. See :func:`vfr_times`.
    """
    path = Path(path)
    if timestamps is not None:
        frames = len(timestamps)
        if any(b <= a for a, b in zip(timestamps, timestamps[1:])) or (timestamps and timestamps[0] < 0):
            raise ValueError("timestamps must be increasing and non-negative")
    if codec not in _ENCODERS:
        raise ValueError(f"codec={codec!r}; expected one of {sorted(_ENCODERS)}")
    encoder = _pick_encoder(codec)
    if encoder is None:
        raise RuntimeError(f"this PyAV build has no encoder for {codec} (tried {_ENCODERS[codec][0]})")
    formats, even_420 = _ENCODERS[codec][1], _ENCODERS[codec][2]
    if pix_fmt not in formats:
        raise ValueError(f"pix_fmt={pix_fmt!r} is not supported for {codec} here; expected one of {formats}")
    if even_420 and "420" in pix_fmt and (width % 2 or height % 2):
        raise ValueError(f"{codec} {pix_fmt} needs even width and height, got {width}x{height}")
    if colorspace not in _KRKB or color_range not in _RANGE_TAG:
        raise ValueError(f"colorspace={colorspace!r} color_range={color_range!r} not supported")
    rate = Fraction(fps).limit_denominator(1001)
    path.parent.mkdir(parents=True, exist_ok=True)

    options = _encoder_options(codec, gop, bframes, crf)
    if codec == "mjpeg" and color_range == "limited":
        options["strict"] = "unofficial"  # limited-range JPEG is non-standard but decodable
    mp4_family = path.suffix.lower() in (".mp4", ".mov", ".m4v")
    out = av.open(str(path), "w", options={"movflags": "+faststart"} if faststart and mp4_family else None)
    try:
        stream = out.add_stream(encoder, rate=rate, options=options)
        stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
        if rotation:
            stream.set_display_rotation(rotation)
        cc = stream.codec_context
        tick = 1 / rate if timestamps is None else Fraction(1, _VFR_CLOCK)
        cc.time_base = tick
        if timestamps is not None:
            stream.time_base = tick
        cc.gop_size = gop
        if codec == "mpeg4":
            bframes = 0  # AVI cannot carry reordered timestamps; keep MPEG-4 Part 2 clips simple
        if codec in ("h264", "hevc"):
            cc.max_b_frames = bframes
        if codec in ("mpeg4", "mjpeg"):
            cc.bit_rate = 8_000_000
            cc.qmin, cc.qmax = 1, 4
        if tag_color or codec == "mjpeg":  # mjpeg refuses to open without a range
            cc.color_range = _RANGE_TAG[color_range]
        if tag_color:
            cc.colorspace, cc.color_primaries, cc.color_trc = _TAGS[colorspace]
        sound = _add_tone(out, frames / rate) if audio else None
        boxes = []
        for i in range(frames):
            rgb, bx = _render(pattern, i, width, height, frames, stamp=True)
            boxes.append(bx)
            frame = _yuv_frame(rgb, pix_fmt, colorspace, color_range)
            if not tag_color:
                frame.colorspace = 2  # unspecified
                if codec != "mjpeg":
                    frame.color_range = 0
            frame.pts = i if timestamps is None else round(timestamps[i] * _VFR_CLOCK)
            frame.time_base = tick
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
        if sound is not None:
            sound()
    finally:
        out.close()
    return Clip(
        path=path,
        codec=codec,
        encoder=encoder,
        container=path.suffix.lstrip(".").lower(),
        width=width,
        height=height,
        fps=rate,
        frames=frames,
        gop=gop,
        bframes=bframes if codec in ("h264", "hevc") else 0,
        pix_fmt=pix_fmt,
        colorspace=colorspace,
        color_range=color_range,
        pattern=pattern,
        pts=tuple(float(i / rate) for i in range(frames))
        if timestamps is None
        else tuple(round(t * _VFR_CLOCK) / _VFR_CLOCK for t in timestamps),
        keyframes=tuple(range(0, frames, gop)) if codec != "mjpeg" else tuple(range(frames)),
        boxes=tuple(boxes) if pattern == "boxes" else (),
        sizes=((width, height),) * frames,
    )


def vfr_times(frames: int, *, fps: float = 30.0, seed: int = 0) -> tuple[float, ...]:
    """Phone-style variable-rate timestamps (seconds) for ``frames`` frames: intervals of 1, 1.5,
    2 or 3 nominal frame durations at ``fps`` (a camera slowing down in low light, dropping to
    half rate and back), starting at 0; reproducible from ``seed``."""
    rng = np.random.default_rng(seed)
    steps = rng.choice([1.0, 1.0, 1.5, 2.0, 3.0], size=max(0, frames - 1))
    out = [0.0]
    for s in steps:
        out.append(out[-1] + float(s) / fps)
    return tuple(round(t, 6) for t in out)


def make_size_change(
    path: str | os.PathLike,
    *,
    sizes: tuple[tuple[int, int], ...] = ((64, 48), (96, 64)),
    frames_each: int = 5,
    fps: int = 25,
) -> Clip:
    """An MJPEG clip (``.mkv``/``.avi``) whose frame size changes mid-stream: ``frames_each``
    frames of each ``(width, height)`` in ``sizes``, boxes pattern, BT.601 full range."""
    path = Path(path)
    rate = Fraction(fps)
    boxes, per_frame = [], []
    with av.open(str(path), "w") as out:
        stream = out.add_stream("mjpeg", rate=rate)
        stream.width, stream.height = sizes[0]
        stream.pix_fmt = "yuvj420p"
        stream.codec_context.color_range = _RANGE_TAG["full"]
        n = 0
        for width, height in sizes:
            cc = av.CodecContext.create("mjpeg", "w")
            cc.width, cc.height, cc.pix_fmt, cc.time_base = width, height, "yuvj420p", 1 / rate
            cc.color_range = _RANGE_TAG["full"]
            for _ in range(frames_each):
                rgb, bx = _render("boxes", n, width, height, frames_each * len(sizes), stamp=True)
                frame = _yuv_frame(rgb, "yuv420p", "bt601", "full")
                frame.pts, frame.time_base = n, 1 / rate
                for packet in cc.encode(frame):
                    packet.stream = stream
                    packet.pts = packet.dts = n
                    packet.time_base = 1 / rate
                    out.mux(packet)
                boxes.append(bx)
                per_frame.append((width, height))
                n += 1
    return Clip(
        path=path, codec="mjpeg", encoder="mjpeg", container=path.suffix.lstrip(".").lower(),
        width=sizes[0][0], height=sizes[0][1], fps=rate, frames=n, gop=1, bframes=0, pix_fmt="yuv420p",
        colorspace="bt601", color_range="full", pattern="boxes", pts=tuple(float(i / rate) for i in range(n)),
        keyframes=tuple(range(n)), boxes=tuple(boxes), sizes=tuple(per_frame),
    )


def read_tags(path: str | os.PathLike) -> dict[str, object]:
    """What PyAV reads back from the first video stream (like ``ffprobe``): codec, size, pix_fmt,
    frame count and the colour tags as names ("bt709", "limited", ...; ``None`` if unspecified)."""
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        cc = s.codec_context
        return {
            "codec": cc.name,
            "width": cc.width,
            "height": cc.height,
            "pix_fmt": cc.pix_fmt,
            "frames": s.frames,
            "colorspace": _SPACE_NAMES.get(int(cc.colorspace)),
            "color_range": {1: "limited", 2: "full"}.get(int(cc.color_range)),
            "color_primaries": int(cc.color_primaries),
            "color_trc": int(cc.color_trc),
        }


# ------------------------------------------------------------------------------ broken inputs


def _add_tone(out, seconds: float, *, codec: str = "aac", rate: int = 16000):
    """Add a mono 440 Hz tone stream to ``out``; returns a function that encodes and muxes it."""
    stream = out.add_stream(codec, rate=rate)
    stream.layout = "mono"
    fmt = "s16" if codec.startswith("pcm_s16") else "fltp"

    def write() -> None:
        n = int(float(seconds) * rate)
        tone = 0.3 * np.sin(2 * math.pi * 440 * np.arange(n) / rate)
        samples = (tone * 32767).astype(np.int16) if fmt == "s16" else tone.astype(np.float32)
        for start in range(0, n, 1024):
            part = np.ascontiguousarray(samples[None, start : start + 1024])
            frame = av.AudioFrame.from_ndarray(part, format=fmt, layout="mono")
            frame.sample_rate = rate
            frame.pts = start
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)

    return write


def make_audio(path: str | os.PathLike, *, seconds: float = 0.5, rate: int = 16000) -> Path:
    """An audio-only file (a 440 Hz tone): AAC in .m4a/.mp4/.mkv, 16-bit PCM in .wav."""
    path = Path(path)
    codec = "pcm_s16le" if path.suffix.lower() == ".wav" else "aac"
    with av.open(str(path), "w") as out:
        _add_tone(out, seconds, codec=codec, rate=rate)()
    return path


def make_empty(path: str | os.PathLike) -> Path:
    """A zero-byte file."""
    path = Path(path)
    path.write_bytes(b"")
    return path


def make_text(path: str | os.PathLike, text: str = "this is not a video\n" * 20) -> Path:
    """A text file (named like a video by the caller, e.g. ``notes.mp4``)."""
    path = Path(path)
    path.write_text(text)
    return path


def truncate(path: str | os.PathLike, fraction: float, *, dst: str | os.PathLike | None = None) -> Path:
    """Keep the first ``fraction`` of the file's bytes (in place, or in a copy at ``dst``)."""
    src = Path(path)
    out = Path(dst) if dst is not None else src
    data = src.read_bytes()
    out.write_bytes(data[: int(len(data) * fraction)])
    return out


def corrupt_middle(
    path: str | os.PathLike,
    *,
    dst: str | os.PathLike | None = None,
    fraction: float = 0.5,
    nbytes: int | None = None,
    seed: int = 0,
) -> Path:
    """Overwrite ``nbytes`` (default 5% of the file, at least 64) around ``fraction`` of the file
    with random bytes (in place, or in a copy at ``dst``)."""
    src = Path(path)
    out = Path(dst) if dst is not None else src
    if out != src:
        shutil.copyfile(src, out)
    data = bytearray(out.read_bytes())
    n = nbytes if nbytes is not None else max(64, len(data) // 20)
    start = max(0, min(len(data) - n, int(len(data) * fraction) - n // 2))
    data[start : start + n] = np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()
    out.write_bytes(bytes(data))
    return out
