"""NVDEC fallback decisions on the CPU: what goes to PyAV, and why, with a capability table injected.

The table below is what ``GetDecoderCaps`` reported on an NVIDIA H200 (driver 580.159,
PyNvVideoCodec 2.2.4): H.264 8-bit 4:2:0 only, HEVC/VP9 up to 12 bit, AV1 not at all, 7 engines.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from conftest import nvdec_skip_reason

from vidpipe.decode.nvdec_caps import DecoderCaps, canonical_codec, nvdec_unavailable, stream_unsupported
from vidpipe.decode.probe import probe
from vidpipe.decode.registry import select_backend
from vidpipe.errors import BackendUnavailableError, GpuFallbackError, UnsupportedError

H200 = {
    ("h264", "420", 8): DecoderCaps("h264", "420", 8, True, 7, 48, 16, 4096, 4096, 65536),
    ("hevc", "420", 8): DecoderCaps("hevc", "420", 8, True, 7, 144, 144, 8192, 8192, 262144),
    ("hevc", "420", 10): DecoderCaps("hevc", "420", 10, True, 7, 144, 144, 8192, 8192, 262144),
    ("vp9", "420", 8): DecoderCaps("vp9", "420", 8, True, 7, 128, 128, 8192, 8192, 262144),
    ("vp9", "420", 10): DecoderCaps("vp9", "420", 10, True, 7, 128, 128, 8192, 8192, 262144),
    ("mpeg4", "420", 8): DecoderCaps("mpeg4", "420", 8, True, 7, 48, 16, 2048, 2048, 8192),
}


def h200(codec, chroma, bits):
    return H200.get((codec, chroma, bits), DecoderCaps(codec, chroma, bits, False))


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    from media import make_video

    d = tmp_path_factory.mktemp("caps")
    spec = {
        "h264": dict(codec="h264", width=160, height=96),
        "h264_10": dict(codec="h264", width=160, height=96, pix_fmt="yuv420p10le"),
        "h264_444": dict(codec="h264", width=160, height=96, pix_fmt="yuv444p"),
        "hevc_10": dict(codec="hevc", width=256, height=160, pix_fmt="yuv420p10le"),  # HEVC: >= 144 lines
        "vp9_odd": dict(codec="vp9", width=161, height=97),
        "mjpeg": dict(codec="mjpeg", width=160, height=96),
        "av1": dict(codec="av1", width=160, height=96),
    }
    suffix = {"mjpeg": ".avi", "vp9_odd": ".webm", "av1": ".mkv"}
    out = {}
    for name, kw in spec.items():
        try:
            out[name] = probe(make_video(d / f"{name}{suffix.get(name, '.mkv')}", frames=3, gop=3, **kw).path)
        except (RuntimeError, ValueError) as exc:  # an encoder missing from this PyAV build
            out[name] = exc
    return out


def info_of(clips, name):
    info = clips[name]
    if isinstance(info, Exception):
        pytest.skip(f"cannot make {name}: {info}")
    return info


@pytest.mark.parametrize(
    "name,reason",
    [
        ("h264", None),
        ("hevc_10", None),
        ("h264_10", "does not decode h264 10-bit"),
        ("h264_444", "chroma 4:4:4 is not supported"),
        ("vp9_odd", "odd frame size 161x97"),
        ("mjpeg", "MJPEG is decoded on the CPU"),
        ("av1", "does not decode av1"),
    ],
)
def test_stream_decisions(clips, name, reason):
    why = stream_unsupported(info_of(clips, name), h200)
    if reason is None:
        assert why is None
    else:
        assert why is not None and reason in why


def test_size_limits(clips):
    info = info_of(clips, "h264")
    big = dataclasses.replace(info, width=4112, height=2304)
    assert "outside this GPU's NVDEC limits" in stream_unsupported(big, h200)
    tiny = dataclasses.replace(info, width=32, height=32)
    assert "outside" in stream_unsupported(tiny, h200)
    # within width/height but too many macroblocks for MPEG-4 (2048x2048 max, 8192 MBs)
    mb = dataclasses.replace(info, codec="mpeg4", width=2048, height=1088)
    assert "macroblocks" in stream_unsupported(mb, h200)
    prores = dataclasses.replace(info, codec="prores")
    assert "does not decode prores" in stream_unsupported(prores, h200)


def test_decoder_names_map_to_codecs():
    assert canonical_codec("libdav1d") == "av1" and canonical_codec("h264") == "h264"


def test_no_cuda_device_means_unavailable():
    assert "the device is cpu" in nvdec_unavailable(torch.device("cpu"))
    if not torch.cuda.is_available():
        assert "no CUDA" in nvdec_unavailable(torch.device("cuda"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the fallback of a machine without a GPU")
def test_auto_falls_back_to_pyav_with_the_reason(clips):
    info = info_of(clips, "h264")
    choice = select_backend(info, torch.device("cuda"))
    assert choice.name == "pyav" and choice.fell_back
    assert choice.rejected[0][0] == "nvdec" and choice.rejected[0][1]
    with pytest.raises(GpuFallbackError, match="nvdec"):
        select_backend(info, torch.device("cuda"), strict_gpu=True)
    cls = BackendUnavailableError if nvdec_skip_reason() else UnsupportedError
    with pytest.raises(cls, match="decoder='nvdec' cannot decode"):
        select_backend(info, torch.device("cuda"), "nvdec")
