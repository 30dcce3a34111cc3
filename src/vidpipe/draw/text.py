"""Text drawn from a glyph atlas: glyphs rasterised once on the CPU, blitted with tensor indexing.

The font is Pillow's default (``ImageFont.load_default(size=px)``: the FreeType "Aileron" font
Pillow ships; Pillow is a core dependency, OpenCV is not). Each printable ASCII character (32..126)
is rendered once, white on black, into a cell of ``(height, cell_width)`` with its pen origin at
``x = pad`` and the top of the cell on the font's ascender line; the cell's values are the glyph's
coverage (alpha, 0..255). Text is a row of **codes** (``0`` = nothing, width 0; ``1 + ord(c) - 32``
for a printable character; anything else is drawn as ``?``); glyphs are placed at the running sum
of their integer advances, and where the cells of neighbouring glyphs overlap the larger alpha
wins (``scatter_reduce`` ``amax``: deterministic, the same on CPU and CUDA).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["GlyphAtlas", "build_atlas", "encode", "render_codes"]

FIRST, LAST = 32, 126
NUM_CODES = LAST - FIRST + 2  # code 0 = nothing


@dataclass(frozen=True, repr=False)
class GlyphAtlas:
    """Glyphs of one font size on one device.

    Attributes:
        alpha: ``(NUM_CODES, height, cell_width)`` uint8 coverage; row 0 (nothing) is empty.
        advance: ``(NUM_CODES,)`` int64 pen advance in pixels (0 for code 0).
        height: text line height in pixels (ascent + descent).
        pad: the pen origin's x within a cell (room for ink left of the origin).
        size: the font size in pixels.
    """

    alpha: "torch.Tensor"
    advance: "torch.Tensor"
    height: int
    pad: int
    size: int
    max_advance: int

    @property
    def cell_width(self) -> int:
        return int(self.alpha.shape[2])

    def __repr__(self) -> str:
        return f"GlyphAtlas(size={self.size}, cell={self.height}x{self.cell_width}, device={self.alpha.device})"


def _font(size: int):
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1: the fixed bitmap font only
        return ImageFont.load_default()


def build_atlas(size: int, device: "torch.device | str" = "cpu") -> GlyphAtlas:
    """Rasterise the printable ASCII glyphs at ``size`` pixels (CPU, once) and put them on ``device``."""
    import numpy as np
    import torch
    from PIL import Image, ImageDraw

    font = _font(size)
    ascent, descent = font.getmetrics()
    height = int(ascent + descent)
    chars = [chr(c) for c in range(FIRST, LAST + 1)]
    boxes = [font.getbbox(c) for c in chars]
    advances = [int(round(font.getlength(c))) for c in chars]
    pad = max(0, -min(b[0] for b in boxes)) + 1
    width = pad + max(max(b[2] for b in boxes), max(advances)) + 1
    alpha = np.zeros((NUM_CODES, height, width), dtype=np.uint8)
    for i, c in enumerate(chars):
        img = Image.new("L", (width, height), 0)
        ImageDraw.Draw(img).text((pad, 0), c, fill=255, font=font)
        alpha[i + 1] = np.asarray(img)
    adv = torch.tensor([0, *advances], dtype=torch.int64)
    return GlyphAtlas(
        alpha=torch.from_numpy(alpha).to(device),
        advance=adv.to(device),
        height=height,
        pad=pad,
        size=size,
        max_advance=int(adv.max()),
    )


def encode(text: str, length: int | None = None) -> list[int]:
    """``text`` as atlas codes (non-printable characters become ``?``), padded with 0 to ``length``."""
    q = ord("?") - FIRST + 1
    codes = [ord(c) - FIRST + 1 if FIRST <= ord(c) <= LAST else q for c in text]
    if length is not None:
        codes = codes[:length] + [0] * max(0, length - len(codes))
    return codes


def render_codes(atlas: GlyphAtlas, codes: "torch.Tensor", *, x0: int = 0, y0: int = 0, width: int | None = None):
    """Text alpha of each row of ``codes``.

    Args:
        atlas: the glyphs, on the device of ``codes``.
        codes: ``(N, L)`` int64 codes (see the module docstring).
        x0, y0: where each row's pen starts in its output block (``x0 >= atlas.pad`` keeps ink
            left of the first glyph's origin).
        width: the output block's width; default: room for ``L`` widest glyphs.

    Returns:
        ``(alpha, text_width)``: ``(N, y0 + height, width)`` uint8 coverage and ``(N,)`` int64 pen
        advance of each row (the text's width in pixels), both on ``codes``' device.
    """
    import torch

    dev = codes.device
    n, length = codes.shape
    h, cw = atlas.height, atlas.cell_width
    if width is None:
        width = x0 + length * atlas.max_advance + cw
    out_h = y0 + h
    adv = atlas.advance[codes]  # (N, L)
    pen = torch.cumsum(adv, 1) - adv
    xs = (x0 - atlas.pad) + pen[:, :, None] + torch.arange(cw, device=dev)  # (N, L, cw)
    ok_x = (xs >= 0) & (xs < width)
    ys = y0 + torch.arange(h, device=dev)  # (h,)
    rows = torch.arange(n, device=dev)[:, None, None, None] * (out_h * width)
    flat = rows + ys[None, None, :, None] * width + xs.clamp(0, width - 1)[:, :, None, :]  # (N, L, h, cw)
    vals = atlas.alpha[codes].to(torch.int32)  # (N, L, h, cw)
    vals = vals * ok_x[:, :, None, :]
    buf = torch.zeros(n * out_h * width, dtype=torch.int32, device=dev)
    buf.scatter_reduce_(0, flat.reshape(-1), vals.reshape(-1), reduce="amax")
    return buf.view(n, out_h, width).to(torch.uint8), adv.sum(1)
