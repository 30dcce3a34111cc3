"""``ImageDataset``: a map-style PyTorch dataset of image files with a device-resident cache.

Decode 200,000 JPEGs once (batched nvJPEG), keep the resized uint8 images in GPU memory under a
byte budget, and serve later epochs from there: a cached batch is one gather and one dtype
conversion on the GPU, no file access, no decoding.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import torch
from torch.utils.data import Dataset

from vidpipe._validate import check_range
from vidpipe.errors import ConfigError, DecodeError, SourceError
from vidpipe.images.batch import SkippedImage
from vidpipe.images.cache import ImageCache, default_cache_bytes
from vidpipe.images.config import DEFAULT_MAX_PIXELS, image_config, resolve_decoder
from vidpipe.images.listing import ImageInputs, list_images
from vidpipe.images.loader import ImageLoader, LoaderStats

__all__ = ["ImageDataset"]

logger = logging.getLogger(__name__)


class ImageDataset(Dataset):
    """Image files as ``(3, H, W)`` tensors on ``device``, with a device-resident cache.

    ``ds[i]`` is file ``i`` of the listing (deterministic order: see
    :func:`~vidpipe.images.list_images`), resized (``"letterbox"`` or ``"resize"``) to ``size``,
    as ``dtype`` on ``device``. The resized uint8 images are kept on the device, up to
    ``cache_bytes`` (``3*H*W`` bytes each, filled in first-come order, never evicted), so each
    file is decoded once; :meth:`preload` fills the cache eagerly.

    The fast way to iterate is :meth:`batches` (read-ahead threads, one batched nvJPEG call per
    batch, optional seeded shuffle). A ``torch.utils.data.DataLoader`` also works
    (``DataLoader(ds, batch_size=64, shuffle=True)``; it calls :meth:`__getitems__` with whole
    batches); keep ``num_workers=0``: the dataset parallelises internally and CUDA does not
    survive forked workers.

    Bad files: :meth:`batches` and :meth:`preload` skip them and record them in :attr:`skipped`
    (later epochs leave them out); ``ds[i]`` of a bad file raises :class:`DecodeError` (or
    :class:`SourceError` when it cannot be read). Not thread-safe for concurrent passes.

    Args:
        inputs: folder, glob, file or list (see :func:`~vidpipe.images.load`).
        size: ``(height, width)`` of every image (an int for a square).
        mode: ``"letterbox"`` (default) or ``"resize"``.
        device, dtype, decoder, num_threads, max_pixels, recursive: as for :func:`~vidpipe.images.load`.
        cache_bytes: device memory for the cache; ``"auto"``: half the free memory of a CUDA
            device (a quarter of the available RAM on the CPU); ``0`` disables it.
    """

    def __init__(
        self,
        inputs: ImageInputs,
        *,
        size: tuple[int, int] | int = (416, 416),
        mode: str = "letterbox",
        device: str | torch.device = "auto",
        dtype: str | torch.dtype = "auto",
        cache_bytes: int | str = "auto",
        decoder: str = "auto",
        num_threads: int | None = None,
        max_pixels: int = DEFAULT_MAX_PIXELS,
        recursive: bool = True,
    ) -> None:
        if mode == "none":
            raise ConfigError("ImageDataset needs one output size: mode='letterbox' or 'resize', not 'none'")
        self.cfg = image_config(
            device=device, size=size, mode=mode, dtype=dtype, decoder=decoder, num_threads=num_threads,
            max_pixels=max_pixels,
        )  # fmt: skip
        self.paths: list[str] = list_images(inputs, recursive=recursive)
        if cache_bytes == "auto":
            budget = default_cache_bytes(self.cfg.device)
        elif isinstance(cache_bytes, int) and not isinstance(cache_bytes, bool):
            budget = check_range("cache_bytes", cache_bytes, low=0, integer=True)
        else:
            raise ConfigError(f"invalid cache_bytes={cache_bytes!r}; expected a number of bytes or 'auto'")
        self.cache = ImageCache(len(self.paths), self.cfg.size, self.cfg.device, budget)
        self._gpu, self.decoder = resolve_decoder(self.cfg)
        self._skipped: dict[int, SkippedImage] = {}
        self.stats = LoaderStats()  # totals over all passes
        logger.info(
            "ImageDataset: %d files, cache for %d of them (%.2f GiB on %s), decoder %s",
            len(self.paths), self.cache.capacity, self.cache.capacity * self.cache.item_bytes / 2**30,
            self.cfg.device, self.decoder,
        )  # fmt: skip

    # -- map-style Dataset ----------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> torch.Tensor:
        """``(3, H, W)`` tensor of ``dtype`` on ``device`` for file ``index``."""
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: Sequence[int]) -> list[torch.Tensor]:
        """Rows for a batch of indices, decoded together (used by ``DataLoader`` batching)."""
        n = len(self.paths)
        idx = [int(i) + n if int(i) < 0 else int(i) for i in indices]
        for i in idx:
            if not 0 <= i < n:
                raise IndexError(f"ImageDataset index {i} out of range for {n} files")
        if not idx:
            return []
        bad = [self._skipped[i] for i in idx if i in self._skipped]
        if not bad:
            loader = self._loader(idx, batch_size=max(1, len(idx)), prefetch=0)
            batches = list(loader)
            bad = loader.skipped
        if bad:
            s = bad[0]
            cls = SourceError if s.reason in ("missing", "unreadable") else DecodeError
            raise cls(f"{s.path}: {s.reason}: {s.detail} (ImageDataset.batches() skips such files)")
        (batch,) = batches
        rows = {i: k for k, i in enumerate(batch.indices)}
        return [batch.data[rows[i]] for i in idx]

    # -- fast paths ----------------------------------------------------------------------

    def batches(
        self,
        batch_size: int = 64,
        *,
        shuffle: bool = False,
        seed: int = 0,
        epoch: int = 0,
        drop_last: bool = False,
        prefetch: int = 2,
    ) -> ImageLoader:
        """An iterable of :class:`ImageBatch` over the dataset (files known to be bad left out).

        The order is the listing order, or with ``shuffle=True`` a permutation that depends only
        on ``(seed, epoch)`` (NumPy's PCG64): pass the epoch number to get a new order per epoch
        that is the same on every run. ``drop_last`` drops a final batch shorter than
        ``batch_size``.
        """
        check_range("batch_size", batch_size, low=1, integer=True)
        order = self.order(shuffle=shuffle, seed=seed, epoch=epoch)
        if drop_last:
            order = order[: len(order) // batch_size * batch_size]
        return self._loader(order, batch_size=int(batch_size), prefetch=prefetch)

    def order(self, *, shuffle: bool = False, seed: int = 0, epoch: int = 0) -> list[int]:
        """The indices one pass of :meth:`batches` visits (known-bad files excluded)."""
        import numpy as np

        n = len(self.paths)
        if shuffle:
            rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), int(epoch)])))
            idx = rng.permutation(n).tolist()
        else:
            idx = list(range(n))
        return [i for i in idx if i not in self._skipped]

    def preload(self, *, batch_size: int = 64, progress: Callable[[int, int], None] | None = None) -> ImageDataset:
        """Decode every file once, in order, filling the cache (up to its budget) and finding
        the bad files. ``progress(done, total)`` is called after each batch. Returns ``self``."""
        loader = self._loader(self.order(), batch_size=batch_size, prefetch=2)
        done = 0
        for batch in loader:
            done += len(batch) + len(batch.skipped)
            if progress is not None:
                progress(done, loader.total)
        if progress is not None and done != loader.total:
            progress(loader.total, loader.total)
        logger.info(
            "ImageDataset.preload: %d images, %d cached (%.2f GiB), %d skipped",
            loader.stats.images, len(self.cache), len(self.cache) * self.cache.item_bytes / 2**30, len(self._skipped),
        )  # fmt: skip
        return self

    @property
    def skipped(self) -> list[SkippedImage]:
        """Files found bad so far, in listing order."""
        return [self._skipped[i] for i in sorted(self._skipped)]

    def __repr__(self) -> str:
        return (
            f"ImageDataset(files={len(self.paths)}, size={self.cfg.size}, mode={self.cfg.mode!r}, "
            f"device={self.cfg.device}, cached={len(self.cache)}/{self.cache.capacity}, skipped={len(self._skipped)})"
        )

    def _loader(self, order: Sequence[int], *, batch_size: int, prefetch: int) -> ImageLoader:
        def on_skip(s: SkippedImage) -> None:
            self._skipped[s.index] = s

        return ImageLoader(
            self.paths, self.cfg, batch_size=batch_size, gpu_decoder=self._gpu, decoder_desc=self.decoder,
            order=order, cache=self.cache if self.cache.capacity > 0 else None, prefetch=prefetch,
            on_skip=on_skip, totals=self.stats,
        )  # fmt: skip
