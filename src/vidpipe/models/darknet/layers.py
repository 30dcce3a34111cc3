"""PyTorch modules for the Darknet layer types, inference only, batch-norm already folded.

Every module's ``forward`` takes ``(B, C, H, W)`` tensors on one device in the network's dtype.
:class:`YoloDecode` returns ``(B, A * H * W, 5 + C)`` float32 boxes in input pixels.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from vidpipe.models.darknet.cfg import (
    ConvSection,
    MaxpoolSection,
    RouteSection,
    ShortcutSection,
    UpsampleSection,
    YoloSection,
)

__all__ = ["Conv", "MaxPool", "Route", "Shortcut", "Upsample", "YoloDecode", "activation"]


def activation(name: str) -> nn.Module:
    """The module for a Darknet activation name (leaky uses Darknet's slope 0.1)."""
    if name == "leaky":
        return nn.LeakyReLU(0.1, inplace=True)
    if name == "relu":
        return nn.ReLU(inplace=True)
    if name == "mish":
        return nn.Mish(inplace=True)
    if name == "swish":
        return nn.SiLU(inplace=True)
    if name == "logistic":
        return nn.Sigmoid()
    return nn.Identity()


class Conv(nn.Module):
    """``[convolutional]``: conv with bias (BN folded into it at load time) and an activation."""

    def __init__(self, sec: ConvSection, in_channels: int) -> None:
        super().__init__()
        self.batch_normalize = sec.batch_normalize  # how the .weights file stores it
        self.conv = nn.Conv2d(
            in_channels,
            sec.filters,
            sec.size,
            stride=sec.stride,
            padding=sec.padding,
            dilation=sec.dilation,
            groups=sec.groups,
            bias=True,
        )
        self.act = activation(sec.activation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.conv(x))


class MaxPool(nn.Module):
    """``[maxpool]`` with Darknet's padding: ``padding // 2`` left/top, the rest right/bottom.

    Padded cells are ``-inf`` so they never win, as in Darknet's ``forward_maxpool_layer``.
    """

    def __init__(self, sec: MaxpoolSection) -> None:
        super().__init__()
        self.size, self.stride = sec.size, sec.stride
        before = sec.padding // 2
        self.pad = (before, sec.padding - before, before, sec.padding - before)  # l, r, t, b
        self.plain = sec.padding == 0 or (sec.size == sec.stride and sec.padding == sec.size - 1 and before == 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if any(self.pad):
            if self.plain and x.shape[-1] % self.stride == 0 and x.shape[-2] % self.stride == 0:
                # size == stride on a divisible map: the right/bottom padding is never read
                return F.max_pool2d(x, self.size, self.stride)
            x = F.pad(x, self.pad, value=float("-inf"))
        return F.max_pool2d(x, self.size, self.stride)


class Route(nn.Module):
    """``[route]``: concatenate the outputs of ``sources``, each reduced to its channel group."""

    def __init__(self, sec: RouteSection) -> None:
        super().__init__()
        self.sources = sec.layers
        self.groups, self.group_id = sec.groups, sec.group_id

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        if self.groups > 1:
            xs = tuple(x.chunk(self.groups, dim=1)[self.group_id] for x in xs)
        return xs[0] if len(xs) == 1 else torch.cat(xs, dim=1)


class Shortcut(nn.Module):
    """``[shortcut]``: the previous output plus ``sources``, then the activation."""

    def __init__(self, sec: ShortcutSection) -> None:
        super().__init__()
        self.sources = (sec.index - 1, *sec.sources)
        self.act = activation(sec.activation)

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        out = xs[0] + xs[1]
        for x in xs[2:]:
            out = out + x
        return self.act(out)


class Upsample(nn.Module):
    """``[upsample]``: nearest-neighbour by ``stride``, times ``scale`` (Darknet's option)."""

    def __init__(self, sec: UpsampleSection) -> None:
        super().__init__()
        self.stride, self.scale = sec.stride, sec.scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.interpolate(x, scale_factor=self.stride, mode="nearest")
        return x * self.scale if self.scale != 1.0 else x


class YoloDecode(nn.Module):
    """``[yolo]``: decode a ``(B, A * (5 + C), H, W)`` map into ``(B, A * H * W, 5 + C)`` float32.

    Per anchor: ``cx, cy, w, h`` in input pixels, objectness and ``C`` class probabilities
    (sigmoid), as Darknet's ``get_yolo_box``::

        cx = (sigmoid(tx) * s - (s - 1) / 2 + col) * input_w / W     (s = scale_x_y)
        w  = exp(tw) * anchor_w

    Rows are ordered anchor, row, column. Grids are cached per ``(H, W, device)``.
    """

    def __init__(self, sec: YoloSection) -> None:
        super().__init__()
        self.num_anchors = len(sec.mask)
        self.num_classes = sec.classes
        self.scale_x_y = sec.scale_x_y
        self.anchors = sec.masked_anchors  # (w, h) in input pixels
        self._grids: dict[tuple[int, int, int, int, str], tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}

    def _grid(
        self, h: int, w: int, input_h: int, input_w: int, device: torch.device
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Float32 ``(1, 1, h, w, 2)`` cell offsets (minus ``(s - 1) / 2``), ``(2,)`` stride and
        ``(1, A, 1, 1, 2)`` anchors on ``device``, cached per size and device."""
        key = (h, w, input_h, input_w, str(device))
        cached = self._grids.get(key)
        if cached is None:
            ys, xs = torch.meshgrid(
                torch.arange(h, dtype=torch.float32, device=device),
                torch.arange(w, dtype=torch.float32, device=device),
                indexing="ij",
            )
            grid = (torch.stack((xs, ys), dim=-1) - 0.5 * (self.scale_x_y - 1.0)).view(1, 1, h, w, 2)
            stride = torch.tensor((input_w / w, input_h / h), dtype=torch.float32, device=device)
            anchors = torch.tensor(self.anchors, dtype=torch.float32, device=device).view(1, -1, 1, 1, 2)
            cached = self._grids[key] = (grid, stride, anchors)
        return cached

    def forward(self, x: torch.Tensor, input_h: int, input_w: int) -> torch.Tensor:
        b, _, h, w = x.shape
        a, n = self.num_anchors, 5 + self.num_classes
        p = x.view(b, a, n, h, w).permute(0, 1, 3, 4, 2).float()
        grid, stride, anchors = self._grid(h, w, input_h, input_w, x.device)
        xy = p[..., :2].sigmoid()
        if self.scale_x_y != 1.0:
            xy = xy * self.scale_x_y
        xy = (xy + grid) * stride
        wh = p[..., 2:4].exp() * anchors
        out = torch.cat((xy, wh, p[..., 4:].sigmoid()), dim=-1)
        return out.view(b, a * h * w, n)
