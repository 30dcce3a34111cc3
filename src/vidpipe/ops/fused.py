"""NV12 / P010 frames (NVDEC) -> letterboxed model input, colour conversion fused with the resize.

:func:`yuv_letterbox` computes, in one or two CUDA kernels (Triton), what the CPU path computes
in several steps::

    letterbox(nv12_to_rgb(batch), size, dtype=dtype)

i.e. every source pixel is converted to RGB with the stream's matrix and range, chroma sited and
rounded like swscale (so NVDEC frames give the model what PyAV frames give it), then resampled with the same
weights as the CPU letterbox's ``F.interpolate`` (by default Darknet's bilinear ``resize_image``:
``align_corners=True``, no antialiasing, 2 taps per axis; ``resample="antialias"``: the widened
triangle filter when shrinking) into the letterbox region
(geometry from :func:`~vidpipe.ops.letterbox.letterbox_geometry`), scaled to [0, 1], padded
with grey 0.5 and cast. Without Triton, or on CPU, the same thing runs as plain PyTorch ops.

:func:`nv12_to_rgb` gives full-size ``(B, 3, H, W)`` uint8 RGB (what PyAV's ``rgb24`` gives).

Measured on one H200 (torch 2.11, Triton 3.6), ms per batch of 32 frames -> 416x416 fp16, with the
antialiased filter (up to ~6 taps per axis at 1080p; Darknet's default has 2, so no more work):

=====================  ==========  =========  ==============  ==============================
input                  two_pass    direct     torch fallback  nv12_to_rgb + letterbox (RGB)
=====================  ==========  =========  ==============  ==============================
NV12 1080p             0.42-0.44   1.37       3.58            1.43
NV12 2160p             1.47-1.54   4.98       13.6            5.42
P010 1080p             1.00        3.35       6.84            -
=====================  ==========  =========  ==============  ==============================

``two_pass`` (default) costs ~14 us per 1080p frame. ``direct`` converts every source sample
once per overlapping output footprint (~Ky*Kx/(sy*sx) ~ 5x at 1080p -> 416) and loses to the
extra scratch traffic of ``two_pass``. Full-size :func:`nv12_to_rgb`: 0.19 ms per 32 x 1080p.
Parity on the same GPU host (av 19.0.2): NV12 -> RGB bit-exact with PyAV for BT.601/709/2020
limited and BT.601/709 full; ``yuv_letterbox`` vs ``letterbox`` of PyAV's RGB: max 2.5e-4
(fp16 output rounding) against the CPU fp32 path.
"""

from __future__ import annotations

import functools
import logging
import math
import threading
from typing import TYPE_CHECKING, Literal

from vidpipe._validate import check_choice
from vidpipe.ops.color import split_yuv, yuv_coefficients, yuv_to_rgb
from vidpipe.ops.letterbox import (
    DEFAULT_RESAMPLE,
    PAD_VALUE,
    LetterboxGeometry,
    Resample,
    check_resample,
    letterbox_geometry,
)
from vidpipe.types import FrameBatch

if TYPE_CHECKING:
    import numpy as np
    import torch

    from vidpipe.ops.scratch import ScratchArena

__all__ = ["yuv_letterbox", "nv12_to_rgb", "resample_taps", "taps_for", "triton_ready"]

logger = logging.getLogger(__name__)

Backend = Literal["auto", "triton", "torch"]
Method = Literal["two_pass", "direct"]
_BACKENDS = ("auto", "triton", "torch")
_METHODS = ("two_pass", "direct")
_DEFAULT_METHOD: Method = "two_pass"
# Triton tile (rows, columns) per program: full-size RGB, pass 1 (x), pass 2 (y) / direct.
_RGB_BLOCK = (8, 128)
_HPASS_BLOCK = (4, 64)
_OUT_BLOCK = (8, 64)


# ------------------------------------------------------------------------------ resampling taps


@functools.lru_cache(maxsize=64)
def resample_taps(
    in_size: int, out_size: int, *, antialias: bool, align_corners: bool = False
) -> "tuple[np.ndarray, np.ndarray]":
    """Source indices and weights of ``F.interpolate(mode="bilinear")`` along one axis.

    Returns ``(idx, w)``: ``(out_size, K)`` int32 and float32; output ``i`` is
    ``sum_k w[i, k] * x[idx[i, k]]``. Unused taps have weight 0 and a valid index.
    ``align_corners=True`` (Darknet's ``resize_image``; needs ``antialias=False``): output ``i``
    samples ``i * (in - 1) / (out - 1)``, two taps. Otherwise half-pixel centres; with
    ``antialias`` the triangle filter is widened by the shrink factor (PyTorch's
    ``_upsample_bilinear2d_aa``: support ``max(1, scale)``, weights normalised per output).
    """
    import numpy as np

    if in_size <= 0 or out_size <= 0:
        raise ValueError(f"resample sizes must be positive, got {in_size} -> {out_size}")
    if align_corners and antialias:
        raise ValueError("resample_taps: align_corners=True has no antialiased variant")
    scale = in_size / out_size
    rows: list[list[tuple[int, float]]] = []
    if align_corners:
        step = (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
        for i in range(out_size):
            src = i * step
            i0 = min(int(src), in_size - 1)
            lam = src - i0
            i1 = i0 + 1 if i0 < in_size - 1 else i0
            rows.append([(i0, 1.0 - lam), (i1, lam)])
    elif antialias:
        support = scale if scale >= 1.0 else 1.0
        invscale = 1.0 / scale if scale >= 1.0 else 1.0
        for i in range(out_size):
            center = scale * (i + 0.5)
            xmin = max(int(center - support + 0.5), 0)
            xsize = min(int(center + support + 0.5), in_size) - xmin
            taps = []
            for j in range(max(xsize, 0)):
                t = abs((j + xmin - center + 0.5) * invscale)
                taps.append((xmin + j, 1.0 - t if t < 1.0 else 0.0))
            total = sum(w for _, w in taps)
            rows.append([(j, w / total if total else 0.0) for j, w in taps])
    else:
        for i in range(out_size):
            src = max(scale * (i + 0.5) - 0.5, 0.0)
            i0 = min(int(src), in_size - 1)
            lam = src - i0
            i1 = i0 + 1 if i0 < in_size - 1 else i0
            rows.append([(i0, 1.0 - lam), (i1, lam)])
    k = max(1, max(len(r) for r in rows))
    idx = np.zeros((out_size, k), dtype=np.int32)
    w = np.zeros((out_size, k), dtype=np.float32)
    for i, r in enumerate(rows):
        for j, (src_i, wt) in enumerate(r):
            idx[i, j], w[i, j] = src_i, wt
        idx[i, len(r) :] = r[-1][0] if r else 0
    idx.setflags(write=False)
    w.setflags(write=False)
    return idx, w


def taps_for(
    in_size: int, out_size: int, *, resample: Resample = DEFAULT_RESAMPLE, shrink: bool
) -> "tuple[np.ndarray, np.ndarray]":
    """:func:`resample_taps` of one axis as :func:`vidpipe.ops.letterbox.letterbox` resizes it
    with ``resample``; ``shrink``: whether the image shrinks along either axis (PyTorch's
    antialias flag covers both axes)."""
    check_resample(resample)
    if resample == "darknet":
        return resample_taps(in_size, out_size, antialias=False, align_corners=True)
    return resample_taps(in_size, out_size, antialias=shrink)


_device_taps: dict[tuple, "tuple[torch.Tensor, torch.Tensor]"] = {}
_device_taps_lock = threading.Lock()


def _taps_on(in_size: int, out_size: int, resample: str, shrink: bool, device: "torch.device"):
    import torch

    key = (in_size, out_size, resample, shrink, str(device))
    got = _device_taps.get(key)
    if got is None:
        idx, w = taps_for(in_size, out_size, resample=resample, shrink=shrink)
        got = (torch.from_numpy(idx.copy()).to(device), torch.from_numpy(w.copy()).to(device))
        with _device_taps_lock:
            if len(_device_taps) > 256:
                _device_taps.clear()
            _device_taps[key] = got
    return got


# ----------------------------------------------------------------------------------- dispatch


def triton_ready(device: "torch.device") -> bool:
    """True when the Triton kernels can run on ``device`` (CUDA and Triton importable)."""
    import os

    if device.type != "cuda" and os.environ.get("TRITON_INTERPRET", "0") != "1":
        return False  # decided without importing Triton (slow to import, useless on CPU)
    from vidpipe.ops import triton_kernels as tk

    return tk.available()


def _use_triton(backend: str, device: "torch.device") -> bool:
    check_choice("backend", backend, _BACKENDS)
    if backend == "torch":
        return False
    ready = triton_ready(device)
    if backend == "triton" and not ready:
        from vidpipe.errors import BackendUnavailableError
        from vidpipe.ops import triton_kernels as tk

        why = tk.unavailable_reason() or f"the frames are on {device}, not a CUDA device"
        raise BackendUnavailableError(f"the Triton colour kernels cannot run: {why}")
    return ready


def _check_yuv(batch: FrameBatch) -> None:
    if batch.format not in ("nv12", "p010"):
        raise ValueError(f"expected an nv12 or p010 FrameBatch, got format={batch.format!r}")
    if batch.data.shape[2] % 2:
        raise ValueError(
            f"{batch.format} frames need an even width, got {batch.data.shape[2]}; NVDEC pads odd widths to even"
        )


def _size(batch: FrameBatch) -> tuple[int, int, int]:
    """(B, H, W) from the data (also for an empty batch, which has no FrameMeta to ask)."""
    return batch.data.shape[0], batch.data.shape[1] * 2 // 3, batch.data.shape[2]


def _kernel_args(batch: FrameBatch) -> dict:
    """Launch arguments shared by the kernels: input tensor (int16 view for P010), strides, coefficients."""
    import torch

    data = batch.data
    depth = 8 if batch.format == "nv12" else 10
    if batch.format == "p010":
        data = data.view(torch.int16)  # Triton has no uint16 loads everywhere; the kernel masks to 16 bits
    k = yuv_coefficients(batch.color, bit_depth=depth, quantize=depth == 8)
    return dict(
        src=data,
        strides=data.stride(),
        coef=(k.y_offset, k.c_offset, k.y_gain, k.r_v, k.g_u, k.g_v, k.b_u),
        SHIFT=0 if depth == 8 else 16 - depth,
        FLOOR=depth == 8,
        ROUND=depth != 8,
        LINEAR=False,  # nearest chroma at every depth, as the CPU path (see vidpipe.ops.color)
    )


# ------------------------------------------------------------------------------ full-size RGB


def nv12_to_rgb(
    batch: FrameBatch, *, out: "torch.Tensor | None" = None, backend: Backend = "auto"
) -> "torch.Tensor":
    """Full-size RGB of an NV12 / P010 batch: ``(B, 3, H, W)`` uint8 on ``batch.device``.

    Matches PyAV's ``rgb24`` of the same frames: bit for bit for 8-bit frames (swscale's
    arithmetic, see :mod:`vidpipe.ops.color`); P010 with the same nearest chroma, rounded to
    nearest, as the CPU decoder converts 10-bit frames (:mod:`vidpipe.decode.rgb`).
    ``out``: optional ``(B, 3, H, W)`` uint8 tensor (any strides) to write into.
    """
    import torch

    _check_yuv(batch)
    b, h, w = _size(batch)
    if out is not None and (
        tuple(out.shape) != (b, 3, h, w) or out.dtype != torch.uint8 or out.device != batch.device
    ):
        raise ValueError(
            f"out must be ({b}, 3, {h}, {w}) uint8 on {batch.device}, got {tuple(out.shape)} {out.dtype} {out.device}"
        )
    if b and _use_triton(backend, batch.device):
        from vidpipe.ops import triton_kernels as tk

        if out is None:
            out = torch.empty((b, 3, h, w), dtype=torch.uint8, device=batch.device)
        a = _kernel_args(batch)
        block_r, block_c = _RGB_BLOCK
        grid = (math.ceil(w / block_c), math.ceil(h / block_r), b)
        tk.yuv_rgb_kernel[grid](
            a["src"], out, h, w, *a["strides"], out.stride(0), out.stride(1), out.stride(2), out.stride(3),
            *a["coef"], SHIFT=a["SHIFT"], FLOOR=a["FLOOR"], ROUND=a["ROUND"], LINEAR=a["LINEAR"],
            BLOCK_R=block_r, BLOCK_C=block_c,
        )
        return out
    y, uv, depth = split_yuv(batch.data, fmt=batch.format)
    rgb = yuv_to_rgb(y, uv, batch.color, bit_depth=depth)
    if out is None:
        return rgb
    out.copy_(rgb)
    return out


# ------------------------------------------------------------------------------------ letterbox


def yuv_letterbox(
    batch: FrameBatch,
    size: tuple[int, int],
    *,
    dtype: "torch.dtype | None" = None,
    out: "torch.Tensor | None" = None,
    backend: Backend = "auto",
    method: Method | None = None,
    resample: Resample = DEFAULT_RESAMPLE,
    scratch: "ScratchArena | None" = None,
) -> "tuple[torch.Tensor, LetterboxGeometry]":
    """Convert NV12 / P010 frames to RGB and letterbox them into the model's input, fused.

    Args:
        batch: ``nv12`` ``(B, H*3/2, W)`` uint8 or ``p010`` uint16 frames with a ColorSpec, on any
            device (CUDA for the fused kernels).
        size: ``(H_in, W_in)`` of the model input.
        dtype: float dtype of the result (default: ``out.dtype`` if given, else float32).
        out: optional ``(B, 3, H_in, W_in)`` float tensor on ``batch.device`` to write into; any
            strides, so a slice ``big[i:i+B]`` of a larger batch buffer works (no ``torch.cat``).
        backend: ``"auto"`` (Triton on CUDA when importable, else PyTorch), ``"triton"``, ``"torch"``.
        method: Triton only: ``"two_pass"`` (default, two kernels) or ``"direct"`` (one kernel).
        resample: the resize filter, as :func:`~vidpipe.ops.letterbox.letterbox`'s (default
            ``"darknet"``).
        scratch: where ``two_pass`` takes its float32 intermediate (``(B, 3, H, W_in')``, a
            detector's :class:`~vidpipe.ops.scratch.ScratchArena`: GPU memory that does not
            depend on timing); ``None``: a ``torch.empty`` on the current stream per call.

    Returns:
        ``(tensor, geometry)``: ``(B, 3, H_in, W_in)`` RGB in [0, 1] on ``batch.device`` (grey 0.5
        outside the image) and the :class:`LetterboxGeometry`, identical to what
        :func:`~vidpipe.ops.letterbox.letterbox` uses for an ``H x W`` RGB frame.
    """
    import torch

    _check_yuv(batch)
    check_resample(resample)
    if method is not None:
        check_choice("method", method, _METHODS)
    b, h, w = _size(batch)
    hin, win = int(size[0]), int(size[1])
    geo = letterbox_geometry(h, w, hin, win)
    dtype = dtype or (out.dtype if out is not None else torch.float32)
    if out is not None:
        if tuple(out.shape) != (b, 3, hin, win) or out.dtype != dtype or out.device != batch.device:
            raise ValueError(
                f"out must be ({b}, 3, {hin}, {win}) {dtype} on {batch.device}, "
                f"got {tuple(out.shape)} {out.dtype} {out.device}"
            )
    else:
        out = torch.empty((b, 3, hin, win), dtype=dtype, device=batch.device)
    if b == 0:
        return out, geo
    if _use_triton(backend, batch.device):
        _letterbox_triton(batch, geo, out, method or _DEFAULT_METHOD, resample, scratch)
    else:
        _letterbox_torch(batch, geo, out, resample)
    return out, geo


def _resized(geo: LetterboxGeometry) -> tuple[bool, bool]:
    """(resize at all, shrink along either axis) exactly as :func:`vidpipe.ops.letterbox.letterbox` decides."""
    resize = (geo.new_h, geo.new_w) != (geo.src_h, geo.src_w)
    return resize, resize and (geo.new_h < geo.src_h or geo.new_w < geo.src_w)


def _letterbox_torch(batch: FrameBatch, geo: LetterboxGeometry, out: "torch.Tensor", resample: str) -> None:
    import torch
    import torch.nn.functional as F

    from vidpipe.ops.letterbox import interpolate_kwargs

    y, uv, depth = split_yuv(batch.data, fmt=batch.format)
    x = yuv_to_rgb(y, uv, batch.color, bit_depth=depth, dtype=torch.float32)
    resize, shrink = _resized(geo)
    if resize:
        kw = interpolate_kwargs(resample, shrink=shrink)
        x = F.interpolate(x, size=(geo.new_h, geo.new_w), mode="bilinear", **kw)
    out.fill_(PAD_VALUE)
    region = out[:, :, geo.pad_y : geo.pad_y + geo.new_h, geo.pad_x : geo.pad_x + geo.new_w]
    region.copy_((x * (1.0 / 255.0)).clamp_(0.0, 1.0))


def _letterbox_triton(
    batch: FrameBatch, geo: LetterboxGeometry, out: "torch.Tensor", method: str, resample: str,
    scratch: "ScratchArena | None" = None,
) -> None:  # fmt: skip
    import contextlib

    import torch

    from vidpipe.ops import triton_kernels as tk

    b, h = len(batch), geo.src_h
    _, shrink = _resized(geo)
    yidx, yw = _taps_on(geo.src_h, geo.new_h, resample, shrink, batch.device)
    xidx, xw = _taps_on(geo.src_w, geo.new_w, resample, shrink, batch.device)
    a = _kernel_args(batch)
    flags = dict(SHIFT=a["SHIFT"], FLOOR=a["FLOOR"], ROUND=a["ROUND"], LINEAR=a["LINEAR"])
    ostr = out.stride()
    block_r, block_c = _OUT_BLOCK
    grid_out = (math.ceil(geo.dst_w / block_c), math.ceil(geo.dst_h / block_r), b)
    if method == "direct":
        tk.direct_kernel[grid_out](
            a["src"], out, yidx, yw, xidx, xw, h, geo.src_w, geo.new_h, geo.new_w, yidx.shape[1], xidx.shape[1],
            geo.dst_h, geo.dst_w, geo.pad_y, geo.pad_x, *a["strides"], *ostr, *a["coef"],
            PAD=PAD_VALUE, BLOCK_R=block_r, BLOCK_C=block_c, **flags,
        )
        return
    shape = (b, 3, h, geo.new_w)
    hb_r, hb_c = _HPASS_BLOCK
    grid1 = (math.ceil(geo.new_w / hb_c), math.ceil(h / hb_r), b)
    if scratch is not None and scratch.device == batch.device:
        buffer = scratch.borrow(shape, dtype=torch.float32)
    else:  # the functional API (or another device's arena): one per call
        buffer = contextlib.nullcontext(torch.empty(shape, dtype=torch.float32, device=batch.device))
    with buffer as tmp:
        tk.hpass_kernel[grid1](
            a["src"], tmp, xidx, xw, h, geo.src_w, geo.new_w, xidx.shape[1], *a["strides"], *tmp.stride()[:3],
            *a["coef"], BLOCK_R=hb_r, BLOCK_C=hb_c, **flags,
        )
        tk.vpass_kernel[grid_out](
            tmp, out, yidx, yw, geo.new_h, geo.new_w, yidx.shape[1], geo.dst_h, geo.dst_w, geo.pad_y, geo.pad_x,
            *tmp.stride()[:3], *ostr, PAD=PAD_VALUE, BLOCK_R=block_r, BLOCK_C=block_c,
        )
