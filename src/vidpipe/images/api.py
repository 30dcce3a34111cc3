"""``vidpipe.images.load``: image files to batches on the GPU (or CPU)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from vidpipe._validate import check_range
from vidpipe.images.config import DEFAULT_MAX_PIXELS, image_config, resolve_decoder
from vidpipe.images.listing import ImageInputs, list_images
from vidpipe.images.loader import ImageLoader

if TYPE_CHECKING:
    import torch

__all__ = ["load"]

logger = logging.getLogger(__name__)


def load(
    inputs: ImageInputs,
    *,
    device: str | torch.device = "auto",
    batch_size: int = 64,
    size: tuple[int, int] | int | None = (416, 416),
    mode: str = "letterbox",
    dtype: str | torch.dtype = "auto",
    decoder: str = "auto",
    num_threads: int | None = None,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    recursive: bool = True,
    prefetch: int = 2,
    stream_id: int = 0,
    keep_images: bool = False,
) -> ImageLoader:
    """Load image files as batches of tensors on ``device``, in listing order.

    Args:
        inputs: a folder (recursive, sorted), a glob pattern, a file, or a list of these; see
            :func:`~vidpipe.images.list_images`. JPEG, PNG, WebP, BMP and TIFF, told apart by
            their content, not their extension.
        device: ``"auto"`` | ``"cpu"`` | ``"cuda"`` | ``"cuda:N"``.
        batch_size: files per batch (a batch is shorter when some of its files are skipped).
        size: ``(height, width)`` of the output (an int for a square); ignored for ``mode="none"``.
        mode: ``"letterbox"`` (aspect ratio kept, centred on grey 0.5: for detection, see
            :meth:`ImageBatch.to_model_input`), ``"resize"`` (stretched to ``size``) or ``"none"``
            (native size: ``batch.data`` is then a tuple of ``(3, h_i, w_i)`` tensors).
        dtype: ``"fp16"`` | ``"fp32"`` | ``"bf16"`` (values in [0, 1]) | ``"uint8"`` (0..255) |
            ``"auto"`` (fp16 on CUDA, fp32 on the CPU), or the matching ``torch.dtype``.
        decoder: JPEG decoder: ``"auto"`` (on CUDA the hardware JPEG engines directly, else
            torchvision's nvJPEG, else CPU threads with a warning; CPU threads on the CPU),
            ``"nvjpeg-hw"`` (the A100/H100/H200 JPEG engines driven directly, see
            :mod:`vidpipe.images.nvjpeg_hw`), ``"nvjpeg"`` (torchvision's nvJPEG), ``"nvimgcodec"``
            (NVIDIA nvImageCodec, when installed) or ``"cpu"``. Progressive, CMYK and 12-bit JPEGs and all other formats are always
            decoded on CPU threads.
        num_threads: reader/CPU-decoder threads (default: CPU count, at most 16; at most 4 when
            a GPU decodes the JPEGs).
        max_pixels: images with more pixels (from their header) are skipped as ``too_large``.
        recursive: search sub-folders of a folder input.
        prefetch: batches assembled ahead on a background thread (0: assemble in the caller's thread).
        stream_id: copied into each batch's ``FrameMeta.stream_id``.
        keep_images: each batch also carries its decoded images at their source size
            (``batch.images``: ``(3, h_i, w_i)`` uint8, EXIF-oriented, on ``device``; for crops of
            the detections). Images decoded on the CPU are then decoded at full size (no
            reduced-scale JPEG decoding) and resized with the others.

    Returns:
        An :class:`ImageLoader`: iterate it for :class:`ImageBatch` objects; bad files (missing,
        empty, not an image, corrupt, truncated, too large) are skipped and listed in
        ``loader.skipped`` and in the ``skipped`` of the batch that follows them.

    Raises:
        SourceError: a path that does not exist, a folder without images, a pattern matching nothing.
        ConfigError: an invalid option (the message lists the allowed values).
        BackendUnavailableError: ``decoder="nvjpeg-hw"``/``"nvjpeg"``/``"nvimgcodec"`` cannot run here.

    Example::

        loader = vidpipe.images.load("photos/", device="cuda", size=(640, 640))
        for batch in loader:
            batch.data            # (B, 3, 640, 640) float16 on cuda, letterboxed
            batch.paths, batch.sizes, batch.scale, batch.pad
        loader.skipped            # [SkippedImage(path, index, reason, detail), ...]
    """
    check_range("batch_size", batch_size, low=1, integer=True)
    check_range("prefetch", prefetch, low=0, high=64, integer=True)
    cfg = image_config(
        device=device,
        size=size,
        mode=mode,
        dtype=dtype,
        decoder=decoder,
        num_threads=num_threads,
        max_pixels=max_pixels,
    )
    paths = list_images(inputs, recursive=recursive)
    gpu, desc = resolve_decoder(cfg)
    logger.info("images: %d files, decoder %s, output %s %s", len(paths), desc, cfg.mode, cfg.size or "native")
    return ImageLoader(
        paths,
        cfg,
        batch_size=int(batch_size),
        gpu_decoder=gpu,
        decoder_desc=desc,
        prefetch=int(prefetch),
        stream_id=stream_id,
        keep_images=bool(keep_images),
    )
