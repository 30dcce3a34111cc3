"""Validated options shared by :func:`vidpipe.images.load` and :class:`ImageDataset`."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from vidpipe._validate import check_choice, check_range
from vidpipe.errors import BackendUnavailableError, ConfigError

if TYPE_CHECKING:
    import torch

    from vidpipe.images.decode_gpu import GpuJpegDecoder

__all__ = [
    "DECODERS",
    "DEFAULT_MAX_PIXELS",
    "DTYPES",
    "GPU_ROUTE_THREADS",
    "MODES",
    "ImageConfig",
    "image_config",
    "resolve_decoder",
]

logger = logging.getLogger(__name__)

#: Images over this many pixels (width x height, from the header) are skipped as ``too_large``
#: unless ``max_pixels`` is raised: 100 Mpx is a 12,000 x 8,300 photo, about 300 MB as RGB.
DEFAULT_MAX_PIXELS = 100_000_000
#: Default reader threads when a GPU decoder takes the JPEGs (see :func:`image_config`).
GPU_ROUTE_THREADS = 4

DTYPES = ("auto", "fp16", "fp32", "bf16", "uint8")
DECODERS = ("auto", "nvjpeg-hw", "nvjpeg", "nvimgcodec", "cpu")
MODES = ("letterbox", "resize", "none")

DtypeName = Literal["auto", "fp16", "fp32", "bf16", "uint8"]
DecoderName = Literal["auto", "nvjpeg-hw", "nvjpeg", "nvimgcodec", "cpu"]


@dataclass(frozen=True)
class ImageConfig:
    """Resolved options: a real device and dtype, a thread count, validated size and mode."""

    device: torch.device
    size: tuple[int, int] | None
    mode: str
    dtype: torch.dtype
    decoder: str
    num_threads: int
    max_pixels: int


def image_config(
    *,
    device: str | torch.device = "auto",
    size: tuple[int, int] | int | None = (416, 416),
    mode: str = "letterbox",
    dtype: str | torch.dtype = "auto",
    decoder: str = "auto",
    num_threads: int | None = None,
    max_pixels: int = DEFAULT_MAX_PIXELS,
) -> ImageConfig:
    """Validate and resolve the options (raises :class:`ConfigError` with the allowed values).

    ``dtype="auto"`` is float16 on CUDA and float32 on the CPU (a ``torch.dtype`` is accepted
    too). ``num_threads=None`` uses the CPU count, at most 16 when the CPU decodes the JPEGs and
    at most 4 when a GPU decoder does (the threads then mostly read files; more of them only
    compete with the decoder's and the batch assembly's threads for the GIL. One H200, 16
    cores, 2,000 1080p JPEGs from the page cache, hardware decoder, same run: 4 threads 4,667
    img/s, 8 threads 4,241, 16 threads 3,474).
    """
    import torch

    from vidpipe.device import resolve_device

    dev = resolve_device(device)
    check_choice("mode", mode, MODES)
    if isinstance(dtype, torch.dtype):  # accept torch dtypes too (e.g. a detector's input dtype)
        dtype = {torch.float16: "fp16", torch.float32: "fp32", torch.bfloat16: "bf16", torch.uint8: "uint8"}.get(
            dtype, str(dtype)
        )
    check_choice("dtype", dtype, DTYPES)
    check_choice("decoder", decoder, DECODERS)
    if mode == "none":
        size = None
    else:
        if isinstance(size, int) and not isinstance(size, bool):
            size = (size, size)
        if (
            not isinstance(size, (tuple, list))
            or len(size) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in size)
        ):
            raise ConfigError(f"invalid size={size!r}; expected (height, width) in pixels, or mode='none'")
        size = (int(size[0]), int(size[1]))
    if num_threads is None:
        gpu_decodes = dev.type == "cuda" and decoder != "cpu"
        num_threads = min(GPU_ROUTE_THREADS if gpu_decodes else 16, os.cpu_count() or 4)
    check_range("num_threads", num_threads, low=1, high=256, integer=True)
    check_range("max_pixels", max_pixels, low=1, integer=True)
    if dev.type == "cpu" and decoder in ("nvjpeg-hw", "nvjpeg", "nvimgcodec"):
        raise ConfigError(f"decoder={decoder!r} needs a CUDA device; use decoder='cpu' or 'auto' with device='cpu'")
    names = {"fp16": torch.float16, "fp32": torch.float32, "bf16": torch.bfloat16, "uint8": torch.uint8}
    tdtype = names.get(dtype) or (torch.float16 if dev.type == "cuda" else torch.float32)
    return ImageConfig(dev, size, mode, tdtype, decoder, int(num_threads), int(max_pixels))


def resolve_decoder(cfg: ImageConfig) -> tuple[GpuJpegDecoder | None, str]:
    """The batched GPU JPEG decoder to use (``None``: all decoding on CPU threads) and a
    description of the choice for logs and reports.

    ``decoder="auto"`` on CUDA uses the hardware JPEG engines directly (``"nvjpeg-hw"``: A100,
    H100, H200, ...), else torchvision's nvJPEG (``"nvjpeg"``), else CPU threads (with a
    warning); an explicit GPU decoder that does not work raises :class:`BackendUnavailableError`.
    """
    from vidpipe.images.decode_gpu import GPU_DECODERS, make_gpu_decoder

    if cfg.device.type != "cuda" or cfg.decoder == "cpu":
        where = "" if cfg.device.type == "cpu" else f", uploaded to {cfg.device}"
        return None, f"torchvision/PIL on {cfg.num_threads} CPU threads{where}"
    names = GPU_DECODERS if cfg.decoder == "auto" else (cfg.decoder,)
    reasons = []
    for name in names:
        try:
            dec = make_gpu_decoder(name, cfg.device)
        except BackendUnavailableError as exc:
            if cfg.decoder != "auto":
                raise
            logger.info("images: GPU decoder %s unavailable: %s", name, exc)
            reasons.append(f"{name}: {exc}")
            continue
        return dec, f"JPEG on {cfg.device}, other formats on {cfg.num_threads} CPU threads"
    logger.warning("images: %s; decoding JPEGs on %d CPU threads instead", "; ".join(reasons), cfg.num_threads)
    return None, f"torchvision/PIL on {cfg.num_threads} CPU threads (no GPU JPEG decoder works here)"
