"""ops/fused: yuv_letterbox geometry, padding, closeness to letterbox(RGB), P010, out= slices."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from colorclips import decode, encode, frame_batch, pack, rgb_tensor
from conftest import device_params
from vidpipe.errors import BackendUnavailableError
from vidpipe.ops import triton_kernels
from vidpipe.ops.color import split_yuv, yuv_to_rgb
from vidpipe.ops.fused import nv12_to_rgb, resample_taps, yuv_letterbox
from vidpipe.ops.letterbox import PAD_VALUE, letterbox, letterbox_geometry
from vidpipe.types import ColorSpec

BT709 = ColorSpec("bt709", "limited")


def _random_nv12(b, h, w, *, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (b, h * 3 // 2, w), generator=g, dtype=torch.uint8).to(device)


def _solid_nv12(b, h, w, y, u, v):
    d = torch.empty((b, h * 3 // 2, w), dtype=torch.uint8)
    d[:, :h] = y
    d[:, h:, 0::2] = u
    d[:, h:, 1::2] = v
    return d


@pytest.mark.parametrize(
    "src, dst, aa",
    [((1080, 1920), (234, 416), True), ((2160, 3840), (234, 416), True), ((240, 320), (312, 416), False),
     ((242, 322), (314, 416), False), ((240, 320), (240, 300), True), ((17, 5), (17, 5), False)],
)
def test_resample_taps_reproduce_interpolate(src, dst, aa):
    x = torch.rand(1, 1, *src, dtype=torch.float64) * 255
    ref = F.interpolate(x.float(), size=dst, mode="bilinear", align_corners=False, antialias=aa).double()
    mats = []
    for n_in, n_out in zip(src, dst):
        idx, w = resample_taps(n_in, n_out, antialias=aa)
        assert idx.min() >= 0 and idx.max() < n_in
        assert w.sum(1) == pytest.approx(1.0, abs=1e-5)
        m = torch.zeros(n_out, n_in, dtype=torch.float64)
        m.scatter_add_(1, torch.from_numpy(idx.astype("int64")), torch.from_numpy(w.copy()).double())
        mats.append(m)
    mine = mats[0] @ x[0, 0] @ mats[1].T
    assert (mine - ref[0, 0]).abs().max() < 0.02  # F.interpolate computes in float32


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("hw, size", [((1080, 1920), (416, 416)), ((242, 322), (416, 416)), ((96, 160), (64, 96)),
                                      ((480, 360), (416, 416)), ((64, 64), (64, 64))])
def test_geometry_and_padding(device, hw, size):
    h, w = hw
    white = frame_batch(_solid_nv12(2, h, w, 235, 128, 128).to(device), BT709)
    out, geo = yuv_letterbox(white, size)
    assert geo == letterbox_geometry(h, w, *size)
    assert out.shape == (2, 3, *size) and out.dtype == torch.float32 and out.device.type == device
    region = out[:, :, geo.pad_y : geo.pad_y + geo.new_h, geo.pad_x : geo.pad_x + geo.new_w]
    assert ((region - 1.0).abs() < 1e-5).all()  # white, exactly where the image lands
    pad = torch.ones_like(out, dtype=torch.bool)
    pad[:, :, geo.pad_y : geo.pad_y + geo.new_h, geo.pad_x : geo.pad_x + geo.new_w] = False
    assert (out[pad] == PAD_VALUE).all() and int(pad.sum()) == 2 * 3 * (size[0] * size[1] - geo.new_h * geo.new_w)


@pytest.mark.parametrize("device", device_params())
def test_equals_letterbox_of_the_converted_frames(device):
    data = _random_nv12(3, 242, 322, device=device)  # odd chroma sizes (121 x 161)
    batch = frame_batch(data, ColorSpec("bt601", "full"))
    got, geo = yuv_letterbox(batch, (416, 416))
    want, geo2 = letterbox(nv12_to_rgb(batch), (416, 416), dtype=torch.float32, exact=True)
    assert geo == geo2
    assert (got - want.float()).abs().max() < 1e-3  # cuda letterbox may interpolate in fp32 kernels


@pytest.mark.parametrize("color", [BT709, ColorSpec("bt601", "limited"), ColorSpec("bt709", "full")], ids=str)
def test_close_to_letterbox_of_pyav_rgb(color):
    """The NVDEC path's model input vs the CPU path's (letterbox of PyAV's rgb24), same frames."""
    pytest.importorskip("av")
    frames = decode(encode(color, height=360, width=640, frames=2), color)
    batch = frame_batch(torch.from_numpy(pack(frames)), color)
    fused, geo = yuv_letterbox(batch, (416, 416), dtype=torch.float32)
    cpu_path, geo_cpu = letterbox(rgb_tensor(frames), (416, 416), dtype=torch.float32, exact=True)
    assert geo == geo_cpu and geo.new_w == 416 and geo.new_h == 234
    diff = (fused - cpu_path).abs()
    assert diff.max() < 1e-4  # bit-exact RGB, same resampling: only float rounding is left


def test_p010_from_shifted_8bit_planes_matches_nv12():
    nv12 = _random_nv12(2, 96, 128, seed=3).clamp_(16, 235)
    nv12[0, 96:, 0::2], nv12[0, 96:, 1::2] = 90, 200  # flat chroma per frame: P010's interpolated
    nv12[1, 96:, 0::2], nv12[1, 96:, 1::2] = 150, 60  # chroma then equals NV12's nearest chroma
    p010 = ((nv12.to(torch.int32) << 2) << 6).to(torch.uint16)  # 10-bit codes 4x the 8-bit ones, MSB-aligned
    a, _ = yuv_letterbox(frame_batch(nv12, BT709), (64, 64))
    b, _ = yuv_letterbox(frame_batch(p010, BT709, fmt="p010"), (64, 64))
    # same colours; only the rounding differs (swscale floors for 8 bits, nearest for 10)
    assert (a - b).abs().max() <= 3.0 / 255
    assert 0.2 / 255 < (b - a).mean() < 1.5 / 255  # floored terms are darker on average


def test_p010_equals_letterbox_of_its_rgb():
    g = torch.Generator().manual_seed(5)
    p010 = (torch.randint(0, 1024, (2, 72, 64), generator=g, dtype=torch.int32) << 6).to(torch.uint16)
    batch = frame_batch(p010, ColorSpec("bt2020", "limited"), fmt="p010")
    y, uv, depth = split_yuv(p010, fmt="p010")
    rgb = yuv_to_rgb(y, uv, batch.color, bit_depth=depth)  # interpolated chroma, like PyAV's 10-bit path
    assert torch.equal(rgb, nv12_to_rgb(batch))
    want, _ = letterbox(rgb, (40, 40), exact=True)
    got, _ = yuv_letterbox(batch, (40, 40))
    assert (got - want).abs().max() < 1e-5


def test_out_slice_of_a_larger_buffer_and_dtype():
    big = torch.full((6, 3, 64, 64), -1.0, dtype=torch.float16)
    batch = frame_batch(_random_nv12(2, 48, 64), BT709)
    got, _ = yuv_letterbox(batch, (64, 64), out=big[2:4])
    assert got.data_ptr() == big[2].data_ptr() and got.dtype == torch.float16
    assert (big[:2] == -1).all() and (big[4:] == -1).all()
    ref, _ = yuv_letterbox(batch, (64, 64), dtype=torch.float32)
    assert (big[2:4].float() - ref).abs().max() < 1e-3
    with pytest.raises(ValueError, match="out must be"):
        yuv_letterbox(batch, (64, 64), out=big[0:3])


def test_rejects_odd_width_and_rgb_batches():
    with pytest.raises(ValueError, match="even width"):
        yuv_letterbox(frame_batch(torch.zeros((1, 6, 5), dtype=torch.uint8), BT709), (8, 8))
    from vidpipe.types import FrameBatch, FrameMeta

    rgb = FrameBatch(torch.zeros((1, 3, 4, 4), dtype=torch.uint8), (FrameMeta("x", 0, 0, None, 4, 4),))
    with pytest.raises(ValueError, match="nv12 or p010"):
        yuv_letterbox(rgb, (8, 8))


def test_empty_batch():
    empty = frame_batch(torch.zeros((0, 6, 4), dtype=torch.uint8), BT709)
    out, geo = yuv_letterbox(empty, (8, 8))
    assert out.shape == (0, 3, 8, 8) and geo.src_h == 4 and geo.src_w == 4
    assert nv12_to_rgb(empty).shape == (0, 3, 4, 4)


def test_triton_backend_on_cpu_is_refused_with_a_reason():
    if triton_kernels.available() and triton_kernels.interpreting():
        pytest.skip("Triton's interpreter runs the kernels on CPU here")
    batch = frame_batch(_random_nv12(1, 8, 8), BT709)
    with pytest.raises(BackendUnavailableError, match="Triton"):
        yuv_letterbox(batch, (8, 8), backend="triton")


def test_cpu_uint8_fast_path_is_within_one_level_of_exact():
    g = torch.Generator().manual_seed(0)
    rgb = torch.randint(0, 256, (2, 3, 270, 480), dtype=torch.uint8, generator=g)
    fast, geo = letterbox(rgb, (416, 416), exact=False)
    exact, geo2 = letterbox(rgb, (416, 416), exact=True)
    assert geo == geo2
    assert (fast - exact).abs().max().item() <= 1.0 / 255 + 1e-6
