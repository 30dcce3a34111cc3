"""vidpipe.open_video: the public entry for frames without a model."""

from __future__ import annotations

import pytest
from media import make_empty, read_stamp, truncate

import vidpipe
from vidpipe.errors import ConfigError, DecodeError, SourceError


def test_open_video_batches(make_clip):
    clip = make_clip(".mp4", frames=30, gop=10, width=160, height=96)
    with vidpipe.open_video(clip.path, device="cpu") as video:
        assert video.info.frame_count == 30 and video.info.width == 160
        assert video.choice.name == "pyav"
        batches = list(video.batches(16))
    assert [b.data.shape[0] for b in batches] == [16, 14]
    assert [m.index for b in batches for m in b.frames] == list(range(30))


def test_open_video_options(make_clip):
    clip = make_clip(".mp4", frames=30, gop=10, width=160, height=96)
    with vidpipe.open_video(str(clip.path), device="cpu", frame_skip=2, start=0.2, end=1.0, max_frames=5) as video:
        frames = [(m.index, read_stamp(b.data[i].numpy())) for b in video for i, m in enumerate(b.frames)]
    # start=0.2 s is frame 5 of the file, frame 0 of the range; the stride counts in the range
    assert frames == [(0, 5), (2, 7), (4, 9), (6, 11), (8, 13)]


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(frame_skip=0), "frame_skip"),
        (dict(frame_skip=1.5), "frame_skip"),
        (dict(max_frames=0), "max_frames"),
        (dict(start=-1), "start"),
        (dict(start=2.0, end=1.0), "end=1.0 must be after start=2.0"),
        (dict(decoder="opencv"), "decoder"),
        (dict(device="tpu"), "device"),
        (dict(strict_gpu="yes"), "strict_gpu"),
    ],
)
def test_invalid_options(make_clip, kwargs, match):
    clip = make_clip(".mp4", frames=30, gop=10, width=160, height=96)
    with pytest.raises(ConfigError, match=match):
        vidpipe.open_video(clip.path, **kwargs)


def test_options_are_keyword_only(make_clip):
    clip = make_clip(".mp4", frames=30, gop=10, width=160, height=96)
    with pytest.raises(TypeError):
        vidpipe.open_video(clip.path, "cpu")


def test_bad_source(tmp_path):
    with pytest.raises(SourceError, match="is empty"):
        vidpipe.open_video(make_empty(tmp_path / "e.mkv"), device="cpu")
    with pytest.raises(ConfigError, match="source"):
        vidpipe.open_video(None)


def test_partial_result_is_reported(make_clip, tmp_path):
    clip = make_clip(".mkv", frames=60, gop=10)
    cut = truncate(clip.path, 0.6, dst=tmp_path / "cut.mkv")
    with vidpipe.open_video(cut, device="cpu") as video:
        n = sum(len(b) for b in video.batches(32))
    assert 0 < n < 60
    assert video.partial and isinstance(video.error, DecodeError)


@pytest.mark.gpu
@pytest.mark.nvdec
def test_open_video_on_cuda_gives_rgb_like_the_cpu(make_clip):
    import torch

    import vidpipe

    clip = make_clip(width=320, height=240, frames=20, fps=10, gop=5)
    with vidpipe.open_video(clip.path, device="cuda", decoder="nvdec") as video:
        assert video.choice.name == "nvdec"
        batches = list(video.batches(8))
    assert all(b.format == "rgb" and b.data.device.type == "cuda" for b in batches)
    gpu = torch.cat([b.data.cpu() for b in batches])
    with vidpipe.open_video(clip.path, device="cpu") as video:
        cpu = torch.cat([b.data for b in video.batches(8)])
    assert gpu.shape == cpu.shape == (20, 3, 240, 320)
    assert (gpu.int() - cpu.int()).abs().float().mean().item() <= 1.0
    with vidpipe.open_video(clip.path, device="cuda", decoder="nvdec", output="native") as video:
        assert next(iter(video.batches(4))).format == "nv12"
