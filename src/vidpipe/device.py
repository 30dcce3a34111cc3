"""Resolution of the single ``device=`` argument used everywhere in vidpipe."""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

from vidpipe.errors import BackendUnavailableError, ConfigError

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

_DEVICE_RE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")

DEVICE_HELP = "'auto', 'cpu', 'cuda' or 'cuda:N'"


def resolve_device(device: "str | torch.device | None" = "auto") -> "torch.device":
    """Turn ``"auto" | "cpu" | "cuda" | "cuda:N"`` (or a ``torch.device``) into a ``torch.device``.

    ``auto`` picks ``cuda`` (the current CUDA device) when PyTorch sees a GPU, else ``cpu``.
    Asking for CUDA on a machine without it raises :class:`BackendUnavailableError`.
    """
    import torch

    if device is None:
        device = "auto"
    if isinstance(device, torch.device):
        text = str(device)
    elif isinstance(device, str):
        text = device.strip().lower()
    else:
        raise ConfigError(f"invalid device={device!r}; expected {DEVICE_HELP}")
    if not _DEVICE_RE.match(text):
        raise ConfigError(f"invalid device={device!r}; expected {DEVICE_HELP}")
    if text == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", torch.cuda.current_device())
        logger.info("device='auto': no CUDA GPU visible to PyTorch, running on the CPU")
        return torch.device("cpu")
    if text == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise BackendUnavailableError(
            f"device={device!r} was requested but PyTorch sees no CUDA GPU "
            f"(torch {torch.__version__}, built with CUDA {torch.version.cuda}); "
            "use device='cpu', or run `vidpipe doctor` to see why"
        )
    dev = torch.device(text)
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    count = torch.cuda.device_count()
    if index >= count:
        raise ConfigError(f"invalid device={device!r}: this machine has {count} CUDA device(s)")
    return torch.device("cuda", index)
