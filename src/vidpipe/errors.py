"""Exceptions raised by vidpipe.

Every exception subclasses :class:`VidpipeError` *and* the builtin it most resembles, so callers
can catch either ``vidpipe.SourceError`` or plain ``OSError``. Messages name the input that failed,
what went wrong, and what to try.
"""

from __future__ import annotations

__all__ = [
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


class VidpipeError(Exception):
    """Base class of every error vidpipe raises on purpose.

    Its message never carries credentials: text arguments are passed through
    :func:`vidpipe.sources.redact.redact_text` (``rtsp://user:pw@cam/`` -> ``rtsp://***@cam/``).
    """

    def __init__(self, *args: object) -> None:
        if any(isinstance(a, str) for a in args):
            from vidpipe.sources.redact import redact_text

            args = tuple(redact_text(a) if isinstance(a, str) else a for a in args)
        super().__init__(*args)


class SourceError(VidpipeError, OSError):
    """An input cannot be opened or read: missing, empty, not a video, no video stream, ..."""


class DecodeError(VidpipeError, ValueError):
    """A stream opened but its data could not be decoded (corrupt or truncated)."""


class UnsupportedError(VidpipeError, ValueError):
    """The input is valid but this backend cannot handle it (codec, bit depth, size, ...)."""


class ModelError(VidpipeError, ValueError):
    """A model cannot be found, loaded, or gives outputs vidpipe cannot interpret."""


class ConfigError(VidpipeError, ValueError):
    """An option has an invalid value. The message lists the allowed values."""


class BackendUnavailableError(VidpipeError, ImportError):
    """An optional backend (PyNvVideoCodec, DALI, onnxruntime, TensorRT, CUDA) is not usable here."""


class SinkError(VidpipeError, OSError):
    """An output cannot be written."""


class GpuFallbackError(VidpipeError, RuntimeError):
    """``strict_gpu`` was requested but a stage would have run on the CPU."""


class GpuMemoryError(VidpipeError, MemoryError):
    """The GPU memory budget (``max_gpu_memory``) or the GPU itself cannot hold even the smallest
    working set of a run (batch 1, the fewest decode buffers)."""
