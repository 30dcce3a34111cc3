"""Build a PyTorch network from a parsed Darknet cfg.

``DarknetNet(cfg)(x)`` takes ``(B, 3, H, W)`` RGB in [0, 1] (any float dtype, one device; ``H``
and ``W`` multiples of :attr:`DarknetNet.stride`) and returns one ``(B, N, 5 + C)`` float32 tensor
on the same device: per anchor ``cx, cy, w, h`` in input pixels, objectness and ``C`` class
probabilities (all sigmoid), the YOLO layers concatenated in cfg order. That is the layout of a
YOLOv5 export, so one head (``vidpipe.models.heads.yolo``) decodes both.

Convolutions are stored with batch-norm folded in (see :mod:`.weights`); the network has no
batch-norm layers and runs in inference mode only.
"""

from __future__ import annotations

from fractions import Fraction

import torch
from torch import nn

from vidpipe.errors import ModelError
from vidpipe.models.darknet.cfg import (
    ConvSection,
    DarknetCfg,
    LayerSection,
    MaxpoolSection,
    RouteSection,
    ShortcutSection,
    UpsampleSection,
    YoloSection,
)
from vidpipe.models.darknet.layers import Conv, MaxPool, Route, Shortcut, Upsample, YoloDecode

__all__ = ["DarknetNet"]

_Shape = tuple[int, int, int]  # C, H, W


class DarknetNet(nn.Module):
    """The network of a Darknet cfg (batch-norm folded), as an ``nn.Module``.

    Attributes:
        cfg: the parsed cfg it was built from.
        stride: input height and width must be multiples of this (32 for the YOLO cfgs).
        num_classes: classes per anchor.
        shapes: ``(C, H, W)`` of every layer's output for the cfg's own input size.
    """

    def __init__(self, cfg: DarknetCfg) -> None:
        super().__init__()
        self.cfg = cfg
        self.num_classes = cfg.num_classes
        if cfg.net.channels != 3:
            raise ModelError(f"{cfg.source}:{cfg.net.line}: [net] channels={cfg.net.channels}; vidpipe feeds RGB (3)")
        layers: list[nn.Module] = []
        shapes: list[_Shape] = []
        strides: list[Fraction] = []
        shape: _Shape = (cfg.net.channels, cfg.net.height, cfg.net.width)
        stride = Fraction(1)
        for sec in cfg.layers:
            module, shape, stride = self._build(sec, shape, stride, shapes, strides)
            layers.append(module)
            shapes.append(shape)
            strides.append(stride)
        self.layers = nn.ModuleList(layers)
        self.shapes: tuple[_Shape, ...] = tuple(shapes)
        biggest = max(strides)
        self.stride = int(biggest) if biggest.denominator == 1 else int(biggest) + 1
        self._yolo = tuple(isinstance(m, YoloDecode) for m in layers)
        referenced: set[int] = set()
        for m in layers:
            referenced.update(getattr(m, "sources", ()))
        self._keep = tuple(i in referenced for i in range(len(layers)))
        self._sources = tuple(getattr(m, "sources", None) for m in layers)
        self._channels_last = False
        self.requires_grad_(False)
        self.eval()

    def use_channels_last(self, enabled: bool = True) -> "DarknetNet":
        """Run convolutions in channels-last layout (faster with oneDNN on the CPU and cuDNN FP16).

        Converts the conv weights now; ``forward`` then converts its input. Returns ``self``.
        """
        fmt = torch.channels_last if enabled else torch.contiguous_format
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                m.weight.data = m.weight.data.contiguous(memory_format=fmt)
        self._channels_last = enabled
        return self

    def _build(
        self,
        sec: LayerSection,
        shape: _Shape,
        stride: Fraction,
        shapes: list[_Shape],
        strides: list[Fraction],
    ) -> tuple[nn.Module, _Shape, Fraction]:
        c, h, w = shape
        where = f"{self.cfg.source}:{sec.line}: [{sec.kind}] (layer {sec.index})"
        if isinstance(sec, ConvSection):
            if c % sec.groups or sec.filters % sec.groups:
                raise ModelError(
                    f"{where}: groups={sec.groups} must divide input channels {c} and filters {sec.filters}"
                )
            k = sec.dilation * (sec.size - 1) + 1
            oh = (h + 2 * sec.padding - k) // sec.stride + 1
            ow = (w + 2 * sec.padding - k) // sec.stride + 1
            return Conv(sec, c), self._check(where, (sec.filters, oh, ow)), stride * sec.stride
        if isinstance(sec, MaxpoolSection):
            oh = (h + sec.padding - sec.size) // sec.stride + 1
            ow = (w + sec.padding - sec.size) // sec.stride + 1
            return MaxPool(sec), self._check(where, (c, oh, ow)), stride * sec.stride
        if isinstance(sec, RouteSection):
            inputs = [self._source(where, shapes, j) for j in sec.layers]
            if len({(ih, iw) for _, ih, iw in inputs}) != 1:
                raise ModelError(f"{where}: layers {list(sec.layers)} have different sizes {[s[1:] for s in inputs]}")
            if any(ic % sec.groups for ic, _, _ in inputs):
                raise ModelError(f"{where}: groups={sec.groups} must divide the channels {[s[0] for s in inputs]}")
            out = (sum(ic // sec.groups for ic, _, _ in inputs), inputs[0][1], inputs[0][2])
            return Route(sec), out, max(strides[j] for j in sec.layers)
        if isinstance(sec, ShortcutSection):
            for j in sec.sources:
                other = self._source(where, shapes, j)
                if other != shape:
                    raise ModelError(
                        f"{where}: adds layer {j} of shape {other} to the previous layer's {shape}; "
                        "only equal shapes are supported"
                    )
            return Shortcut(sec), shape, stride
        if isinstance(sec, UpsampleSection):
            return Upsample(sec), (c, h * sec.stride, w * sec.stride), stride / sec.stride
        if isinstance(sec, YoloSection):
            want = len(sec.mask) * (sec.classes + 5)
            if c != want:
                raise ModelError(
                    f"{where}: the layer before has {c} filters but {len(sec.mask)} anchors x "
                    f"({sec.classes} classes + 5) need {want}"
                )
            return YoloDecode(sec), shape, stride
        raise ModelError(f"{where}: layer type is not supported")  # parse_cfg admits no other type

    def _source(self, where: str, shapes: list[_Shape], j: int) -> _Shape:
        if isinstance(self.cfg.layers[j], YoloSection):
            raise ModelError(f"{where}: refers to layer {j}, a [yolo] layer; refer to the convolution before it")
        return shapes[j]

    def _check(self, where: str, shape: _Shape) -> _Shape:
        if shape[1] < 1 or shape[2] < 1:
            raise ModelError(
                f"{where}: output would be {shape[1]}x{shape[2]} for the [net] input "
                f"{self.cfg.net.height}x{self.cfg.net.width}"
            )
        return shape

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, 3, H, W)`` in [0, 1] -> ``(B, N, 5 + C)`` float32 (see the module docstring)."""
        input_h, input_w = int(x.shape[-2]), int(x.shape[-1])
        if self._channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        outputs: list[torch.Tensor | None] = []
        detections: list[torch.Tensor] = []
        for layer, sources, keep, is_yolo in zip(self.layers, self._sources, self._keep, self._yolo):
            if is_yolo:
                detections.append(layer(x, input_h, input_w))
            elif sources is None:
                x = layer(x)
            else:
                x = layer(*(outputs[j] if j < len(outputs) - 1 else x for j in sources))
            outputs.append(x if keep else None)
        return detections[0] if len(detections) == 1 else torch.cat(detections, dim=1)
