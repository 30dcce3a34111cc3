"""Running a network on batches it cannot take in one call.

- :func:`run_fixed_batch`: a model exported with a fixed batch ``b`` gets exactly ``b`` rows per
  call; smaller batches are padded (grey rows, outputs dropped) and larger ones split.
- :func:`run_batched`: either of those as a model's ``ModelInfo`` asks (a dynamic batch with a
  ``max_batch``, e.g. a torch.export ``Dim`` bound or a TensorRT profile, is split above it).
- :class:`OomBackoff`: on an out-of-memory error, halve the batch, say so once, and keep the
  smaller size for the rest of the run.

Raw outputs are split and joined along dim 0 of every tensor; a list of per-image dicts
(torchvision) is sliced and concatenated as a list.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from vidpipe.errors import ModelError
from vidpipe.models.backends.common import is_oom

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)


def _is_per_image_list(raw: Any) -> bool:
    return isinstance(raw, list) and bool(raw) and all(isinstance(r, Mapping) for r in raw)


def slice_raw(raw: Any, n: int) -> Any:
    """The first ``n`` batch rows of a raw output."""
    import torch

    if isinstance(raw, torch.Tensor):
        return raw[:n] if raw.ndim else raw
    if _is_per_image_list(raw):
        return raw[:n]
    if isinstance(raw, Mapping):
        return {k: slice_raw(v, n) for k, v in raw.items()}
    if isinstance(raw, (list, tuple)):
        return type(raw)(slice_raw(v, n) for v in raw)
    return raw


def cat_raw(parts: list[Any]) -> Any:
    """Join raw outputs of consecutive sub-batches along the batch dimension."""
    import torch

    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    if isinstance(first, torch.Tensor):
        return torch.cat(parts, 0) if first.ndim else first
    if _is_per_image_list(first):
        return [r for p in parts for r in p]
    if isinstance(first, Mapping):
        return {k: cat_raw([p[k] for p in parts]) for k in first}
    if isinstance(first, (list, tuple)):
        return type(first)(cat_raw([p[i] for p in parts]) for i in range(len(first)))
    return first


def run_chunked(fn: Callable[["torch.Tensor"], Any], x: "torch.Tensor", chunk: int) -> Any:
    """``fn`` over ``x`` in slices of at most ``chunk`` rows, outputs joined."""
    b = x.shape[0]
    if b <= chunk:
        return fn(x)
    return cat_raw([fn(x[i : i + chunk]) for i in range(0, b, chunk)])


def run_fixed_batch(fn: Callable[["torch.Tensor"], Any], x: "torch.Tensor", batch: int) -> Any:
    """Call ``fn`` only with exactly ``batch`` rows: pad the last slice, drop the padded outputs."""
    import torch

    b = x.shape[0]
    if b == batch:
        return fn(x)
    parts = []
    for i in range(0, b, batch):
        piece = x[i : i + batch]
        n = piece.shape[0]
        if n < batch:
            pad = torch.full((batch - n, *piece.shape[1:]), 0.5, dtype=piece.dtype, device=piece.device)
            parts.append(slice_raw(fn(torch.cat([piece, pad], 0)), n))
        else:
            parts.append(fn(piece))
    return cat_raw(parts)


def run_batched(fn: Callable[["torch.Tensor"], Any], x: "torch.Tensor", info: Any) -> Any:
    """``fn(x)`` within ``info``'s batch limits (a ``ModelInfo``): fixed batch padded/split, a dynamic
    batch above ``info.max_batch`` split."""
    if info.max_batch:
        if not info.dynamic_batch:
            return run_fixed_batch(fn, x, info.max_batch)
        return run_chunked(fn, x, info.max_batch)
    return fn(x)


class OomBackoff:
    """Call a model, halving the batch on out-of-memory errors (sticky for the rest of the run).

    ``limit`` is the largest batch that is currently tried in one call (``None``: no limit yet);
    ``backoffs`` counts how often it was lowered. A batch of ``min_batch`` rows that still runs out
    of memory raises :class:`ModelError`.
    """

    def __init__(self, model: Callable[["torch.Tensor"], Any], *, name: str = "model", min_batch: int = 1) -> None:
        self.model = model
        self.name = name
        self.min_batch = min_batch
        self.limit: int | None = None
        self.backoffs = 0

    def __call__(self, x: "torch.Tensor") -> Any:
        import torch

        while True:
            limit = min(self.limit or x.shape[0], x.shape[0])
            try:
                return run_chunked(self.model, x, limit)
            except Exception as exc:  # noqa: BLE001 - only OOM is handled, the rest re-raised
                if not is_oom(exc):
                    raise
                if limit <= self.min_batch:
                    raise ModelError(
                        f"{self.name} runs out of memory even at batch {limit} on {x.device}; "
                        "use a smaller input_size, dtype='float16', or another device"
                    ) from exc
                new = max(self.min_batch, limit // 2)
                logger.warning(
                    "%s ran out of memory at batch %d on %s; continuing with batches of %d",
                    self.name, limit, x.device, new,
                )
                self.limit = new
                self.backoffs += 1
                del exc
                if x.device.type == "cuda":
                    torch.cuda.empty_cache()
