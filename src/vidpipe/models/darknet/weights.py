"""Read Darknet ``.weights`` files into a :class:`DarknetNet`, folding batch-norm into the convs.

File layout (Darknet ``src/parser.c``, ``load_weights_upto``): an ``int32`` header ``major,
minor, revision``, then ``seen`` (images trained on) as ``int64`` when ``major * 10 + minor >= 2``
(and both < 1000) else ``int32``; then little-endian ``float32`` values, for each
``[convolutional]`` in cfg order: ``biases[filters]``, and with ``batch_normalize=1``
``scales[filters]``, ``rolling_mean[filters]``, ``rolling_variance[filters]``; then the weights
``[filters, in_channels / groups, size, size]`` (PyTorch's layout). Other layer types have no
weights.

Darknet's CPU build normalizes at inference as ``(x - mean) / (sqrt(var) + .000001f)``
(``normalize_cpu`` in ``src/blas.c``, called by ``forward_batchnorm_layer``): the epsilon is added
to the standard deviation, not to the variance, and is 1e-6. :func:`fold_batchnorm` uses exactly
that. (Its CUDA build uses ``sqrt(var + .00001f)``, in ``normalize_kernel`` and cuDNN; for
yolov3-tiny, whose smallest rolling variance is 0.013, the two differ by < 4e-4 relative.)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from vidpipe.errors import ModelError
from vidpipe.models.darknet.layers import Conv
from vidpipe.models.darknet.net import DarknetNet

__all__ = ["DARKNET_BN_EPS", "WeightsHeader", "count_weights", "fold_batchnorm", "load_darknet_weights", "read_weights"]

logger = logging.getLogger(__name__)

DARKNET_BN_EPS = 1e-6  # added to sqrt(variance), see the module docstring


@dataclass(frozen=True)
class WeightsHeader:
    """The header of a ``.weights`` file; ``size`` is its length in bytes (12 + 4 or 8)."""

    major: int
    minor: int
    revision: int
    seen: int
    size: int


def _read_header(blob: bytes, source: str) -> WeightsHeader:
    if len(blob) < 16:
        raise ModelError(f"{source}: {len(blob)} bytes is too short for a Darknet weights file")
    major, minor, revision = (int(v) for v in np.frombuffer(blob, dtype="<i4", count=3))
    wide = (major * 10 + minor) >= 2 and major < 1000 and minor < 1000
    if wide:
        if len(blob) < 20:
            raise ModelError(f"{source}: {len(blob)} bytes is too short for a Darknet weights file")
        seen = int(np.frombuffer(blob, dtype="<u8", count=1, offset=12)[0])
    else:
        seen = int(np.frombuffer(blob, dtype="<i4", count=1, offset=12)[0])
    return WeightsHeader(major, minor, revision, seen, 20 if wide else 16)


def read_weights(path: str | Path) -> tuple[WeightsHeader, np.ndarray]:
    """The header and all ``float32`` values of a ``.weights`` file (host memory)."""
    path = Path(path)
    try:
        blob = path.read_bytes()
    except OSError as exc:
        raise ModelError(f"cannot read Darknet weights {str(path)!r}: {exc.strerror or exc}") from exc
    header = _read_header(blob, str(path))
    body = len(blob) - header.size
    if body % 4:
        raise ModelError(f"{path}: {body} bytes after the header is not a whole number of float32 values")
    return header, np.frombuffer(blob, dtype="<f4", offset=header.size)


def count_weights(net: DarknetNet) -> int:
    """How many float32 values a ``.weights`` file for ``net`` holds after its header."""
    total = 0
    for m in net.layers:
        if isinstance(m, Conv):
            filters = m.conv.out_channels
            total += filters * (4 if m.batch_normalize else 1) + m.conv.weight.numel()
    return total


def fold_batchnorm(
    weight: torch.Tensor,
    beta: torch.Tensor,
    gamma: torch.Tensor,
    mean: torch.Tensor,
    var: torch.Tensor,
    *,
    eps: float = DARKNET_BN_EPS,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Fold Darknet batch-norm into the convolution before it (computed in float64).

    ``bn(conv(x)) = gamma * (conv(x) - mean) / (sqrt(var) + eps) + beta`` equals a convolution
    with ``weight * k`` and bias ``beta - mean * k``, ``k = gamma / (sqrt(var) + eps)``.

    Args:
        weight: ``(F, C / groups, k, k)``; beta, gamma, mean, var: ``(F,)`` (Darknet's biases,
            scales, rolling mean and rolling variance).

    Returns:
        The folded ``(weight, bias)`` as float32 on the input's device.
    """
    k = gamma.double() / (var.double().clamp_min(0).sqrt() + eps)
    w = weight.double() * k.view(-1, 1, 1, 1)
    b = beta.double() - mean.double() * k
    return w.float(), b.float()


def load_darknet_weights(net: DarknetNet, path: str | Path) -> WeightsHeader:
    """Load a ``.weights`` file into ``net`` in place (folding batch-norm), return its header.

    Raises ModelError unless the file holds exactly the values ``net``'s cfg needs.
    """
    header, values = read_weights(path)
    need = count_weights(net)
    if values.size != need:
        raise ModelError(
            f"{path}: weights file has {values.size} floats but cfg {net.cfg.source} needs {need}; "
            "are they from the same model?"
        )
    data = torch.from_numpy(values.copy())
    pos = 0

    def take(n: int) -> torch.Tensor:
        nonlocal pos
        out = data[pos : pos + n]
        pos += n
        return out

    for m in net.layers:
        if not isinstance(m, Conv):
            continue
        conv = m.conv
        filters = conv.out_channels
        bias = take(filters)
        if m.batch_normalize:
            gamma, mean, var = take(filters), take(filters), take(filters)
            weight = take(conv.weight.numel()).view_as(conv.weight)
            weight, bias = fold_batchnorm(weight, bias, gamma, mean, var)
        else:
            weight = take(conv.weight.numel()).view_as(conv.weight)
        with torch.no_grad():
            conv.weight.copy_(weight)
            conv.bias.copy_(bias)
    logger.debug("loaded %s: Darknet %d.%d.%d, seen %d", path, header.major, header.minor, header.revision, header.seen)
    return header
