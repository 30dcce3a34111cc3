"""Clips for the colour tests: gradients, saturated boxes and noise, encoded with libx264 by PyAV.

The content stresses chroma (sharp coloured edges, per-pixel colour noise) and both ends of the
range (black and white boxes, noise clipped at 0 and 255). Clips are tagged with the matrix and
range, converted to YUV by swscale with the same matrix, and decoded back with PyAV, which gives
both the 4:2:0 planes and its own ``rgb24`` (the CPU decode path's reference).
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import av
import numpy as np

from vidpipe.ops.color import pyav_reformat_kwargs
from vidpipe.types import ColorSpec, FrameBatch, FrameMeta

_TAGS = {"bt601": 6, "bt709": 1, "bt2020": 9}  # AVColorSpace written into the stream


def render(height: int, width: int, index: int, *, seed: int = 0) -> np.ndarray:
    """``(H, W, 3)`` uint8: RGB gradients, six saturated boxes (moving with ``index``), noise."""
    rng = np.random.default_rng(seed + index)
    x = np.linspace(0.0, 1.0, width)[None, :]
    y = np.linspace(0.0, 1.0, height)[:, None]
    img = np.stack([x + 0 * y, y + 0 * x, 0.5 + 0.5 * np.sin(6 * x + 4 * y + index)], -1) * 255
    colours = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0), (0, 0, 0), (255, 255, 255)]
    bh, bw = max(2, height // 6), max(2, width // 8)
    for k, c in enumerate(colours):
        x0 = (k * width // 7 + 3 * index) % max(1, width - bw)
        y0 = (k * 37) % max(1, height - bh)
        img[y0 : y0 + bh, x0 : x0 + bw] = c
    img += rng.normal(0.0, 12.0, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


@dataclass(frozen=True)
class Decoded:
    """One frame decoded by PyAV: 4:2:0 planes (code values) and PyAV's rgb24 of it."""

    pts: int
    y: np.ndarray  # (H, W) uint8 / uint16
    u: np.ndarray  # (H/2, W/2)
    v: np.ndarray
    rgb: np.ndarray  # (H, W, 3) uint8, PyAV reformat(format="rgb24", src_colorspace, src_color_range)


def encode(color: ColorSpec, *, height: int, width: int, frames: int = 3, pix_fmt: str = "yuv420p") -> bytes:
    """A tagged libx264 Matroska clip (in memory) of :func:`render` frames."""
    buf = io.BytesIO()
    kw = pyav_reformat_kwargs(color)
    with av.open(buf, "w", format="matroska") as out:
        s = out.add_stream("libx264", rate=25, options={"crf": "18", "preset": "veryfast"})
        s.width, s.height, s.pix_fmt = width, height, pix_fmt
        s.codec_context.colorspace = _TAGS[color.matrix]
        s.codec_context.color_range = 1 if color.range == "limited" else 2
        for i in range(frames):
            f = av.VideoFrame.from_ndarray(render(height, width, i), format="rgb24")
            f = f.reformat(format=pix_fmt, dst_colorspace=kw["src_colorspace"], dst_color_range=kw["src_color_range"])
            f.pts = i
            for p in s.encode(f):
                out.mux(p)
        for p in s.encode():
            out.mux(p)
    return buf.getvalue()


def decode(data: bytes, color: ColorSpec) -> list[Decoded]:
    """Every frame's planes and PyAV's rgb24 (converted with ``color``'s matrix and range)."""
    out = []
    with av.open(io.BytesIO(data)) as c:
        for f in c.decode(video=0):
            deep = f.format.name.endswith(("10le", "10be"))
            dt = np.uint16 if deep else np.uint8
            y, u, v = (np.frombuffer(p, dt).reshape(p.height, -1)[:, : p.width].copy() for p in f.planes)
            rgb = f.reformat(format="rgb24", **pyav_reformat_kwargs(color)).to_ndarray()
            out.append(Decoded(f.pts, y, u, v, rgb))
    return out


def pack(frames: list[Decoded], *, p010: bool = False) -> np.ndarray:
    """``(B, H*3/2, W)`` NV12 (uint8), or P010 (uint16, 10-bit samples in the high bits)."""
    rows = []
    for d in frames:
        uv = np.stack([d.u, d.v], -1).reshape(d.u.shape[0], -1)
        a = np.concatenate([d.y, uv], 0)
        rows.append((a.astype(np.uint16) << 6) if p010 else a)
    return np.stack(rows)


def frame_batch(data, color: ColorSpec, fmt: str = "nv12") -> FrameBatch:
    """A FrameBatch around ``data`` (a torch tensor ``(B, H*3/2, W)``)."""
    b, rows, w = data.shape
    h = rows * 2 // 3
    metas = tuple(FrameMeta("generated", 0, i, None, h, w) for i in range(b))
    return FrameBatch(data, metas, format=fmt, color=color)


def rgb_tensor(frames: list[Decoded]):
    """PyAV's RGB as ``(B, 3, H, W)`` uint8 torch tensor (CPU)."""
    import torch

    return torch.from_numpy(np.stack([d.rgb for d in frames])).permute(0, 3, 1, 2).contiguous()


def mad_psnr(a, b) -> tuple[float, float, int]:
    """Mean absolute difference, PSNR (dB, peak 255) and max difference of two uint8 images."""
    d = (a.double() - b.double()).abs()
    mse = float((d**2).mean())
    psnr = float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)
    return float(d.mean()), psnr, int(d.max())
