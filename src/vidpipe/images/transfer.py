"""Host-to-device copies that do not stall the producer thread."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["to_device"]


def to_device(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``t`` (CPU) on ``device``. For CUDA the copy goes through pinned memory and is queued
    (``non_blocking``) on the current stream: a plain ``.to("cuda")`` from pageable memory waits
    until the stream has drained, which would serialise the loader with the caller's GPU work.
    PyTorch keeps the pinned buffer alive until the copy has run."""
    if device.type != "cuda" or t.device.type == "cuda":
        return t.to(device)
    return t.pin_memory().to(device, non_blocking=True)
