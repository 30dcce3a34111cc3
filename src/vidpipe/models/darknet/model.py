"""The Darknet backend: a :class:`DarknetNet` on one device and dtype behind the ``Model`` interface."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from vidpipe.errors import ModelError
from vidpipe.models.base import Model, ModelInfo

if TYPE_CHECKING:
    import torch

    from vidpipe.models.darknet.net import DarknetNet

__all__ = ["DarknetModel"]

logger = logging.getLogger(__name__)


def check_input_size(size: int | Sequence[int] | None, stride: int, default: tuple[int, int]) -> tuple[int, int]:
    """``(H, W)`` from an int, a pair or ``None`` (``default``); ModelError unless multiples of ``stride``."""
    if size is None:
        h, w = default
        if h % stride or w % stride:
            raise ModelError(f"the cfg's [net] size {h}x{w} is not a multiple of the stride {stride}; pass input_size=")
        return default
    if isinstance(size, int) and not isinstance(size, bool):
        hw = (size, size)
    elif (
        isinstance(size, Sequence)
        and len(size) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in size)
    ):
        hw = (int(size[0]), int(size[1]))
    else:
        raise ModelError(f"input_size={size!r}; expected an int or (height, width)")
    if min(hw) <= 0 or hw[0] % stride or hw[1] % stride:
        raise ModelError(f"input_size={hw[0]}x{hw[1]}: height and width must be positive multiples of {stride}")
    return hw


class DarknetModel(Model):
    """A Darknet YOLO network (batch-norm folded) ready to run.

    ``forward(x)``: ``x`` is ``(B, 3, H, W)`` RGB in [0, 1], ``self.dtype`` on ``self.device``,
    ``H`` and ``W`` multiples of ``info.stride`` (any size, not only ``info.input_size``).
    Returns ``(B, N, 5 + C)`` float32 on ``self.device`` (decoded by the ``yolov5`` head).
    """

    def __init__(
        self,
        net: "DarknetNet",
        *,
        name: str,
        names: Sequence[str] | None,
        device: "torch.device",
        dtype: "torch.dtype",
        input_size: int | Sequence[int] | None = None,
    ) -> None:
        cfg = net.cfg
        classes = net.num_classes
        if names is None:
            names = tuple(f"class{i}" for i in range(classes))
        names = tuple(names)
        if len(names) != classes:
            raise ModelError(f"{name}: {len(names)} class names for a model with {classes} classes")
        size = check_input_size(input_size, net.stride, (cfg.net.height, cfg.net.width))
        self.net = net.to(device=device, dtype=dtype).eval().use_channels_last()
        self.device = device
        self.dtype = dtype
        self.info = ModelInfo(
            name=name,
            format="darknet",
            names=names,
            input_size=size,
            stride=net.stride,
            head="yolov5",
            dynamic_batch=True,
            max_batch=None,
            dynamic_shape=True,
        )
        logger.info(
            "loaded Darknet model %s: %d classes, input %dx%d, %s %s",
            name,
            classes,
            size[0],
            size[1],
            device,
            str(dtype).removeprefix("torch."),
        )

    def forward(self, x: "torch.Tensor") -> "torch.Tensor":
        if x.ndim != 4 or x.shape[1] != 3:
            raise ModelError(f"{self.info.name}: expected a (B, 3, H, W) batch, got {tuple(x.shape)}")
        if x.device != self.device or x.dtype != self.dtype:
            raise ModelError(
                f"{self.info.name}: input is {str(x.dtype).removeprefix('torch.')} on {x.device}, the model "
                f"runs {str(self.dtype).removeprefix('torch.')} on {self.device}"
            )
        h, w = x.shape[-2:]
        if h % self.info.stride or w % self.info.stride:
            raise ModelError(f"{self.info.name}: input {h}x{w} is not a multiple of the stride {self.info.stride}")
        return self.net(x)

    def __repr__(self) -> str:
        i = self.info
        return (
            f"DarknetModel(name={i.name!r}, classes={i.num_classes}, input_size={i.input_size}, "
            f"device={self.device}, dtype={str(self.dtype).removeprefix('torch.')})"
        )
