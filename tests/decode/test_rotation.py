"""Videos with a display rotation come out upright, as the ``ffmpeg`` tool shows them.

References, independent of vidpipe's rotation code: numpy's ``rot90`` of the frames PyAV decodes
in their stored orientation, and the ``ffmpeg`` tool's autorotated output (``ffmpeg -i rotated.mp4
-f rawvideo -pix_fmt rgb24``: ``transpose=cclock`` for a 90-degree matrix).
"""

from __future__ import annotations

import logging
import math
import struct
import subprocess

import av
import numpy as np
import pytest
import torch

import vidpipe
from ffmpeg_cli import require
from vidpipe.decode.probe import probe
from vidpipe.decode.pyav import PyAVDecoder
from vidpipe.decode.rotation import matrix_rotation, rotate_batch
from vidpipe.types import ColorSpec, FrameBatch, FrameMeta

W, H = 160, 96


def clip_of(make_clip, rotation: int, suffix: str = ".mp4"):
    return make_clip(suffix, width=W, height=H, frames=8, gop=4, rotation=rotation)


def stored(path) -> np.ndarray:
    """Every frame as stored (no rotation): ``(N, H, W, 3)`` uint8, by vidpipe's backend itself."""
    dec = PyAVDecoder(path)
    return np.concatenate([b.data.permute(0, 2, 3, 1).numpy() for b in dec.batches(8)])


def upright(path, **kwargs) -> tuple[np.ndarray, list[FrameMeta]]:
    with vidpipe.open_video(path, device="cpu", **kwargs) as video:
        batches = list(video.batches(8))
    return np.concatenate([b.data.permute(0, 2, 3, 1).numpy() for b in batches]), [m for b in batches for m in b.frames]


@pytest.mark.parametrize("rotation", [90, 180, 270])
@pytest.mark.parametrize("suffix", [".mp4", ".mov"])
def test_probe_reads_the_display_rotation(make_clip, rotation, suffix):
    info = probe(clip_of(make_clip, rotation, suffix).path)
    assert (info.width, info.height) == (W, H)  # the coded size
    assert info.rotation == rotation and info.extra["rotation_known"]


def test_probe_without_rotation(make_clip):
    info = probe(clip_of(make_clip, 0).path)
    assert info.rotation == 0 and info.extra["rotation_known"]


@pytest.mark.parametrize("rotation", [90, 180, 270])
def test_frames_are_turned_like_numpy_rot90(make_clip, rotation):
    clip = clip_of(make_clip, rotation)
    raw = stored(clip.path)
    got, metas = upright(clip.path)
    want = np.rot90(raw, rotation // 90, axes=(1, 2))
    assert got.shape == want.shape and np.array_equal(got, want)
    h, w = (W, H) if rotation in (90, 270) else (H, W)
    assert all((m.height, m.width) == (h, w) for m in metas)
    assert [m.index for m in metas] == list(range(clip.frames))


@pytest.mark.parametrize("rotation", [90, 270])
def test_frames_match_ffmpeg_autorotate(make_clip, rotation):
    clip = clip_of(make_clip, rotation)
    out = subprocess.run(
        [require("ffmpeg"), "-v", "error", "-i", str(clip.path), "-f", "rawvideo", "-pix_fmt", "rgb24", "-"],
        capture_output=True, timeout=120, check=True,
    ).stdout
    ref = np.frombuffer(out, np.uint8).reshape(clip.frames, W, H, 3)  # turned: W rows of H pixels
    got, _ = upright(clip.path)
    diff = np.abs(got.astype(int) - ref.astype(int))
    assert got.shape == ref.shape
    assert diff.mean() < 0.5 and diff.max() <= 8  # swscale of the ffmpeg tool vs PyAV's: same pixels


def test_detect_reports_boxes_in_the_upright_frame(make_clip):
    clip = make_clip(".mp4", width=W, height=H, frames=2, gop=2, rotation=90)
    results = list(vidpipe.detect(clip.path, device="cpu"))
    assert [r.size for r in results] == [(W, H), (W, H)]


def _nv12(y: np.ndarray, u: np.ndarray, v: np.ndarray) -> torch.Tensor:
    uv = np.stack([u, v], axis=-1).reshape(u.shape[0], -1)
    return torch.from_numpy(np.concatenate([y, uv]))


@pytest.mark.parametrize("fmt", ["nv12", "p010"])
@pytest.mark.parametrize("degrees", [90, 180, 270])
def test_yuv_batches_turn_plane_by_plane(fmt, degrees):
    """The NVDEC path's NV12/P010 batches: each plane turned like numpy turns it."""
    rng = np.random.default_rng(degrees)
    dtype = np.uint8 if fmt == "nv12" else np.uint16
    h, w = 6, 10
    planes = [rng.integers(0, 255, s).astype(dtype) for s in ((h, w), (h // 2, w // 2), (h // 2, w // 2))]
    data = torch.stack([_nv12(*planes), _nv12(*(p[::-1].copy() for p in planes))])
    batch = FrameBatch(
        data=data, frames=tuple(FrameMeta("x", 0, i, None, h, w) for i in range(2)), format=fmt,
        color=ColorSpec("bt601", "limited"),
    )  # fmt: skip
    out = rotate_batch(batch, degrees)
    k = degrees // 90
    want = _nv12(*(np.rot90(p, k).copy() for p in planes))
    assert out.format == fmt and torch.equal(out.data[0], want)
    assert out.frames[0].height == (w if k % 2 else h)


def _matrix(degrees_ccw: float, hflip: bool = False) -> bytes:
    """An FFmpeg display matrix as av_display_rotation_set(-degrees) (+ av_display_matrix_flip) writes it."""
    r = math.radians(degrees_ccw)
    c, s = math.cos(r), math.sin(r)
    m = [c, -s, 0, s, c, 0, 0, 0, 1]  # av_display_rotation_set(matrix, -degrees_ccw)
    if hflip:
        m[0], m[3], m[6] = -m[0], -m[3], -m[6]
    fixed = [round(v * 65536) for v in m[:8]] + [1 << 30]
    return struct.pack("<9i", *fixed)


def test_matrix_rotation_reads_ffmpegs_convention():
    for angle in (0, 90, 180, -90, 45):
        got, mirrored = matrix_rotation(_matrix(angle))
        assert abs(((got - angle) + 180) % 360 - 180) < 1e-3 and not mirrored
    assert matrix_rotation(_matrix(90, hflip=True))[1]


def test_mirrored_matrix_is_reported_not_applied(make_clip, tmp_path, caplog):
    path = tmp_path / "mirror.mp4"
    out = av.open(str(path), "w")
    stream = out.add_stream("libx264", rate=10)
    stream.width, stream.height, stream.pix_fmt = W, H, "yuv420p"
    stream.set_display_rotation(90, hflip=True)
    for i in range(3):
        img = np.zeros((H, W, 3), np.uint8)
        img[:, : W // 2] = 200
        for p in stream.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
            out.mux(p)
    for p in stream.encode(None):
        out.mux(p)
    out.close()
    with caplog.at_level(logging.WARNING, logger="vidpipe.decode.rotation"):
        info = probe(path)
    assert info.rotation == 0 and "mirrors" in caplog.text
    got, _ = upright(path)
    assert got.shape == (3, H, W, 3)


@pytest.mark.gpu
@pytest.mark.nvdec
@pytest.mark.parametrize("rotation", [90, 270])
def test_nvdec_turns_frames_like_the_cpu(make_clip, rotation):
    clip = make_clip(".mp4", width=320, height=192, frames=12, gop=4, rotation=rotation)
    with vidpipe.open_video(clip.path, device="cuda", decoder="nvdec") as video:
        assert video.choice.name == "nvdec"
        gpu = torch.cat([b.data.cpu() for b in video.batches(8)])
    with vidpipe.open_video(clip.path, device="cpu") as video:
        cpu = torch.cat([b.data for b in video.batches(8)])
    assert gpu.shape == cpu.shape == (12, 3, 320, 192)
    assert (gpu.int() - cpu.int()).abs().float().mean().item() <= 1.0
