"""Tiny detection networks whose outputs are known, in each head's output format, and exporters.

Every network computes ``f = 2 * mean(image)`` per image and scales a fixed template by it, so an
image filled with 0.5 gives the template (``f = 1``) and one filled with 0.25 gives ``f = 0.5``:
the input really flows through, per row, in every exported format.

Template (``N`` boxes/queries, ``C`` classes, input ``H x W``), box ``j`` at ``f = 1``:
``cx = 10 + 5j, cy = 8 + 3j, w = 6 + j, h = 4 + 2j`` pixels, class ``j % C``.
"""

from __future__ import annotations

import math
import warnings

import torch

N, C = 12, 3
H, W = 64, 96


def boxes_cxcywh() -> torch.Tensor:
    j = torch.arange(N, dtype=torch.float32)
    return torch.stack([10 + 5 * j, 8 + 3 * j, 6 + j, 4 + 2 * j], dim=1)


def expected_xyxy(f: float) -> torch.Tensor:
    """``(N, 4)`` boxes of image factor ``f`` in input pixels (box coordinates scale with f)."""
    b = boxes_cxcywh() * f
    return torch.cat([b[:, :2] - b[:, 2:] / 2, b[:, :2] + b[:, 2:] / 2], dim=1)


def expected_classes() -> torch.Tensor:
    return torch.arange(N) % C


def yolov8_score(j: int, f: float) -> float:
    return f * (0.30 + 0.05 * j)


def yolov5_score(j: int, f: float) -> float:
    return (f * 0.9) * (f * (0.30 + 0.05 * j))


def detr_logit(j: int) -> float:
    return 1.0 + 0.25 * j


def detr_score(j: int, f: float) -> float:
    e = math.exp(f * detr_logit(j))
    return e / (e + C)  # C other logits (C - 1 classes + no-object) are 0


def rfdetr_logit(j: int) -> float:
    return -2.0 + 0.4 * j


def rfdetr_score(j: int, f: float) -> float:
    return 1.0 / (1.0 + math.exp(-f * rfdetr_logit(j)))


class _Scaled(torch.nn.Module):
    """Subclasses register ``tpl`` buffers; ``factor(x)`` is ``(B,)`` = 2 * mean."""

    @staticmethod
    def factor(x: torch.Tensor) -> torch.Tensor:
        return 2 * x.float().mean(dim=(1, 2, 3))


class YoloV8Net(_Scaled):
    """``[B, 4 + C, N]``: cxcywh pixels then sigmoided class scores."""

    def __init__(self, num_classes: int = C) -> None:
        super().__init__()
        tpl = torch.zeros(4 + num_classes, N)
        tpl[:4] = boxes_cxcywh().T
        for j in range(N):
            tpl[4 + j % num_classes, j] = 0.30 + 0.05 * j
        self.register_buffer("tpl", tpl)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.tpl[None] * self.factor(x)[:, None, None]).to(x.dtype)


class YoloV5Net(_Scaled):
    """``[B, N, 5 + C]``: cxcywh pixels, objectness 0.9, class probabilities."""

    def __init__(self, num_classes: int = C) -> None:
        super().__init__()
        tpl = torch.zeros(N, 5 + num_classes)
        tpl[:, :4] = boxes_cxcywh()
        tpl[:, 4] = 0.9
        for j in range(N):
            tpl[j, 5 + j % num_classes] = 0.30 + 0.05 * j
        self.register_buffer("tpl", tpl)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.tpl[None] * self.factor(x)[:, None, None]).to(x.dtype)


def _normalised_boxes() -> torch.Tensor:
    return boxes_cxcywh() / torch.tensor([W, H, W, H], dtype=torch.float32)


class DetrNet(_Scaled):
    """``{"pred_logits": [B, N, C + 1], "pred_boxes": [B, N, 4]}`` (softmax, last = no-object)."""

    def __init__(self) -> None:
        super().__init__()
        logits = torch.zeros(N, C + 1)
        for j in range(N):
            logits[j, j % C] = detr_logit(j)
        self.register_buffer("logits", logits)
        self.register_buffer("boxes", _normalised_boxes())

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        f = self.factor(x)[:, None, None]
        return {"pred_logits": self.logits[None] * f, "pred_boxes": self.boxes[None] * f}


class RfDetrNet(_Scaled):
    """``(dets [B, N, 4], labels [B, N, C])`` as RF-DETR's ONNX export orders them (sigmoid logits)."""

    def __init__(self) -> None:
        super().__init__()
        logits = torch.full((N, C), -10.0)
        for j in range(N):
            logits[j, j % C] = rfdetr_logit(j)
        self.register_buffer("logits", logits)
        self.register_buffer("boxes", _normalised_boxes())

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        f = self.factor(x)[:, None, None]
        return self.boxes[None] * f, self.logits[None] * f


class TorchvisionNet(_Scaled):
    """torchvision-style list of dicts; image ``i`` of the batch has ``i + 1`` boxes, labels ``1 + j % C``."""

    def __init__(self) -> None:
        super().__init__()
        self.num_classes = C
        self.register_buffer("tpl", expected_xyxy(1.0))

    def forward(self, x: torch.Tensor) -> list[dict[str, torch.Tensor]]:
        f = self.factor(x)
        out: list[dict[str, torch.Tensor]] = []
        for i in range(x.shape[0]):
            n = i + 1
            j = torch.arange(n, device=x.device)
            out.append(
                {
                    "boxes": self.tpl[:n] * f[i],
                    "labels": j % self.num_classes + 1,
                    "scores": f[i] * (0.30 + 0.05 * j.float()),
                }
            )
        return out


def batch_of_two(dtype: torch.dtype = torch.float32, device: str = "cpu") -> torch.Tensor:
    """Image 0 filled with 0.5 (``f = 1``), image 1 with 0.25 (``f = 0.5``), ``(2, 3, H, W)``."""
    x = torch.empty((2, 3, H, W), dtype=dtype, device=device)
    x[0] = 0.5
    x[1] = 0.25
    return x


# ---------------------------------------------------------------- exporters


def example(batch: int = 2) -> torch.Tensor:
    return torch.full((batch, 3, H, W), 0.5)


def to_onnx(net: torch.nn.Module, path, *, output_names, dynamic_batch: bool = True, input_shape=None) -> None:
    x = torch.full(input_shape, 0.5) if input_shape is not None else example()
    axes = {"images": {0: "batch"}} if dynamic_batch else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            net.eval(),
            (x,),
            str(path),
            dynamo=False,
            input_names=["images"],
            output_names=list(output_names),
            dynamic_axes=axes,
            opset_version=17,
        )


def to_torchscript(net: torch.nn.Module, path, *, script: bool = False, extra_files=None) -> None:
    with warnings.catch_warnings():  # torch >= 2.10 marks TorchScript deprecated
        warnings.simplefilter("ignore")
        mod = torch.jit.script(net.eval()) if script else torch.jit.trace(net.eval(), example(), strict=False)
        torch.jit.save(mod, str(path), _extra_files=extra_files or {})


def to_exported(net: torch.nn.Module, path, *, dynamic_batch: bool = True, device: str = "cpu") -> None:
    """torch.export the net on ``device`` (programs keep the device they were exported on)."""
    shapes = {"x": {0: torch.export.Dim("batch", min=1, max=64)}} if dynamic_batch else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = torch.export.export(net.eval().to(device), (example().to(device),), dynamic_shapes=shapes)
    torch.export.save(ep, str(path))
