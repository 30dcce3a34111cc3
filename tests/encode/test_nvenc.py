"""NVENC output (``VideoWriter(codec="h264_nvenc")``): what can run without NVENC hardware.

The H100/H200 this project is measured on have no NVENC, so PyNvVideoCodec's encoder itself
never runs here. Checked instead, against other implementations:
- the I420 -> NV12 interleave NVENC is fed, against FFmpeg's swscale (CPU, and CUDA on the GPU);
- the split of an encoder's Annex-B output into pictures, keyframes and parameter sets, on real
  libx264/libx265 bitstreams against PyAV's own packets;
- the writer's NVENC path end to end (planes -> encoder -> pictures muxed with their times, audio,
  fragmented MP4), with libx264 in NVENC's place: a real encoder that hands out Annex-B
  pictures the way NVENC does, since NVENC cannot run here. Read back with PyAV/FFmpeg;
- where NVENC is missing (no CUDA, or a GPU without the engine), a clear error; on a GPU that
  has NVENC the same GPU test writes a real file and reads it back.
"""

from __future__ import annotations

from fractions import Fraction

import av
import numpy as np
import pytest
import torch

from _clips import decoded, psnr, with_g711
from media import make_video
from vidpipe.encode import VideoWriter, writer
from vidpipe.encode.bitstream import access_units, is_keyframe, parameter_sets
from vidpipe.encode.nvenc import i420_to_nv12, nvenc_unavailable
from vidpipe.errors import BackendUnavailableError


def _i420_and_nv12(width: int, height: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rgb = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p")
    return frame.to_ndarray(), frame.reformat(format="nv12").to_ndarray()


@pytest.mark.parametrize("size", [(64, 48), (320, 240), (1920, 1080)])
def test_i420_to_nv12_matches_swscale(device, size):
    w, h = size
    i420, nv12 = _i420_and_nv12(w, h)
    got = i420_to_nv12(torch.from_numpy(i420).to(device), h, w)
    assert got.device.type == device and tuple(got.shape) == (h * 3 // 2, w)
    assert np.array_equal(got.cpu().numpy(), nv12)


def _encode(codec_name: str, frames: int = 25, gop: int = 10, global_header: bool = False):
    """``(packets, keyframe flags, extradata)`` of a real libx264/libx265 encode of noise frames."""
    w, h = 320, 240
    enc = av.CodecContext.create(codec_name, "w")
    enc.width, enc.height, enc.pix_fmt, enc.time_base, enc.gop_size = w, h, "yuv420p", Fraction(1, 25), gop
    enc.options = {"preset": "ultrafast", **({"x265-params": "log-level=error"} if codec_name == "libx265" else {})}
    if global_header:
        enc.flags |= av.codec.context.Flags.global_header
    enc.open()
    packets = []
    for i in range(frames):
        rgb = np.random.default_rng(i).integers(0, 256, (h, w, 3), dtype=np.uint8)
        f = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p")
        f.pts = i
        packets += [(bytes(p), p.is_keyframe) for p in enc.encode(f)]
    packets += [(bytes(p), p.is_keyframe) for p in enc.encode(None)]
    return [p for p, _ in packets], [k for _, k in packets], bytes(enc.extradata or b"")


@pytest.mark.parametrize(("codec", "encoder"), [("h264", "libx264"), ("hevc", "libx265")])
def test_pictures_keyframes_and_parameter_sets_of_a_real_bitstream(codec, encoder):
    packets, keys, _ = _encode(encoder)
    joined = b"".join(packets)  # several pictures in one buffer, as a flush returns them
    assert access_units(joined, codec) == packets
    assert [is_keyframe(p, codec) for p in packets] == keys and keys[0] and keys.count(True) >= 3
    params = parameter_sets(packets[0], codec)
    assert params and params in packets[0]
    with av.open(__import__("io").BytesIO(params), format=codec) as raw:  # FFmpeg reads them as a header
        assert raw.streams.video[0].codec_context.name == codec
    assert access_units(b"", codec) == [] and parameter_sets(packets[1], codec) == b""


class _X26xInNvencsPlace:
    """libx264 (libx265 for HEVC) through PyAV with NVENC's interface
    (:class:`vidpipe.encode.nvenc.NvencEncoder`): I420 planes in, Annex-B pictures out, the parameter sets as ``sequence``, pictures held
    back and returned late (as NVENC's output delay does), all on the CPU."""

    instances: list = []

    def __init__(self, *, width, height, codec, fps, gop, options=None):
        self.codec, self.device = codec.removesuffix("_nvenc"), torch.device("cpu")
        self.width, self.height = width, height
        self.gop = gop
        x265 = self.codec == "hevc"
        ctx = av.CodecContext.create("libx265" if x265 else "libx264", "w")
        ctx.width, ctx.height, ctx.pix_fmt = width, height, "yuv420p"
        ctx.time_base, ctx.gop_size = Fraction(1, 90000), gop
        ctx.options = ({"preset": "ultrafast", "crf": "12", "x265-params": "bframes=0:rc-lookahead=3:log-level=error"}
                       if x265 else {"preset": "ultrafast", "bf": "0", "crf": "12", "rc-lookahead": "3"})
        ctx.flags |= av.codec.context.Flags.global_header  # the header apart, as GetSequenceParams() gives it
        ctx.open()
        self._ctx, self.sequence, self._n = ctx, bytes(ctx.extradata), 0
        self.calls: list[int] = []
        _X26xInNvencsPlace.instances.append(self)

    def encode(self, planes, ready=None):
        assert ready is None and planes.device.type == "cpu"
        frame = av.VideoFrame.from_ndarray(planes.numpy(), format="yuv420p")
        frame.pts, self._n = self._n, self._n + 1
        out = [bytes(p) for p in self._ctx.encode(frame)]
        self.calls.append(len(out))
        return out

    def flush(self):
        return [bytes(p) for p in self._ctx.encode(None)]


@pytest.mark.parametrize(("suffix", "codec"), [(".mp4", "h264_nvenc"), (".mkv", "h264_nvenc"), (".ts", "h264_nvenc"),
                                               (".mp4", "hevc_nvenc")])
def test_the_nvenc_path_muxes_each_picture_with_its_time_and_the_audio(monkeypatch, tmp_path, suffix, codec):
    monkeypatch.setattr(writer, "NvencEncoder", _X26xInNvencsPlace)
    _X26xInNvencsPlace.instances.clear()
    src = make_video(tmp_path / "in.mp4", width=320, height=240, frames=60, fps=25, bframes=0, crf=12)
    with_audio = with_g711(src.path, tmp_path / "in.mov")
    frames = decoded(src.path)
    times = [0.0, 0.04, 0.1, *[0.1 + 0.04 * i for i in range(1, 58)]]  # a variable rate
    out = tmp_path / f"out{suffix}"
    with VideoWriter(out, width=320, height=240, fps=25, codec=codec, audio_from=str(with_audio)) as w:
        for (rgb, _), t in zip(frames, times):
            w.write(torch.from_numpy(rgb).permute(2, 0, 1), pts=t)
    rep = w.report()
    enc = _X26xInNvencsPlace.instances[-1]
    assert enc.calls[0] == 0, "the stand-in holds pictures back, as NVENC does"
    assert rep["frames"] == len(times) and rep["codec"] == codec and rep["device_yuv"] == len(times)
    assert rep["audio"] in ("copy", "aac") and rep["audio_packets"] > 0
    with av.open(str(out)) as f:
        v = f.streams.video[0]
        assert (v.codec_context.name, v.width, v.height) == (enc.codec, 320, 240)
        assert f.streams.audio, "the source's audio is in the output"
        packets = [p for p in f.demux(v) if p.size]
        keys = [i for i, p in enumerate(packets) if p.is_keyframe]
    assert keys[:2] == [0, enc.gop]
    got = decoded(out)
    assert [round(t - got[0][1], 3) for _, t in got] == pytest.approx(times, abs=1.5e-3)
    worst = min(psnr(a, b) for (a, _), (b, _) in zip(frames, got))
    assert len(got) == len(times) and worst >= 35, f"PSNR {worst:.1f} dB"


def test_nvenc_without_cuda_is_a_clear_error(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("CUDA is here: see the GPU test")
    with pytest.raises(BackendUnavailableError, match="NVENC needs a CUDA device.*use codec='libx264'"):
        VideoWriter(tmp_path / "x.mp4", width=64, height=64, fps=25, codec="h264_nvenc")
    assert not (tmp_path / "x.mp4").exists()
    assert nvenc_unavailable("cpu") == "NVENC needs a CUDA device"


@pytest.mark.gpu
def test_nvenc_on_this_gpu_writes_a_file_or_says_why_not(tmp_path):
    """On a GPU with NVENC: a real H.264 file read back with PyAV. On one without (H100, H200):
    the error names the GPU and points to libx264, and no file is left."""
    why = nvenc_unavailable("cuda")
    out = tmp_path / "x.mp4"
    frames = decoded(make_video(tmp_path / "in.mp4", width=320, height=240, frames=20, fps=25, bframes=0).path)
    if why is not None:
        name = torch.cuda.get_device_name()
        assert name in why
        with pytest.raises(BackendUnavailableError, match=f"{name} cannot open an NVENC session.*libx264"):
            VideoWriter(out, width=320, height=240, fps=25, codec="h264_nvenc")
        assert not out.exists()
        return
    with VideoWriter(out, width=320, height=240, fps=25, codec="h264_nvenc") as w:
        for rgb, t in frames:
            w.write(torch.from_numpy(rgb).permute(2, 0, 1).cuda(), pts=t)
    got = decoded(out)
    assert len(got) == len(frames) and min(psnr(a, b) for (a, _), (b, _) in zip(frames, got)) >= 30


def test_nvenc_is_not_sent_to_an_encoder_process(tmp_path):
    from vidpipe.encode.process import ProcessVideoWriter
    from vidpipe.errors import ConfigError

    with pytest.raises(ConfigError, match="NVENC encodes frames on the GPU in the process that has them"):
        ProcessVideoWriter(tmp_path / "x.mp4", width=64, height=64, fps=25, codec="hevc_nvenc")
