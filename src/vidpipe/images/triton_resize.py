"""Triton kernels: decoded RGB images of any sizes and orientations -> one resized batch (CUDA).

Importing this module never fails: without Triton :func:`available` is False (with the reason in
:func:`unavailable_reason`) and the kernels are not defined; :mod:`vidpipe.images.gpu_resize`
then uses its PyTorch path.

The batch is *ragged*: one launch covers images of different sizes, each described by one row of
an int64 table (see :data:`COLUMNS`): the address of its ``(3, h, w)`` uint8 pixels, a signed
element offset and signed row/column strides (EXIF orientation is a choice of strides, so rotated
photos are never copied), its size, where it lands in the output, and where its resampling taps
are. Two passes, like :mod:`vidpipe.ops.fused`:

- :func:`hpass_kernel`: resample along x into a float32 scratch, ``(3, h, new_w)`` per image;
- :func:`vpass_kernel`: resample along y, scale (``/255`` for floats, round for uint8), fill the
  letterbox padding and cast, over the whole ``(B, 3, H, W)`` output (any strides).

The taps (``idx``/``w``: per output row or column, ``K`` source indices and weights) are those of
the letterbox's default ``F.interpolate(mode="bilinear", ...)`` filter
(:func:`vidpipe.ops.fused.taps_for`).
"""

from __future__ import annotations

try:  # pragma: no cover - exercised on the GPU host (and under TRITON_INTERPRET=1)
    import triton
    import triton.language as tl

    _IMPORT_ERROR: BaseException | None = None
except Exception as exc:  # noqa: BLE001 - ImportError, or a broken install
    triton = None
    tl = None
    _IMPORT_ERROR = exc

__all__ = ["COLUMNS", "available", "unavailable_reason"]

#: Columns of the per-image int64 table, in order.
COLUMNS = (
    "addr",  # address of the decoded uint8 pixels (tensor.data_ptr())
    "offset",  # element offset of oriented pixel (0, 0) from addr
    "c_stride",  # element stride between the 3 planes
    "y_stride",  # signed element stride of one oriented row
    "x_stride",  # signed element stride of one oriented column
    "height",  # oriented decoded size
    "width",
    "new_h",  # resized size, placed at (pad_x, pad_y) in the output
    "new_w",
    "pad_x",
    "pad_y",
    "x_taps",  # element offset of this image's x taps, and taps per output column
    "kx",
    "y_taps",
    "ky",
    "scratch",  # element offset of this image's (3, height, new_w) float32 scratch
)
NCOL = len(COLUMNS)


def available() -> bool:
    """True when Triton imported (it still needs CUDA tensors unless ``TRITON_INTERPRET=1``)."""
    return triton is not None


def unavailable_reason() -> str:
    return "" if _IMPORT_ERROR is None else f"{type(_IMPORT_ERROR).__name__}: {_IMPORT_ERROR}"


if triton is not None:  # pragma: no cover - compiled and run on the GPU host

    @triton.jit
    def hpass_kernel(table, xidx, xw, tmp, KMAX: tl.constexpr, NCOL: tl.constexpr,
                     BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):  # fmt: skip
        """tmp[c, y, ox] = sum_k w[ox, k] * img[c, y, idx[ox, k]] for one tile of one image.

        The tap loop runs to ``KMAX`` (at least the batch's most taps; a compile-time constant,
        rounded up by the caller to limit recompilations) with this image's ``kx`` as a mask: a
        loop bound loaded from memory, or a run-time scalar, is not accepted by every Triton
        interpreter (3.6's is not)."""
        b = tl.program_id(2)
        meta = table + b * NCOL
        src = tl.load(meta).to(tl.pointer_type(tl.uint8))
        offset = tl.load(meta + 1)
        c_stride = tl.load(meta + 2)
        y_stride = tl.load(meta + 3)
        x_stride = tl.load(meta + 4)
        height = tl.load(meta + 5)
        new_w = tl.load(meta + 8)
        x_taps = tl.load(meta + 11)
        kx = tl.load(meta + 12).to(tl.int32)
        scratch = tl.load(meta + 15)
        ox = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
        rows = tl.program_id(1) * BLOCK_R + tl.arange(0, BLOCK_R)
        cmask = ox < new_w
        mask = (rows[:, None] < height) & cmask[None, :]
        row_ptr = src + offset + rows[:, None].to(tl.int64) * y_stride
        acc_r = tl.zeros((BLOCK_R, BLOCK_C), dtype=tl.float32)
        acc_g = tl.zeros((BLOCK_R, BLOCK_C), dtype=tl.float32)
        acc_b = tl.zeros((BLOCK_R, BLOCK_C), dtype=tl.float32)
        tap = x_taps + ox.to(tl.int64) * kx
        for k in range(0, KMAX):
            kmask = cmask & (k < kx)
            col = tl.load(xidx + tap + k, mask=kmask, other=0)
            w = tl.load(xw + tap + k, mask=kmask, other=0.0)
            p = row_ptr + col[None, :].to(tl.int64) * x_stride
            acc_r += w[None, :] * tl.load(p, mask=mask, other=0).to(tl.float32)
            acc_g += w[None, :] * tl.load(p + c_stride, mask=mask, other=0).to(tl.float32)
            acc_b += w[None, :] * tl.load(p + 2 * c_stride, mask=mask, other=0).to(tl.float32)
        plane = height * new_w
        t = tmp + scratch + rows[:, None].to(tl.int64) * new_w + ox[None, :]
        tl.store(t, acc_r, mask=mask)
        tl.store(t + plane, acc_g, mask=mask)
        tl.store(t + 2 * plane, acc_b, mask=mask)

    @triton.jit
    def vpass_kernel(table, yidx, yw, tmp, out, HO, WO, o_b, o_c, o_r, o_w, KMAX: tl.constexpr,
                     PAD: tl.constexpr, U8: tl.constexpr, NCOL: tl.constexpr,
                     BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):  # fmt: skip
        """Resample along y, scale or round, pad and cast, for one output tile of one image."""
        b = tl.program_id(2)
        meta = table + b * NCOL
        height = tl.load(meta + 5)
        new_h = tl.load(meta + 7)
        new_w = tl.load(meta + 8)
        pad_x = tl.load(meta + 9)
        pad_y = tl.load(meta + 10)
        y_taps = tl.load(meta + 13)
        ky = tl.load(meta + 14).to(tl.int32)
        scratch = tl.load(meta + 15)
        ocol = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
        orow = tl.program_id(1) * BLOCK_R + tl.arange(0, BLOCK_R)
        ry = orow - pad_y
        rx = ocol - pad_x
        rmask = (ry >= 0) & (ry < new_h)
        cmask = (rx >= 0) & (rx < new_w)
        inside = rmask[:, None] & cmask[None, :]
        ryc = tl.where(rmask, ry, 0)
        rxc = tl.where(cmask, rx, 0)
        plane = height * new_w
        base = tmp + scratch + rxc[None, :]
        acc_r = tl.zeros((BLOCK_R, BLOCK_C), dtype=tl.float32)
        acc_g = tl.zeros((BLOCK_R, BLOCK_C), dtype=tl.float32)
        acc_b = tl.zeros((BLOCK_R, BLOCK_C), dtype=tl.float32)
        tap = y_taps + ryc * ky
        for k in range(0, KMAX):
            kmask = rmask & (k < ky)
            row = tl.load(yidx + tap + k, mask=kmask, other=0)
            w = tl.load(yw + tap + k, mask=kmask, other=0.0)
            p = base + row[:, None].to(tl.int64) * new_w
            acc_r += w[:, None] * tl.load(p, mask=inside, other=0.0)
            acc_g += w[:, None] * tl.load(p + plane, mask=inside, other=0.0)
            acc_b += w[:, None] * tl.load(p + 2 * plane, mask=inside, other=0.0)
        if U8:
            vr = tl.minimum(tl.maximum(tl.floor(acc_r + 0.5), 0.0), 255.0)
            vg = tl.minimum(tl.maximum(tl.floor(acc_g + 0.5), 0.0), 255.0)
            vb = tl.minimum(tl.maximum(tl.floor(acc_b + 0.5), 0.0), 255.0)
        else:
            vr = tl.minimum(tl.maximum(acc_r * (1.0 / 255.0), 0.0), 1.0)
            vg = tl.minimum(tl.maximum(acc_g * (1.0 / 255.0), 0.0), 1.0)
            vb = tl.minimum(tl.maximum(acc_b * (1.0 / 255.0), 0.0), 1.0)
        vr = tl.where(inside, vr, PAD)
        vg = tl.where(inside, vg, PAD)
        vb = tl.where(inside, vb, PAD)
        omask = (orow[:, None] < HO) & (ocol[None, :] < WO)
        o = out + b.to(tl.int64) * o_b + orow[:, None] * o_r + ocol[None, :] * o_w
        ty = out.dtype.element_ty
        tl.store(o, vr.to(ty), mask=omask)
        tl.store(o + o_c, vg.to(ty), mask=omask)
        tl.store(o + 2 * o_c, vb.to(ty), mask=omask)
