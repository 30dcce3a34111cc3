"""DarknetNet: output layout, each layer type against a direct reading of Darknet's C code."""

from __future__ import annotations

import math

import pytest
import torch
from darknet_helpers import YOLOV3_LIKE, YOLOV4_TINY_LIKE

from vidpipe.errors import ModelError
from vidpipe.models.darknet import DarknetNet, parse_cfg
from vidpipe.models.darknet.cfg import MaxpoolSection, RouteSection, YoloSection
from vidpipe.models.darknet.layers import MaxPool, Route, YoloDecode


def _net(text: str, seed: int = 0) -> DarknetNet:
    torch.manual_seed(seed)
    net = DarknetNet(parse_cfg(text))
    with torch.no_grad():
        for p in net.parameters():
            p.normal_(0.0, 0.1)
    return net


@pytest.mark.parametrize(
    ("text", "stride", "classes", "anchors_per_cell"),
    [(YOLOV3_LIKE, 4, 2, [(16, 16), (32, 32)]), (YOLOV4_TINY_LIKE, 8, 3, [(8, 8)])],
)
@pytest.mark.parametrize("size", [(64, 64), (32, 96)])
def test_output_layout(text, stride, classes, anchors_per_cell, size):
    net = _net(text)
    assert net.stride == stride and net.num_classes == classes
    h, w = size
    scale = (h / 64, w / 64)
    n = sum(3 * round(gh * scale[0]) * round(gw * scale[1]) for gh, gw in anchors_per_cell)
    out = net(torch.rand(2, 3, h, w))
    assert out.shape == (2, n, 5 + classes) and out.dtype == torch.float32
    assert bool(((out[..., 4:] >= 0) & (out[..., 4:] <= 1)).all())  # sigmoid
    assert bool((out[..., 2:4] > 0).all())


def test_batch_rows_are_independent():
    net = _net(YOLOV3_LIKE)
    x = torch.rand(3, 3, 64, 64)
    both = net(x)
    assert torch.allclose(both[1], net(x[1:2])[0], rtol=1e-4, atol=1e-4)


def test_channels_last_matches_contiguous():
    net = _net(YOLOV4_TINY_LIKE)
    x = torch.rand(2, 3, 64, 64)
    plain = net(x)
    assert torch.allclose(net.use_channels_last()(x), plain, rtol=1e-4, atol=1e-4)


def _darknet_maxpool(x: torch.Tensor, size: int, stride: int, padding: int) -> torch.Tensor:
    """``forward_maxpool_layer`` of Darknet's src/maxpool_layer.c, loop for loop."""
    b, c, h, w = x.shape
    oh, ow = (h + padding - size) // stride + 1, (w + padding - size) // stride + 1
    off = -(padding // 2)  # w_offset = -l.pad / 2
    out = torch.empty(b, c, oh, ow)
    for i in range(oh):
        for j in range(ow):
            best = torch.full((b, c), -math.inf)
            for n in range(size):
                for m in range(size):
                    y, xx = off + i * stride + n, off + j * stride + m
                    if 0 <= y < h and 0 <= xx < w:
                        best = torch.maximum(best, x[:, :, y, xx])
            out[:, :, i, j] = best
    return out


@pytest.mark.parametrize(
    ("size", "stride", "hw"),
    [(2, 1, (7, 6)), (2, 2, (8, 8)), (2, 2, (7, 9)), (3, 2, (9, 8)), (5, 1, (6, 6)), (3, 1, (5, 4))],
)
def test_maxpool_matches_darknet(size, stride, hw):
    sec = MaxpoolSection(line=1, index=0, size=size, stride=stride, padding=size - 1)
    x = torch.randn(2, 3, *hw)
    got = MaxPool(sec)(x)
    assert torch.equal(got, _darknet_maxpool(x, size, stride, size - 1))
    if stride == 1 and size == 2:
        assert got.shape[-2:] == x.shape[-2:]  # the yolov3-tiny layer 11 case: same size, pads right/bottom


def test_route_groups_take_the_channel_slice():
    x, y = torch.randn(1, 8, 4, 4), torch.randn(1, 4, 4, 4)
    second_half = Route(RouteSection(line=1, index=5, layers=(0,), groups=2, group_id=1))
    assert torch.equal(second_half(x), x[:, 4:])
    both = Route(RouteSection(line=1, index=5, layers=(0, 1), groups=2, group_id=0))
    assert torch.equal(both(x, y), torch.cat([x[:, :4], y[:, :2]], dim=1))
    plain = Route(RouteSection(line=1, index=5, layers=(0, 1)))
    assert torch.equal(plain(x, y), torch.cat([x, y], dim=1))


@pytest.mark.parametrize("scale_x_y", [1.0, 1.05])
def test_yolo_decode_matches_darknet_get_yolo_box(scale_x_y):
    anchors = ((10.0, 14.0), (23.0, 27.0), (37.0, 58.0))
    sec = YoloSection(line=1, index=3, mask=(1, 2), anchors=anchors, classes=2, scale_x_y=scale_x_y)
    layer = YoloDecode(sec)
    h, w, in_h, in_w = 3, 4, 96, 128
    x = torch.randn(2, 2 * 7, h, w)
    out = layer(x, in_h, in_w)
    assert out.shape == (2, 2 * h * w, 7)
    sig = torch.sigmoid
    for b in range(2):
        for a, (aw, ah) in enumerate((anchors[1], anchors[2])):
            for row in range(h):
                for col in range(w):
                    t = x[b, a * 7 : (a + 1) * 7, row, col]
                    got = out[b, (a * h + row) * w + col]
                    s = scale_x_y
                    cx = (col + sig(t[0]) * s - (s - 1) / 2) / w * in_w
                    cy = (row + sig(t[1]) * s - (s - 1) / 2) / h * in_h
                    want = torch.stack([cx, cy, torch.exp(t[2]) * aw, torch.exp(t[3]) * ah, *sig(t[4:])])
                    assert torch.allclose(got, want, rtol=1e-5, atol=1e-4)


def test_yolo_grid_is_cached_per_size():
    layer = YoloDecode(YoloSection(line=1, index=0, mask=(0,), anchors=((1.0, 1.0),), classes=1))
    x = torch.randn(1, 6, 2, 2)
    layer(x, 64, 64)
    grid = layer._grids[(2, 2, 64, 64, "cpu")][0]
    layer(x, 64, 64)
    assert layer._grids[(2, 2, 64, 64, "cpu")][0] is grid
    layer(torch.randn(1, 6, 3, 2), 96, 64)
    assert len(layer._grids) == 2


def test_half_precision_network_returns_float32():
    net = _net(YOLOV4_TINY_LIKE)
    x = torch.rand(1, 3, 64, 64)
    ref = net(x)
    half = net.half()(x.half())
    assert half.dtype == torch.float32
    assert torch.allclose(half, ref, rtol=2e-2, atol=2e-2)


def test_shape_errors_name_the_line():
    bad_shortcut = YOLOV3_LIKE.replace("[shortcut]\nfrom=-3", "[shortcut]\nfrom=-4")
    with pytest.raises(ModelError, match=r"<cfg>:\d+: \[shortcut\] \(layer 4\): adds layer 0"):
        DarknetNet(parse_cfg(bad_shortcut))
    bad_filters = YOLOV4_TINY_LIKE.replace("filters=24", "filters=25")
    with pytest.raises(ModelError, match=r"\[yolo\] \(layer 10\): the layer before has 25 filters .* need 24"):
        DarknetNet(parse_cfg(bad_filters))
    to_yolo = YOLOV3_LIKE.replace("[route]\nlayers = -3", "[route]\nlayers = -1")
    with pytest.raises(ModelError, match="a \\[yolo\\] layer"):
        DarknetNet(parse_cfg(to_yolo))
