"""A fixed-budget store of resized uint8 images on one device, keyed by listing index."""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING

from vidpipe.images.transfer import to_device

if TYPE_CHECKING:
    import torch

__all__ = ["ImageCache", "default_cache_bytes"]

logger = logging.getLogger(__name__)


def default_cache_bytes(device: torch.device) -> int:
    """Half the free memory of a CUDA device, a quarter of the available RAM for the CPU."""
    import torch

    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return free // 2
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 4
    except (ValueError, OSError, AttributeError):
        return 1 << 30


class ImageCache:
    """Up to ``budget_bytes`` of ``(3, H, W)`` uint8 images on ``device``.

    Filled first come, first served, never evicted: for epochs in random order a fixed cached
    subset is as good as any eviction policy and costs nothing to maintain. The storage is one
    ``(capacity, 3, H, W)`` tensor allocated at the first :meth:`put` (halved until it fits if
    the device is short of memory). Thread-safe.
    """

    def __init__(self, num_items: int, size: tuple[int, int], device: torch.device, budget_bytes: int) -> None:
        self.item_bytes = 3 * size[0] * size[1]
        self.size = size
        self.device = device
        self.capacity = max(0, min(num_items, int(budget_bytes) // self.item_bytes))
        self._storage: torch.Tensor | None = None
        self._slot: dict[int, int] = {}
        self._meta: dict[int, tuple[tuple[int, int], tuple[float, float], tuple[float, float]]] = {}
        self._lock = threading.Lock()
        self._written = None  # CUDA event after the last write: readers on other streams wait for it

    def __len__(self) -> int:
        return len(self._slot)

    @property
    def nbytes(self) -> int:
        """Bytes allocated on the device (0 until the first put)."""
        return 0 if self._storage is None else self._storage.numel()

    def __contains__(self, index: int) -> bool:
        return index in self._slot

    def meta(self, index: int) -> tuple[tuple[int, int], tuple[float, float], tuple[float, float]]:
        """``(source size (h, w), scale (sx, sy), pad (left, top))`` of a cached image."""
        return self._meta[index]

    def get(self, indices: list[int]) -> torch.Tensor:
        """``(len(indices), 3, H, W)`` uint8 on the device: one gather, no host transfer."""
        import torch

        with self._lock:
            slots = [self._slot[i] for i in indices]
            storage = self._storage
        if storage is None:
            raise KeyError("ImageCache.get: the cache is empty")
        if self._written is not None:
            torch.cuda.current_stream(self.device).wait_event(self._written)
        return storage.index_select(0, to_device(torch.tensor(slots, dtype=torch.int64), self.device))

    def put(self, indices: list[int], images: torch.Tensor, metas: list) -> int:
        """Store the rows of ``images`` ``(N, 3, H, W)`` uint8 under ``indices`` while room is
        left; ``metas`` as for :meth:`meta`. Returns how many were stored."""
        import torch

        with self._lock:
            if self._storage is None and self.capacity > 0:
                self._allocate()
            rows, slots = [], []
            for row, (i, m) in enumerate(zip(indices, metas)):
                if i in self._slot or len(self._slot) >= self.capacity:
                    continue
                slot = len(self._slot)
                self._slot[i] = slot
                self._meta[i] = m
                rows.append(row)
                slots.append(slot)
            if rows:
                src = images if len(rows) == images.shape[0] else images[to_device(torch.tensor(rows), images.device)]
                self._storage.index_copy_(0, to_device(torch.tensor(slots, dtype=torch.int64), self.device), src)
                if self.device.type == "cuda":
                    self._written = torch.cuda.Event()
                    self._written.record()
            return len(rows)

    def _allocate(self) -> None:
        import torch

        cap = self.capacity
        while cap > 0:
            try:
                self._storage = torch.empty((cap, 3, *self.size), dtype=torch.uint8, device=self.device)
                break
            except (RuntimeError, MemoryError):  # torch.cuda.OutOfMemoryError is a RuntimeError
                cap //= 2
        if cap < self.capacity:
            logger.warning(
                "image cache: %d images (%.1f GiB) did not fit on %s; caching %d",
                self.capacity, self.capacity * self.item_bytes / 2**30, self.device, cap,
            )  # fmt: skip
            self.capacity = cap
