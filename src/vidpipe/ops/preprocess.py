"""Decoded frames -> model input: colour conversion (YUV formats), letterbox, scaling, dtype.

One entry point, :func:`preprocess`, dispatching on ``FrameBatch.format``: RGB batches are
letterboxed with plain PyTorch ops; NV12/P010 batches (NVDEC) go through the fused YUV kernel in
:mod:`vidpipe.ops.fused`, which converts colour and letterboxes in one pass.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from vidpipe.ops.letterbox import letterbox
from vidpipe.types import FrameBatch, ModelInput

if TYPE_CHECKING:
    import torch


def preprocess(
    batch: FrameBatch,
    *,
    size: tuple[int, int],
    dtype: "torch.dtype",
    device: "torch.device",
) -> ModelInput:
    """Turn a :class:`FrameBatch` into a letterboxed :class:`ModelInput` on ``device``.

    Args:
        batch: decoded frames (any format, any device).
        size: ``(H, W)`` of the model input.
        dtype: float dtype of the output tensor (float16 on CUDA, float32 on CPU typically).
        device: where the output lives; CPU batches bound for CUDA are copied asynchronously.

    Returns:
        ``ModelInput`` with ``tensor`` ``(B, 3, H, W)`` in [0, 1], per-frame ``scale`` ``(B, 2)``
        (``sx, sy`` of the resized image) and ``pad`` ``(B, 2)``.
    """
    import torch

    device = torch.device(device)
    if device.type == "cuda" and device.index is None:  # "cuda" means the current CUDA device
        device = torch.device("cuda", torch.cuda.current_device())
    if batch.format == "rgb":
        data = batch.data
        if data.device != device:
            if data.device.type == "cpu" and device.type == "cuda" and not data.is_pinned():
                data = data.pin_memory()
            data = data.to(device, non_blocking=True)
        tensor, geo = letterbox(data, size, dtype=dtype)
    else:
        from vidpipe.ops.fused import yuv_letterbox

        if batch.device != device:
            raise ValueError(f"{batch.format} frames on {batch.device} cannot feed a model on {device}")
        tensor, geo = yuv_letterbox(batch, size, dtype=dtype)
    # Per axis, from the real resized size (Darknet truncates the short side: 640x272 -> 416x176
    # is 0.65 along x but 0.6471 along y), as Darknet's correct_yolo_boxes maps boxes back.
    scale, pad = _geometry_tensors(
        len(batch), (float(geo.sx), float(geo.sy)), (float(geo.pad_x), float(geo.pad_y)), device
    )
    return ModelInput(tensor=tensor, frames=batch.frames, scale=scale, pad=pad)


_geometry_cache: dict[tuple, "tuple[torch.Tensor, torch.Tensor]"] = {}
_geometry_lock = threading.Lock()


def _geometry_tensors(
    b: int, scale: tuple[float, float], pad: tuple[float, float], device: "torch.device"
) -> "tuple[torch.Tensor, torch.Tensor]":
    """``(scale (B, 2) (sx, sy), pad (B, 2))`` float32 on ``device``, shared by every batch of one geometry
    (read-only: nothing downstream writes to them). Made once, so a batch costs no host-to-device
    copy (``torch.tensor(..., device=cuda)`` synchronizes the stream) and no kernel launch."""
    import torch

    key = (b, scale, pad, str(device))
    got = _geometry_cache.get(key)
    if got is None:
        host = torch.tensor([[scale[0], scale[1], pad[0], pad[1]]], dtype=torch.float32).expand(b, 4)
        both = host.to(device)  # once per geometry
        got = (both[:, :2], both[:, 2:])
        with _geometry_lock:
            if len(_geometry_cache) > 64:
                _geometry_cache.clear()
            _geometry_cache[key] = got
    return got


def concat_inputs(parts: "list[ModelInput]") -> ModelInput:
    """Join model inputs of the same size (e.g. chunks from several sources) into one batch."""
    import torch

    if len(parts) == 1:
        return parts[0]
    return ModelInput(
        tensor=torch.cat([p.tensor for p in parts]),
        frames=tuple(f for p in parts for f in p.frames),
        scale=torch.cat([p.scale for p in parts]),
        pad=torch.cat([p.pad for p in parts]),
    )
