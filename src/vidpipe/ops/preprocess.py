"""Decoded frames -> model input: colour conversion (YUV formats), letterbox, scaling, dtype.

One entry point, :func:`preprocess`, dispatching on ``FrameBatch.format``: RGB batches are
letterboxed with plain PyTorch ops; NV12/P010 batches (NVDEC) go through the fused YUV kernel in
:mod:`vidpipe.ops.fused`, which converts colour and letterboxes in one pass.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from vidpipe.ops.letterbox import letterbox
from vidpipe.types import FrameBatch, ModelInput

if TYPE_CHECKING:
    import torch

    from vidpipe.ops.scratch import ScratchArena
    from vidpipe.pipeline_config import PipelineConfig


def preprocess(
    batch: FrameBatch,
    *,
    size: tuple[int, int],
    dtype: "torch.dtype",
    device: "torch.device",
    keep_frames: bool = False,
    scratch: "ScratchArena | None" = None,
) -> ModelInput:
    """Turn a :class:`FrameBatch` into a letterboxed :class:`ModelInput` on ``device``.

    Args:
        batch: decoded frames (any format, any device).
        size: ``(H, W)`` of the model input.
        dtype: float dtype of the output tensor (float16 on CUDA, float32 on CPU typically).
        device: where the output lives; CPU batches bound for CUDA are copied asynchronously.
        keep_frames: also return the frames at the source's size, ``(B, 3, H, W)`` uint8 RGB on
            ``device``, in ``ModelInput.images``, from this same decode: an RGB batch uploaded
            to ``device`` is kept as uploaded (no copy), an RGB batch already there is copied
            once (decoders recycle their buffers), an NV12/P010 batch is converted at full size
            with the colour conversion the model input gets (:func:`~vidpipe.ops.fused.nv12_to_rgb`,
            bit-exact with PyAV's ``rgb24`` for 8-bit frames), on the current CUDA stream.
        scratch: the fused NV12/P010 letterbox's work buffer (a detector's
            :class:`~vidpipe.ops.scratch.ScratchArena`); ``None``: one per call.

    Returns:
        ``ModelInput`` with ``tensor`` ``(B, 3, H, W)`` in [0, 1], per-frame ``scale`` ``(B, 2)``
        (``sx, sy`` of the resized image), ``pad`` ``(B, 2)`` and ``images`` (``None`` unless
        ``keep_frames``).
    """
    import torch

    device = torch.device(device)
    if device.type == "cuda" and device.index is None:  # "cuda" means the current CUDA device
        device = torch.device("cuda", torch.cuda.current_device())
    images = None
    if batch.format == "rgb":
        data = batch.data
        if data.device != device:
            if data.device.type == "cpu" and device.type == "cuda" and not data.is_pinned():
                data = data.pin_memory()
            data = data.to(device, non_blocking=True)
            images = data if keep_frames else None  # fresh memory of this batch alone
        elif keep_frames:
            images = data.clone(memory_format=torch.contiguous_format)  # the decoder reuses its buffers
        tensor, geo = letterbox(data, size, dtype=dtype)
    else:
        from vidpipe.ops.fused import nv12_to_rgb, yuv_letterbox

        if batch.device != device:
            raise ValueError(f"{batch.format} frames on {batch.device} cannot feed a model on {device}")
        tensor, geo = yuv_letterbox(batch, size, dtype=dtype, scratch=scratch)
        if keep_frames:
            images = nv12_to_rgb(batch)
    # Per axis, from the real resized size (Darknet truncates the short side: 640x272 -> 416x176
    # is 0.65 along x but 0.6471 along y), as Darknet's correct_yolo_boxes maps boxes back.
    scale, pad = _geometry_tensors(
        len(batch), (float(geo.sx), float(geo.sy)), (float(geo.pad_x), float(geo.pad_y)), device
    )
    return ModelInput(tensor=tensor, frames=batch.frames, scale=scale, pad=pad, images=images)


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
    """Join model inputs of the same size (e.g. chunks from several sources) into one batch.

    Kept frames (``images``) are not copied: the result holds a tuple of per-frame views (the
    sources' frames may differ in size); ``None`` unless every part kept its frames."""
    import torch

    if len(parts) == 1:
        return parts[0]
    images = None
    if all(p.images is not None for p in parts):
        images = tuple(img for p in parts for img in p.images)  # type: ignore[union-attr]
    return ModelInput(
        tensor=torch.cat([p.tensor for p in parts]),
        frames=tuple(f for p in parts for f in p.frames),
        scale=torch.cat([p.scale for p in parts]),
        pad=torch.cat([p.pad for p in parts]),
        images=images,
    )


class Preprocessor:
    """``FrameBatch -> ModelInput`` for one detector and run config, as the video sources do it:
    the canvas of :func:`~vidpipe.ops.letterbox.canvas_size` (``config.letterbox`` for models of
    dynamic shape, else the model's square), then :func:`preprocess` with ``config.keep_frames``,
    on the current CUDA stream, with the detector's work buffer (``scratch``, where it has one).
    ``detector`` needs ``device``, ``dtype``, ``input_size`` and ``model.info``."""

    def __init__(self, detector: Any, config: "PipelineConfig") -> None:
        info = detector.model.info
        self._device, self._dtype = detector.device, detector.dtype
        self._size, self._stride = tuple(detector.input_size), info.stride
        self._mode = config.letterbox if info.dynamic_shape else "square"
        self._keep = config.keep_frames
        self._scratch = getattr(detector, "scratch", None)

    def input_shape(self, height: int, width: int) -> tuple[int, int, int]:
        """``(3, H, W)`` of the model input of a ``height x width`` frame."""
        from vidpipe.ops.letterbox import canvas_size

        return (3, *canvas_size(height, width, self._size, stride=self._stride, mode=self._mode))  # type: ignore[arg-type]

    def __call__(self, batch: FrameBatch) -> ModelInput:
        _, h, w = self.input_shape(batch.height, batch.width)
        return preprocess(batch, size=(h, w), dtype=self._dtype, device=self._device, keep_frames=self._keep,
                          scratch=self._scratch)
