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


@pytest.mark.parametrize("mirror", [False, True])
@pytest.mark.parametrize("fmt", ["nv12", "p010"])
@pytest.mark.parametrize("degrees", [0, 90, 180, 270])
def test_yuv_batches_turn_plane_by_plane(fmt, degrees, mirror):
    """The NVDEC path's NV12/P010 batches: each plane turned (and flipped) like numpy does it."""
    rng = np.random.default_rng(degrees)
    dtype = np.uint8 if fmt == "nv12" else np.uint16
    h, w = 6, 10
    planes = [rng.integers(0, 255, s).astype(dtype) for s in ((h, w), (h // 2, w // 2), (h // 2, w // 2))]
    data = torch.stack([_nv12(*planes), _nv12(*(p[::-1].copy() for p in planes))])
    batch = FrameBatch(
        data=data, frames=tuple(FrameMeta("x", 0, i, None, h, w) for i in range(2)), format=fmt,
        color=ColorSpec("bt601", "limited"),
    )  # fmt: skip
    out = rotate_batch(batch, degrees, mirror=mirror)
    k = degrees // 90
    turned = [np.rot90(p, k) for p in planes]
    want = _nv12(*(t[:, ::-1].copy() if mirror else t.copy() for t in turned))
    assert out.format == fmt and torch.equal(out.data[0], want)
    assert out.frames[0].height == (w if k % 2 else h)
    rgb = FrameBatch(data=torch.from_numpy(np.stack([planes[0]] * 3).astype(np.uint8))[None], frames=batch.frames[:1])
    luma = want.numpy()[: out.frames[0].height].astype(np.uint8)
    assert np.array_equal(rotate_batch(rgb, degrees, mirror=mirror).data[0, 0].numpy(), luma)  # RGB turns alike


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


def _oriented_clip(path, degrees: float, *, hflip: bool = False, vflip: bool = False, frames: int = 3):
    """A 4:4:4 H.264 MP4 (chroma at full resolution: flips are exact) with the display matrix
    PyAV writes for ``degrees`` counter-clockwise then the flips, of an asymmetric picture."""
    out = av.open(str(path), "w")
    stream = out.add_stream("libx264", rate=10)
    stream.width, stream.height, stream.pix_fmt = W, H, "yuv444p"
    stream.set_display_rotation(degrees, hflip=hflip, vflip=vflip)
    img = np.full((H, W, 3), 40, np.uint8)
    img[: H // 3, : W // 4] = 255
    img[H // 2 :, W // 2 :, 1] = 200
    for _ in range(frames):
        for p in stream.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
            out.mux(p)
    for p in stream.encode(None):
        out.mux(p)
    out.close()
    return path


ORIENTATIONS = [(d, h, v) for d in (0, 90, 180, 270) for h, v in ((False, False), (True, False), (False, True))]


@pytest.mark.parametrize("degrees,hflip,vflip", ORIENTATIONS, ids=[f"{d}{'-h' * h}{'-v' * v}" for d, h, v in ORIENTATIONS])
def test_turned_and_mirrored_frames_match_ffmpeg(tmp_path, degrees, hflip, vflip):
    """Every orientation a display matrix can give (turns, mirrors): as the ffmpeg tool shows it."""
    path = _oriented_clip(tmp_path / "o.mp4", degrees, hflip=hflip, vflip=vflip)
    out = subprocess.run(
        [require("ffmpeg"), "-v", "error", "-i", str(path), "-f", "rawvideo", "-pix_fmt", "rgb24", "-"],
        capture_output=True, timeout=120, check=True,
    ).stdout
    got, metas = upright(path)
    assert got.shape[1:3] == ((W, H) if degrees in (90, 270) else (H, W))
    ref = np.frombuffer(out, np.uint8).reshape(got.shape)
    assert np.abs(got.astype(int) - ref.astype(int)).max() <= 8
    assert (metas[0].height, metas[0].width) == got.shape[1:3]


def test_mirror_is_a_turn_then_a_left_right_flip(tmp_path):
    """Independent of ffmpeg: 90 degrees then a horizontal flip is numpy's rot90 then [:, ::-1]."""
    path = _oriented_clip(tmp_path / "m.mp4", 90, hflip=True)
    info = probe(path)
    assert (info.rotation, info.extra["mirror"]) == (90, True)
    got, _ = upright(path)
    want = np.rot90(stored(path), 1, axes=(1, 2))[:, :, ::-1]
    assert np.array_equal(got, want)


def test_odd_angle_is_reported_not_applied(tmp_path, caplog):
    path = _oriented_clip(tmp_path / "odd.mp4", 45)
    with caplog.at_level(logging.WARNING, logger="vidpipe.decode.rotation"):
        info = probe(path)
    assert info.rotation == 0 and not info.extra["mirror"] and "45.0 degrees" in caplog.text
    got, _ = upright(path)
    assert np.array_equal(got, stored(path))


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
