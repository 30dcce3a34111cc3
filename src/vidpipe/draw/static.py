"""The static layer of an annotator: zones (translucent fill, outline, name) and lines (segment,
name), rasterised once per frame size and device and blended onto every frame.

Kept sparse: the flat indices of the covered pixels with their colour and alpha (0..255), so a
frame costs one gather, an integer blend and one scatter over those pixels only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vidpipe.draw.palette import PALETTE, text_colour
from vidpipe.draw.shapes import polygon_mask, polyline_mask, segment_mask
from vidpipe.draw.text import GlyphAtlas, encode, render_codes

if TYPE_CHECKING:
    import torch

    from vidpipe.zones.geometry import Line, Zone

__all__ = ["StaticLayer", "build_static", "ZONE_FILL_ALPHA"]

ZONE_FILL_ALPHA = 64  # of 255: a light tint, the scene stays visible
_ZONE_COLOURS = (3, 1, 5, 7, 10, 6)  # palette rows for zones (blue, green, purple, ...)
_LINE_COLOURS = (2, 4, 0, 8, 9, 11)  # and for lines (yellow, orange, red, ...)


@dataclass(frozen=True, repr=False)
class StaticLayer:
    """``index`` ``(K,)`` int64 flat pixels, ``rgb`` ``(3, K)`` int32, ``alpha`` ``(K,)`` int32."""

    index: "torch.Tensor"
    rgb: "torch.Tensor"
    alpha: "torch.Tensor"

    def to(self, device: "torch.device") -> "StaticLayer":
        return StaticLayer(self.index.to(device), self.rgb.to(device), self.alpha.to(device))

    def blend(self, canvas: "torch.Tensor") -> None:
        """Blend onto ``canvas`` ``(3, H, W)`` uint8 in place (``(c * (255 - a) + s * a + 127) // 255``)."""
        import torch

        flat = canvas.view(3, -1)
        px = flat[:, self.index].to(torch.int32)
        flat[:, self.index] = ((px * (255 - self.alpha) + self.rgb * self.alpha + 127) // 255).to(torch.uint8)


def _name_block(atlas: GlyphAtlas, text: str, colour: tuple[int, int, int]):
    """``(3, h, w)`` int32 colours of a name label (text on ``colour``)."""
    import torch

    codes = torch.tensor([encode(text, len(text))], dtype=torch.int64, device=atlas.alpha.device)
    margin = atlas.pad + 1
    alpha, tw = render_codes(atlas, codes, x0=margin, y0=1, width=2 * margin + len(text) * atlas.max_advance + atlas.cell_width)
    width = int(tw[0]) + 2 * margin
    a = torch.nn.functional.pad(alpha[0, :, :width].to(torch.int32), (0, 0, 0, 1))
    bg = torch.tensor(colour, dtype=torch.int32, device=a.device)[:, None, None]
    fg = torch.tensor(text_colour(colour), dtype=torch.int32, device=a.device)[:, None, None]
    return (bg * (255 - a) + fg * a + 127) // 255


def _put(rgb: "torch.Tensor", alpha: "torch.Tensor", block: "torch.Tensor", x: int, y: int) -> None:
    _, h, w = rgb.shape
    bh, bw = block.shape[1:]
    x, y = max(0, min(x, w - bw)), max(0, min(y, h - bh))
    ys, xs = slice(y, min(h, y + bh)), slice(x, min(w, x + bw))
    rgb[:, ys, xs] = block[:, : ys.stop - y, : xs.stop - x]
    alpha[ys, xs] = 255


def build_static(
    lines: "Sequence[Line]", zones: "Sequence[Zone]", height: int, width: int, thickness: int, atlas: GlyphAtlas
) -> StaticLayer:
    """Rasterise ``zones`` then ``lines`` (later on top) for a ``height x width`` frame on the
    atlas's device."""
    import torch

    dev = atlas.alpha.device
    rgb = torch.zeros((3, height, width), dtype=torch.int32, device=dev)
    alpha = torch.zeros((height, width), dtype=torch.int32, device=dev)

    def paint(mask: torch.Tensor, colour: tuple[int, int, int], a: int) -> None:
        rgb[:, mask] = torch.tensor(colour, dtype=torch.int32, device=dev)[:, None]
        alpha[mask] = a

    labels = []
    for i, z in enumerate(zones):
        colour = PALETTE[_ZONE_COLOURS[i % len(_ZONE_COLOURS)]]
        fill = torch.zeros((height, width), dtype=torch.bool, device=dev)
        polygon_mask(fill, z.points)
        paint(fill, colour, ZONE_FILL_ALPHA)
        edge = torch.zeros_like(fill)
        polyline_mask(edge, z.points, thickness, closed=True)
        paint(edge, colour, 255)
        top = min(z.points, key=lambda p: (p[1], p[0]))
        labels.append((z.name, colour, int(top[0]), int(top[1])))
    for i, ln in enumerate(lines):
        colour = PALETTE[_LINE_COLOURS[i % len(_LINE_COLOURS)]]
        edge = torch.zeros((height, width), dtype=torch.bool, device=dev)
        segment_mask(edge, ln.start, ln.end, thickness)
        paint(edge, colour, 255)
        labels.append((ln.name, colour, int(ln.start[0]), int(ln.start[1])))
    for name, colour, x, y in labels:  # names last: readable over the shapes
        block = _name_block(atlas, name, colour)
        _put(rgb, alpha, block, x, y - block.shape[1])
    index = torch.nonzero(alpha.reshape(-1)).reshape(-1)
    return StaticLayer(index=index, rgb=rgb.reshape(3, -1)[:, index].contiguous(), alpha=alpha.reshape(-1)[index])
