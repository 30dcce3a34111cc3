"""Triton kernels for NV12 / P010 -> RGB, fused with the letterbox resize (CUDA).

Importing this module never fails: without Triton (torch builds that do not ship it, a broken
install) :func:`available` is False, with the reason in :func:`unavailable_reason`, and the
kernels are not defined. :mod:`vidpipe.ops.fused` picks the
kernels when the frames are on a CUDA device and Triton imports, else its PyTorch path.

Per source sample the kernels compute exactly what :func:`vidpipe.ops.color.yuv_to_rgb` does
by default (what PyAV's ``rgb24`` gives): for NV12 nearest chroma (each pair covers its 2x2 luma
block) and swscale's fixed-point rounding (``FLOOR``); for P010 the same nearest chroma and
round-to-nearest (``ROUND``), as the CPU decoder converts 10-bit frames; clamped to [0, 255].
(``LINEAR``, swscale's generic-path interpolated chroma, is kept for comparisons but no longer
used by :mod:`vidpipe.ops.fused`.)

Letterbox resize = separable resampling with precomputed taps (``idx``, ``w``: per output row or
column, ``K`` source indices and normalised weights; the same weights as
``F.interpolate(mode="bilinear", antialias=...)``). Two ways, timed in the module notes of
:mod:`vidpipe.ops.fused`:

- ``two_pass``: kernel 1 converts and resamples along x into a float32 scratch
  ``(B, 3, H, new_w)``; kernel 2 resamples along y, scales to [0, 1], pads with grey and casts
  into the output (any strides, e.g. a slice of a larger batch).
- ``direct``: one kernel; every output pixel gathers its ``Ky x Kx`` footprint and converts each
  sample (no scratch, but every source sample is converted ~``Ky*Kx/(sy*sx)`` times).
"""

from __future__ import annotations

import os
import threading

try:  # pragma: no cover - exercised on the GPU host
    import triton
    import triton.language as tl

    _IMPORT_ERROR: BaseException | None = None
except Exception as exc:  # noqa: BLE001 - ImportError, or a broken install (driver, CUDA mismatch)
    triton = None
    tl = None
    _IMPORT_ERROR = exc

__all__ = ["available", "unavailable_reason", "interpreting", "prepare_cache_key"]

#: held while Triton's own cache key is computed (:func:`prepare_cache_key`): one computation
_KEY_LOCK = threading.Lock()


def available() -> bool:
    """True when Triton imported (it still needs CUDA tensors unless :func:`interpreting`)."""
    return triton is not None


def unavailable_reason() -> str:
    return "" if _IMPORT_ERROR is None else f"{type(_IMPORT_ERROR).__name__}: {_IMPORT_ERROR}"


def interpreting() -> bool:
    """True under ``TRITON_INTERPRET=1`` (kernels run on CPU tensors; used to test on CPU)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def prepare_cache_key() -> bool:
    """Compute Triton's cache key of its own installation now, once per process (``True`` when it
    is ready; ``False`` without Triton or where this version keeps it elsewhere).

    Triton keys every kernel's cache entry with a hash of its compiler, its backends and its
    ``libtriton`` library, computed at the first kernel of a process: about 0.7 s on an H200
    host (``docs/bench/h200/startup-prep``), paid in front of the first NV12 batch even when the
    kernels come from Triton's disk cache. The hashing reads files and releases the GIL, so a
    thread can do it while the model loads (:mod:`vidpipe.prewarm`). No CUDA call. Callers
    that come while a thread is at it wait for it instead of hashing twice."""
    if triton is None:
        return False
    import importlib

    key_fn = None
    for module in ("triton.runtime.cache", "triton.compiler.compiler"):  # where Triton 3.x keeps it
        try:
            key_fn = getattr(importlib.import_module(module), "triton_key", None)
        except Exception:  # noqa: BLE001 - another layout: the first kernel computes it
            key_fn = None
        if callable(key_fn):
            break
    if not callable(key_fn):
        return False
    with _KEY_LOCK:
        try:
            key_fn()  # functools.lru_cache'd by Triton: later calls return the value
        except Exception:  # noqa: BLE001 - an optimisation: the first kernel computes it (and says why)
            return False
    return True


if triton is not None:  # pragma: no cover - compiled and run on the GPU host

    @triton.jit
    def _load_code(ptr, mask, SHIFT: tl.constexpr):
        """Code values as float32: uint8 (SHIFT=0) or int16-viewed P016 keeping the high bits."""
        x = tl.load(ptr, mask=mask, other=0)
        if SHIFT > 0:
            x = (x.to(tl.int32) & 0xFFFF) >> SHIFT
        return x.to(tl.float32)

    @triton.jit
    def _to_rgb(yv, u, v, y_off, c_off, y_gain, r_v, g_u, g_v, b_u, FLOOR: tl.constexpr, ROUND: tl.constexpr):
        luma = (yv - y_off) * y_gain
        u = u - c_off
        v = v - c_off
        if FLOOR:
            luma = tl.floor(luma)
            r = luma + tl.floor(v * r_v)
            g = luma + tl.floor(u * g_u) + tl.floor(v * g_v)
            b = luma + tl.floor(u * b_u)
        else:
            r = luma + v * r_v
            g = luma + u * g_u + v * g_v
            b = luma + u * b_u
            if ROUND:
                r = tl.floor(r + 0.5)
                g = tl.floor(g + 0.5)
                b = tl.floor(b + 0.5)
        r = tl.minimum(tl.maximum(r, 0.0), 255.0)
        g = tl.minimum(tl.maximum(g, 0.0), 255.0)
        b = tl.minimum(tl.maximum(b, 0.0), 255.0)
        return r, g, b

    @triton.jit
    def _sample(base, row, col, H, W, s_r, s_c, mask, y_off, c_off, y_gain, r_v, g_u, g_v, b_u,
                SHIFT: tl.constexpr, FLOOR: tl.constexpr, ROUND: tl.constexpr, LINEAR: tl.constexpr):
        """RGB of source pixels (row, col) of one packed 4:2:0 frame at ``base``.

        Chroma: nearest (the pair covering the 2x2 block), or with ``LINEAR`` swscale's generic-path
        interpolation (see ``vidpipe.ops.color``): vertically centred, horizontally 3/4 + 1/4 of the
        left-sited samples, edges repeated.
        """
        yv = _load_code(base + row * s_r + col * s_c, mask, SHIFT)
        cx = col // 2
        cy = row // 2
        p0 = base + (H + cy) * s_r + cx * 2 * s_c
        if LINEAR:
            cx1 = tl.minimum(cx + 1, W // 2 - 1)
            cyn = tl.where((row % 2) == 1, tl.minimum(cy + 1, H // 2 - 1), tl.maximum(cy - 1, 0))
            p1 = base + (H + cy) * s_r + cx1 * 2 * s_c
            p2 = base + (H + cyn) * s_r + cx * 2 * s_c
            p3 = base + (H + cyn) * s_r + cx1 * 2 * s_c
            u = 0.75 * (0.75 * _load_code(p0, mask, SHIFT) + 0.25 * _load_code(p1, mask, SHIFT)) + 0.25 * (
                0.75 * _load_code(p2, mask, SHIFT) + 0.25 * _load_code(p3, mask, SHIFT))
            v = 0.75 * (0.75 * _load_code(p0 + s_c, mask, SHIFT) + 0.25 * _load_code(p1 + s_c, mask, SHIFT)) + 0.25 * (
                0.75 * _load_code(p2 + s_c, mask, SHIFT) + 0.25 * _load_code(p3 + s_c, mask, SHIFT))
        else:
            u = _load_code(p0, mask, SHIFT)
            v = _load_code(p0 + s_c, mask, SHIFT)
        return _to_rgb(yv, u, v, y_off, c_off, y_gain, r_v, g_u, g_v, b_u, FLOOR, ROUND)

    @triton.jit
    def _store_rgb(out, b, orow, ocol, HO, WO, o_b, o_c, o_r, o_w, acc_r, acc_g, acc_b, inside, PAD: tl.constexpr):
        """Scale 0..255 sums to [0, 1] (clamped), the pad value outside the image, store 3 planes."""
        scale = 1.0 / 255.0
        vr = tl.where(inside, tl.minimum(tl.maximum(acc_r * scale, 0.0), 1.0), PAD)
        vg = tl.where(inside, tl.minimum(tl.maximum(acc_g * scale, 0.0), 1.0), PAD)
        vb = tl.where(inside, tl.minimum(tl.maximum(acc_b * scale, 0.0), 1.0), PAD)
        omask = (orow[:, None] < HO) & (ocol[None, :] < WO)
        o = out + b * o_b + orow[:, None] * o_r + ocol[None, :] * o_w
        ty = out.dtype.element_ty
        tl.store(o, vr.to(ty), mask=omask)
        tl.store(o + o_c, vg.to(ty), mask=omask)
        tl.store(o + 2 * o_c, vb.to(ty), mask=omask)

    @triton.jit
    def yuv_rgb_kernel(src, dst, H, W, s_b, s_r, s_c, d_b, d_c, d_r, d_w,
                       y_off, c_off, y_gain, r_v, g_u, g_v, b_u,
                       SHIFT: tl.constexpr, FLOOR: tl.constexpr, ROUND: tl.constexpr, LINEAR: tl.constexpr,
                       BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
        """Full-size conversion: (B, H*3/2, W) -> (B, 3, H, W) uint8."""
        cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
        rows = tl.program_id(1) * BLOCK_R + tl.arange(0, BLOCK_R)
        b = tl.program_id(2).to(tl.int64)
        row = rows[:, None]
        col = cols[None, :]
        mask = (row < H) & (col < W)
        r, g, bl = _sample(src + b * s_b, row, col, H, W, s_r, s_c, mask, y_off, c_off, y_gain,
                           r_v, g_u, g_v, b_u, SHIFT, FLOOR, ROUND, LINEAR)
        o = dst + b * d_b + row * d_r + col * d_w
        tl.store(o, r.to(tl.uint8), mask=mask)
        tl.store(o + d_c, g.to(tl.uint8), mask=mask)
        tl.store(o + 2 * d_c, bl.to(tl.uint8), mask=mask)

    @triton.jit
    def hpass_kernel(src, tmp, xidx, xw, H, W, NW, K, s_b, s_r, s_c, t_b, t_c, t_r,
                     y_off, c_off, y_gain, r_v, g_u, g_v, b_u,
                     SHIFT: tl.constexpr, FLOOR: tl.constexpr, ROUND: tl.constexpr, LINEAR: tl.constexpr,
                     BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
        """Pass 1: convert and resample along x. tmp[b, c, y, ox] = sum_k w[ox, k] rgb(y, idx[ox, k])."""
        ox = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
        rows = tl.program_id(1) * BLOCK_R + tl.arange(0, BLOCK_R)
        b = tl.program_id(2).to(tl.int64)
        cmask = ox < NW
        mask = (rows[:, None] < H) & cmask[None, :]
        base = src + b * s_b
        acc_r = tl.zeros((BLOCK_R, BLOCK_C), dtype=tl.float32)
        acc_g = tl.zeros((BLOCK_R, BLOCK_C), dtype=tl.float32)
        acc_b = tl.zeros((BLOCK_R, BLOCK_C), dtype=tl.float32)
        for k in range(0, K):
            col = tl.load(xidx + ox * K + k, mask=cmask, other=0)
            w = tl.load(xw + ox * K + k, mask=cmask, other=0.0)
            r, g, bl = _sample(base, rows[:, None], col[None, :], H, W, s_r, s_c, mask, y_off, c_off,
                               y_gain, r_v, g_u, g_v, b_u, SHIFT, FLOOR, ROUND, LINEAR)
            acc_r += w[None, :] * r
            acc_g += w[None, :] * g
            acc_b += w[None, :] * bl
        t = tmp + b * t_b + rows[:, None] * t_r + ox[None, :]
        tl.store(t, acc_r, mask=mask)
        tl.store(t + t_c, acc_g, mask=mask)
        tl.store(t + 2 * t_c, acc_b, mask=mask)

    @triton.jit
    def vpass_kernel(tmp, out, yidx, yw, NH, NW, K, HO, WO, pad_y, pad_x, t_b, t_c, t_r,
                     o_b, o_c, o_r, o_w, PAD: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
        """Pass 2: resample along y, /255, clamp, grey padding, cast; covers the whole canvas."""
        ocol = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
        orow = tl.program_id(1) * BLOCK_R + tl.arange(0, BLOCK_R)
        b = tl.program_id(2).to(tl.int64)
        ry = orow - pad_y
        rx = ocol - pad_x
        rmask = (ry >= 0) & (ry < NH)
        cmask = (rx >= 0) & (rx < NW)
        inside = rmask[:, None] & cmask[None, :]
        ryc = tl.where(rmask, ry, 0)
        base = tmp + b * t_b + rx[None, :]
        acc_r = tl.zeros((BLOCK_R, BLOCK_C), dtype=tl.float32)
        acc_g = tl.zeros((BLOCK_R, BLOCK_C), dtype=tl.float32)
        acc_b = tl.zeros((BLOCK_R, BLOCK_C), dtype=tl.float32)
        for k in range(0, K):
            row = tl.load(yidx + ryc * K + k, mask=rmask, other=0)
            w = tl.load(yw + ryc * K + k, mask=rmask, other=0.0)
            p = base + row[:, None] * t_r
            acc_r += w[:, None] * tl.load(p, mask=inside, other=0.0)
            acc_g += w[:, None] * tl.load(p + t_c, mask=inside, other=0.0)
            acc_b += w[:, None] * tl.load(p + 2 * t_c, mask=inside, other=0.0)
        _store_rgb(out, b, orow, ocol, HO, WO, o_b, o_c, o_r, o_w, acc_r, acc_g, acc_b, inside, PAD)

    @triton.jit
    def direct_kernel(src, out, yidx, yw, xidx, xw, H, W, NH, NW, KY, KX, HO, WO, pad_y, pad_x,
                      s_b, s_r, s_c, o_b, o_c, o_r, o_w,
                      y_off, c_off, y_gain, r_v, g_u, g_v, b_u,
                      SHIFT: tl.constexpr, FLOOR: tl.constexpr, ROUND: tl.constexpr, LINEAR: tl.constexpr,
                      PAD: tl.constexpr,
                      BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
        """One pass: every output pixel converts and weights its whole KY x KX source footprint."""
        ocol = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
        orow = tl.program_id(1) * BLOCK_R + tl.arange(0, BLOCK_R)
        b = tl.program_id(2).to(tl.int64)
        ry = orow - pad_y
        rx = ocol - pad_x
        rmask = (ry >= 0) & (ry < NH)
        cmask = (rx >= 0) & (rx < NW)
        inside = rmask[:, None] & cmask[None, :]
        ryc = tl.where(rmask, ry, 0)
        rxc = tl.where(cmask, rx, 0)
        base = src + b * s_b
        acc_r = tl.zeros((BLOCK_R, BLOCK_C), dtype=tl.float32)
        acc_g = tl.zeros((BLOCK_R, BLOCK_C), dtype=tl.float32)
        acc_b = tl.zeros((BLOCK_R, BLOCK_C), dtype=tl.float32)
        for ky in range(0, KY):
            row = tl.load(yidx + ryc * KY + ky, mask=rmask, other=0)
            wy = tl.load(yw + ryc * KY + ky, mask=rmask, other=0.0)
            for kx in range(0, KX):
                col = tl.load(xidx + rxc * KX + kx, mask=cmask, other=0)
                wx = tl.load(xw + rxc * KX + kx, mask=cmask, other=0.0)
                r, g, bl = _sample(base, row[:, None], col[None, :], H, W, s_r, s_c, inside, y_off, c_off,
                                   y_gain, r_v, g_u, g_v, b_u, SHIFT, FLOOR, ROUND, LINEAR)
                w = wy[:, None] * wx[None, :]
                acc_r += w * r
                acc_g += w * g
                acc_b += w * bl
        _store_rgb(out, b, orow, ocol, HO, WO, o_b, o_c, o_r, o_w, acc_r, acc_g, acc_b, inside, PAD)
