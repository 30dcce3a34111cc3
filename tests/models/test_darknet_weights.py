"""Darknet .weights: header variants, exact size check, batch-norm folding against an unfolded reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from darknet_helpers import YOLOV3_LIKE, YOLOV4_TINY_LIKE, write_weights

from vidpipe.errors import ModelError
from vidpipe.models.darknet import (
    DarknetNet,
    count_weights,
    fold_batchnorm,
    load_darknet_weights,
    parse_cfg,
    read_bundle,
    read_weights,
)
from vidpipe.models.darknet.layers import Conv
from vidpipe.models.zoo import bundled_path


def _act(name: str, x: torch.Tensor) -> torch.Tensor:
    return {
        "leaky": lambda t: torch.where(t > 0, t, 0.1 * t),
        "linear": lambda t: t,
        "relu": torch.relu,
        "mish": lambda t: t * torch.tanh(F.softplus(t)),
        "swish": lambda t: t * torch.sigmoid(t),
        "logistic": torch.sigmoid,
    }[name](x)


def _unfolded(sec, raw: dict[str, np.ndarray], x: torch.Tensor) -> torch.Tensor:
    """A Darknet convolutional layer computed the way Darknet does, from the raw file values:
    conv (no bias), then ``(y - mean) / (sqrt(var) + .000001f)`` (src/blas.c normalize_cpu),
    ``* scales``, ``+ biases``, activation."""
    w = torch.from_numpy(raw["weight"]).double()
    y = F.conv2d(x.double(), w, None, sec.stride, sec.padding, sec.dilation, sec.groups)
    bias = torch.from_numpy(raw["bias"]).double().view(1, -1, 1, 1)
    if sec.batch_normalize:
        g, m, v = (torch.from_numpy(raw[k]).double().view(1, -1, 1, 1) for k in ("gamma", "mean", "var"))
        y = (y - m) / (v.sqrt() + 1e-6) * g
    return _act(sec.activation, y + bias)


@pytest.mark.parametrize("text", [YOLOV3_LIKE, YOLOV4_TINY_LIKE])
def test_weights_round_trip_against_unfolded_reference(tmp_path, text):
    cfg = parse_cfg(text)
    net = DarknetNet(cfg)
    raw = write_weights(tmp_path / "m.weights", net, seed=3)
    header = load_darknet_weights(net, tmp_path / "m.weights")
    assert (header.major, header.minor, header.seen, header.size) == (0, 2, 123456, 20)
    convs = [(s, m) for s, m in zip(cfg.layers, net.layers) if isinstance(m, Conv)]
    assert len(convs) == len(raw)
    torch.manual_seed(0)
    for (sec, module), params in zip(convs, raw):
        x = torch.randn(2, module.conv.in_channels, 9, 10)
        got = module(x.clone())
        want = _unfolded(sec, params, x)
        assert torch.allclose(got.double(), want, rtol=1e-4, atol=1e-4), f"layer {sec.index} ({sec.activation})"


def test_old_header_with_int32_seen(tmp_path):
    net = DarknetNet(parse_cfg(YOLOV3_LIKE))
    write_weights(tmp_path / "old.weights", net, major=0, minor=1)
    header = load_darknet_weights(net, tmp_path / "old.weights")
    assert (header.minor, header.seen, header.size) == (1, 123456, 16)
    _, values = read_weights(tmp_path / "old.weights")
    assert values.size == count_weights(net)


@pytest.mark.parametrize("extra", [5, -7])
def test_size_mismatch_is_an_error(tmp_path, extra):
    net = DarknetNet(parse_cfg(YOLOV3_LIKE))
    path = tmp_path / "m.weights"
    write_weights(path, net, extra=max(extra, 0))
    if extra < 0:
        path.write_bytes(path.read_bytes()[: 4 * extra])
    need = count_weights(net)
    with pytest.raises(ModelError, match=f"weights file has {need + extra} floats but cfg <cfg> needs {need}"):
        load_darknet_weights(net, path)


def test_unreadable_weights(tmp_path):
    net = DarknetNet(parse_cfg(YOLOV3_LIKE))
    with pytest.raises(ModelError, match="cannot read Darknet weights"):
        load_darknet_weights(net, tmp_path / "nope.weights")
    (tmp_path / "short.weights").write_bytes(b"\0" * 10)
    with pytest.raises(ModelError, match="too short"):
        load_darknet_weights(net, tmp_path / "short.weights")
    (tmp_path / "odd.weights").write_bytes(b"\0" * 23)
    with pytest.raises(ModelError, match="not a whole number of float32"):
        load_darknet_weights(net, tmp_path / "odd.weights")


def test_fold_batchnorm_equivalence():
    g = torch.Generator().manual_seed(1)
    w = torch.randn(6, 4, 3, 3, generator=g)
    beta, gamma, mean = (torch.randn(6, generator=g) for _ in range(3))
    var = torch.rand(6, generator=g) + 0.01
    x = torch.randn(2, 4, 8, 8, generator=g)
    wf, bf = fold_batchnorm(w, beta, gamma, mean, var)
    assert wf.dtype == torch.float32 and bf.shape == (6,)
    folded = F.conv2d(x, wf, bf, padding=1)
    y = F.conv2d(x, w, padding=1)

    def v(t):
        return t.view(1, -1, 1, 1)

    reference = v(gamma) * (y - v(mean)) / (v(var).sqrt() + 1e-6) + v(beta)
    assert torch.allclose(folded, reference, rtol=1e-4, atol=1e-4)


def test_real_yolov3_tiny_cfg_needs_the_released_file_size():
    """The released yolov3-tiny.weights is 35,434,956 bytes: a 20-byte header + 8,858,734 floats."""
    cfg = read_bundle(bundled_path("yolov3-tiny")).cfg
    net = DarknetNet(cfg)
    assert count_weights(net) == (35_434_956 - 20) // 4
    assert net.stride == 32
    assert net.shapes[11] == (512, 13, 13)  # the size-2 stride-1 maxpool keeps 13x13
    assert net.shapes[15] == (255, 13, 13) and net.shapes[22] == (255, 26, 26)
