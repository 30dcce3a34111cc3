"""vidpipe: video files, live streams and image folders to object detections on the GPU.

Quick start::

    import vidpipe
    for frame in vidpipe.detect("video.mp4", device="cuda"):
        frame.index, frame.pts, frame.detections.boxes

    with vidpipe.open_video("video.mp4", device="cuda") as video:
        for batch in video.batches(32):
            batch.data  # (B, 3, H, W) uint8 on the GPU

Heavy dependencies (torch, PyAV, ...) are imported on first use, not by ``import vidpipe``.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from vidpipe.errors import (
    BackendUnavailableError,
    ConfigError,
    DecodeError,
    GpuFallbackError,
    GpuMemoryError,
    ModelError,
    SinkError,
    SourceError,
    UnsupportedError,
    VidpipeError,
)
from vidpipe.types import ColorSpec, Detections, FrameBatch, FrameMeta, FrameResult, ModelInput, Packet

__version__ = "0.1.0"

# Public callables live in submodules that import torch; they load on first attribute access.
_LAZY = {
    "detect": "vidpipe.api",
    "detect_to_table": "vidpipe.tables",
    "open_video": "vidpipe.video",
    "probe": "vidpipe.decode.probe",
    "load_model": "vidpipe.models.zoo",
    "resolve_device": "vidpipe.device",
    "DetectionRun": "vidpipe.pipeline",
    "PipelineConfig": "vidpipe.pipeline",
    "serve": "vidpipe.serve",
    "decoder_service": "vidpipe.decode.service",
}

__all__ = [
    "__version__",
    "detect",
    "detect_to_table",
    "open_video",
    "probe",
    "load_model",
    "resolve_device",
    "DetectionRun",
    "PipelineConfig",
    "serve",
    "decoder_service",
    "ColorSpec",
    "Detections",
    "FrameBatch",
    "FrameMeta",
    "FrameResult",
    "ModelInput",
    "Packet",
    "VidpipeError",
    "SourceError",
    "DecodeError",
    "UnsupportedError",
    "ModelError",
    "ConfigError",
    "BackendUnavailableError",
    "SinkError",
    "GpuFallbackError",
    "GpuMemoryError",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'vidpipe' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:
    from vidpipe.api import detect
    from vidpipe.tables import detect_to_table
    from vidpipe.decode.probe import probe
    from vidpipe.device import resolve_device
    from vidpipe.models.zoo import load_model
    from vidpipe.pipeline import DetectionRun, PipelineConfig
    from vidpipe.serve import serve
    from vidpipe.decode.service import decoder_service
    from vidpipe.video import open_video
