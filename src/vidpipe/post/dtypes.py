"""Casts that cost nothing when the tensor has the dtype already.

``t.float()`` on a float32 tensor returns ``t``, but it is still a PyTorch call, and PyTorch
releases the GIL in every call: on the run's thread, beside a dozen decoder threads, each release
is a hand-over it waits to get back. Checking the dtype in Python skips the call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["as_float32", "as_int64"]


def as_float32(t: "torch.Tensor") -> "torch.Tensor":
    """``t`` as float32: ``t`` itself when it is already."""
    import torch

    return t if t.dtype == torch.float32 else t.float()


def as_int64(t: "torch.Tensor") -> "torch.Tensor":
    """``t`` as int64: ``t`` itself when it is already."""
    import torch

    return t if t.dtype == torch.int64 else t.long()
