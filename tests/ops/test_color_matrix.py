"""ops/color: coefficient tables, known colours, plane splitting and tag mapping."""

from __future__ import annotations

import pytest
import torch

from conftest import device_params
from vidpipe.errors import ConfigError
from vidpipe.ops.color import (
    KR_KB,
    color_spec_from_av,
    pyav_reformat_kwargs,
    split_yuv,
    yuv_coefficients,
    yuv_to_rgb,
)
from vidpipe.types import ColorSpec

SPECS = [ColorSpec(m, r) for m in ("bt601", "bt709", "bt2020") for r in ("limited", "full")]


@pytest.mark.parametrize(
    "color, expected",
    [
        # published YCbCr -> R'G'B' coefficients (y gain, Cr->R, Cb->G, Cr->G, Cb->B)
        (ColorSpec("bt601", "limited"), (1.164384, 1.596027, -0.391762, -0.812968, 2.017232)),
        (ColorSpec("bt709", "limited"), (1.164384, 1.792741, -0.213249, -0.532909, 2.112402)),
        (ColorSpec("bt601", "full"), (1.0, 1.402, -0.344136, -0.714136, 1.772)),  # JFIF
        (ColorSpec("bt709", "full"), (1.0, 1.5748, -0.187324, -0.468124, 1.8556)),
        (ColorSpec("bt2020", "limited"), (1.164384, 1.678674, -0.187326, -0.650424, 2.141772)),
    ],
)
def test_coefficients_match_the_standards(color, expected):
    k = yuv_coefficients(color)
    assert (k.y_gain, k.r_v, k.g_u, k.g_v, k.b_u) == pytest.approx(expected, abs=2e-6)
    assert k.matrix[0] == (k.y_gain, 0.0, k.r_v)
    assert k.offsets == ((16.0, 128.0, 128.0) if color.range == "limited" else (0.0, 128.0, 128.0))


def test_offsets_and_gains_scale_with_bit_depth():
    k8 = yuv_coefficients(ColorSpec("bt709", "limited"), bit_depth=8)
    k10 = yuv_coefficients(ColorSpec("bt709", "limited"), bit_depth=10)
    assert (k10.y_offset, k10.c_offset) == (64.0, 512.0)
    assert k10.y_gain == pytest.approx(k8.y_gain / 4) and k10.r_v == pytest.approx(k8.r_v / 4)
    f10 = yuv_coefficients(ColorSpec("bt709", "full"), bit_depth=10)
    assert f10.y_offset == 0.0 and f10.y_gain == pytest.approx(255 / 1023)


def test_quantized_gains_are_swscale_fixed_point():
    k = yuv_coefficients(ColorSpec("bt709", "limited"), quantize=True)
    for g in (k.y_gain, k.r_v, k.g_u, k.g_v, k.b_u):
        assert (g * 8192).is_integer()
    assert k.r_v == pytest.approx(1.792741, abs=1 / 8192)


def _yuv_of(rgb, color: ColorSpec, bits: int = 8):
    """Code values of an RGB colour by the standard's forward equations (independent of ops.color)."""
    kr, kb = KR_KB[color.matrix]
    r, g, b = (c / 255 for c in rgb)
    y = kr * r + (1 - kr - kb) * g + kb * b
    u, v = (b - y) / (2 * (1 - kb)), (r - y) / (2 * (1 - kr))
    s = 1 << (bits - 8)
    if color.range == "limited":
        vals = (16 * s + 219 * s * y, 128 * s + 224 * s * u, 128 * s + 224 * s * v)
    else:
        top = (1 << bits) - 1
        vals = (top * y, (1 << (bits - 1)) + top * u, (1 << (bits - 1)) + top * v)
    return [round(x) for x in vals]


def _convert(yuv, color, bits=8, **kw):
    y = torch.tensor(yuv[0]).view(1, 1, 1).expand(1, 2, 2)
    uv = torch.tensor(yuv[1:]).view(1, 1, 1, 2)
    return yuv_to_rgb(y, uv, color, bit_depth=bits, **kw)[0, :, 0, 0].tolist()


COLOURS = [
    (0, 0, 0), (255, 255, 255), (255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0), (0, 255, 255), (255, 0, 255)
]


@pytest.mark.parametrize("color", SPECS, ids=str)
@pytest.mark.parametrize("rounding", ["swscale", "nearest"])
@pytest.mark.parametrize("bits", [8, 10])
def test_primaries_and_black_white_round_trip(color, rounding, bits):
    # swscale floors every term: saturated colours land up to 2 codes low (PyAV gives (253, 0, 0)
    # for BT.601 limited red, see test_solid_colours_match_pyav); rounding is within 1.
    tol = 2 if (rounding == "swscale" and bits == 8) else 1
    for rgb in COLOURS:
        got = _convert(_yuv_of(rgb, color, bits), color, bits, rounding=rounding)
        assert all(abs(a - b) <= tol for a, b in zip(got, rgb)), (rgb, got)


@pytest.mark.parametrize("color", SPECS, ids=str)
def test_solid_colours_match_pyav(color):
    av = pytest.importorskip("av")
    import numpy as np

    for rgb in COLOURS + [(128, 128, 128), (200, 50, 90)]:
        yuv = _yuv_of(rgb, color)
        frame = av.VideoFrame(16, 16, "yuv420p")
        for plane, value in zip(frame.planes, yuv):
            plane.update(np.full(plane.buffer_size, min(max(value, 0), 255), np.uint8).tobytes())
        ref = frame.reformat(format="rgb24", **pyav_reformat_kwargs(color)).to_ndarray()[0, 0].tolist()
        assert _convert([min(max(v, 0), 255) for v in yuv], color) == ref, (rgb, yuv)


def test_black_and_white_code_values():
    lim, full = ColorSpec("bt709", "limited"), ColorSpec("bt709", "full")
    assert _convert((16, 128, 128), lim) == [0, 0, 0]
    assert _convert((235, 128, 128), lim) == [255, 255, 255]
    assert _convert((0, 128, 128), full) == [0, 0, 0]
    assert _convert((255, 128, 128), full) == [255, 255, 255]
    assert _convert((64, 512, 512), lim, 10) == [0, 0, 0]
    assert _convert((940, 512, 512), lim, 10) == [255, 255, 255]
    # out-of-range code values clamp instead of wrapping
    assert _convert((0, 128, 128), lim) == [0, 0, 0]
    assert _convert((255, 255, 255), lim)[0] == 255


def test_swscale_rounding_floors_each_term():
    # R = floor(1.1644 * 47) + floor(1.7927 * 112) = 54 + 200: one code below the rounded 255.
    red = _yuv_of((255, 0, 0), ColorSpec("bt709", "limited"))
    assert red == [63, 102, 240]
    assert _convert(red, ColorSpec("bt709", "limited"))[0] == 254
    assert _convert(red, ColorSpec("bt709", "limited"), rounding="nearest")[0] == 255


@pytest.mark.parametrize("device", device_params())
def test_float_output_holds_the_same_values(device):
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 256, (2, 6, 8), generator=g, dtype=torch.uint8).to(device)
    uv = torch.randint(0, 256, (2, 3, 4, 2), generator=g, dtype=torch.uint8).to(device)
    color = ColorSpec("bt601", "limited")
    u8 = yuv_to_rgb(y, uv, color)
    f = yuv_to_rgb(y, uv, color, dtype=torch.float32)
    assert u8.dtype == torch.uint8 and u8.shape == (2, 3, 6, 8) and u8.device.type == device
    assert torch.equal(f, u8.float())
    raw = yuv_to_rgb(y, uv, color, dtype=torch.float32, rounding="none")
    assert (raw - yuv_to_rgb(y, uv, color, dtype=torch.float32, rounding="nearest")).abs().max() <= 0.5


def test_nearest_chroma_covers_each_2x2_block():
    y = torch.full((1, 4, 4), 126, dtype=torch.uint8)
    uv = torch.tensor([[[[128, 240], [128, 128]], [[128, 128], [16, 128]]]], dtype=torch.uint8)  # (1, 2, 2, 2)
    rgb = yuv_to_rgb(y, uv, ColorSpec("bt709", "limited"))
    r, b = rgb[0, 0], rgb[0, 2]
    assert (r[:2, :2] > 200).all() and (r[:2, 2:] < 140).all() and (r[2:] < 140).all()
    assert (b[2:, 2:] < 10).all() and (b[:2] > 100).all()


def test_linear_chroma_interpolates():
    # 10-bit grey with one raised V sample at chroma (row 0, col 1)
    y = torch.full((1, 4, 4), 504, dtype=torch.int32)
    uv = torch.full((1, 2, 2, 2), 512, dtype=torch.int32)
    uv[0, 0, 1, 1] = 700
    spec = ColorSpec("bt709", "limited")
    r = yuv_to_rgb(y, uv, spec, bit_depth=10, chroma="linear")[0, 0].int()
    flat = yuv_to_rgb(y, uv, spec, bit_depth=10, chroma="nearest")[0, 0].int()
    grey = int(flat[3, 0])
    # nearest: exactly its 2x2 block
    assert (flat[:2, 2:] > grey + 50).all() and (flat[2:] == grey).all() and (flat[:, :2] == grey).all()
    # linear: vertically centred (rows 0..2 affected, decreasing), horizontally left-sited samples
    # read at the centre of each luma pair: the pair to the left gets 1/4 of it
    assert r[0, 2] == flat[0, 2] and r[0, 2] > r[1, 2] > r[2, 2] > r[3, 2] == grey
    assert r[0, 0] == r[0, 1] and grey < r[0, 0] < r[0, 2]
    assert int(r[0, 0] - grey) == pytest.approx((r[0, 2] - grey) / 4, abs=1)


def test_split_yuv_layout():
    data = torch.arange(2 * 6 * 4, dtype=torch.uint8).view(2, 6, 4)
    y, uv, depth = split_yuv(data)
    assert depth == 8 and y.shape == (2, 4, 4) and uv.shape == (2, 2, 2, 2)
    assert y.data_ptr() == data.data_ptr()  # a view, no copy
    assert uv[0, 0, 1].tolist() == [data[0, 4, 2].item(), data[0, 4, 3].item()]
    p = (torch.randint(0, 1024, (1, 6, 4), dtype=torch.int32) << 6).to(torch.uint16)
    y10, uv10, d10 = split_yuv(p, fmt="p010")
    assert d10 == 10 and y10.max() < 1024
    assert torch.equal(y10, (p[:, :4].to(torch.int32) >> 6))
    assert torch.equal(uv10.flatten(2), p[:, 4:].to(torch.int32) >> 6)


def test_invalid_arguments():
    y = torch.zeros((1, 2, 2), dtype=torch.uint8)
    uv = torch.zeros((1, 1, 1, 2), dtype=torch.uint8)
    with pytest.raises(ValueError, match="bit_depth"):
        yuv_coefficients(ColorSpec(), bit_depth=7)
    with pytest.raises(ConfigError, match="rounding"):
        yuv_to_rgb(y, uv, ColorSpec(), rounding="round")
    with pytest.raises(ValueError, match="float dtype"):
        yuv_to_rgb(y, uv, ColorSpec(), rounding="none")
    with pytest.raises(ValueError, match="does not match"):
        yuv_to_rgb(torch.zeros((1, 4, 4), dtype=torch.uint8), uv, ColorSpec())
    with pytest.raises(ValueError, match="even width"):
        split_yuv(torch.zeros((1, 6, 5), dtype=torch.uint8))
    with pytest.raises(ValueError, match="uint16"):
        split_yuv(torch.zeros((1, 6, 4), dtype=torch.uint8), fmt="p010")


def test_color_spec_from_av_tags():
    assert color_spec_from_av(1, 1, height=480) == ColorSpec("bt709", "limited")
    assert color_spec_from_av(6, 2, height=1080) == ColorSpec("bt601", "full")
    assert color_spec_from_av(5, 0, height=1080) == ColorSpec("bt601", "limited")
    assert color_spec_from_av(9, 1, height=2160) == ColorSpec("bt2020", "limited")
    assert color_spec_from_av(2, 0, height=720) == ColorSpec("bt709", "limited")  # unspecified: by size
    assert color_spec_from_av(2, 0, height=576) == ColorSpec("bt601", "limited")
    assert color_spec_from_av(2, 0, height=576, pix_fmt="yuvj420p") == ColorSpec("bt601", "full")


def test_pyav_reformat_kwargs_are_accepted_by_pyav():
    av = pytest.importorskip("av")
    import numpy as np

    frame = av.VideoFrame.from_ndarray(np.full((4, 4, 3), 200, np.uint8), format="rgb24").reformat(format="yuv420p")
    for color in SPECS:
        kw = pyav_reformat_kwargs(color)
        assert frame.reformat(format="rgb24", **kw).to_ndarray().shape == (4, 4, 3)


@pytest.mark.parametrize("color", [ColorSpec("bt601", "limited"), ColorSpec("bt709", "limited"), ColorSpec("bt709", "full")])
def test_ycbcr444_is_the_420_converter_with_chroma_given_per_pixel(color):
    """DALI's YCbCr output (chroma per pixel): the same RGB as the 4:2:0 reference converter with
    each chroma sample repeated over its 2x2 block, rounded to nearest."""
    from vidpipe.ops.color import ycbcr444_to_rgb

    g = torch.Generator().manual_seed(3)
    y = torch.randint(0, 256, (2, 6, 8), generator=g, dtype=torch.uint8)
    uv = torch.randint(0, 256, (2, 3, 4, 2), generator=g, dtype=torch.uint8)
    full = uv.repeat_interleave(2, dim=1).repeat_interleave(2, dim=2)  # (2, 6, 8, 2)
    ycc = torch.cat([y[..., None], full], dim=-1)
    want = yuv_to_rgb(y, uv, color, rounding="nearest", chroma="nearest")
    got = ycbcr444_to_rgb(ycc, color)
    assert got.dtype == torch.uint8 and got.shape == (2, 3, 6, 8)
    assert (got.int() - want.int()).abs().max().item() <= 1  # float32 vs the reference's order of terms
