"""PyAVDecoder on generated clips: counts, numbering, timestamps, selection, colour, damage."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import device_params
from media import BOX_COLORS, available_codecs, corrupt_middle, make_size_change, read_stamp, truncate

from vidpipe.decode.base import DecodeOptions
from vidpipe.decode.pyav import PyAVDecoder
from vidpipe.errors import ConfigError, DecodeError


def decode(path, batch_size=8, device="cpu", **options):
    dec = PyAVDecoder(str(path), device=device, options=DecodeOptions(**options))
    batches = list(dec.batches(batch_size))
    return dec, batches


def frames_of(batches):
    """``[(index, pts, rgb (3, H, W) numpy)]`` over all batches."""
    out = []
    for b in batches:
        data = b.data.cpu().numpy()
        for i, m in enumerate(b.frames):
            out.append((m.index, m.pts, data[i]))
    return out


def box_error(rgb_chw, clip, index):
    """Largest channel error of the median colour inside each box of frame ``index``."""
    rgb = rgb_chw.transpose(1, 2, 0)
    worst = 0.0
    for name, (x1, y1, x2, y2) in clip.boxes[index].items():
        inner = rgb[y1 + 2 : y2 - 2, x1 + 2 : x2 - 2].reshape(-1, 3).astype(np.int32)
        worst = max(worst, float(np.abs(np.median(inner, axis=0) - BOX_COLORS[name]).max()))
    return worst


def test_all_frames_in_order(make_clip):
    clip = make_clip(".mp4", frames=30, gop=10, width=160, height=96)
    dec, batches = decode(clip.path, batch_size=8)
    assert [len(b) for b in batches] == [8, 8, 8, 6]
    for b in batches:
        assert b.data.dtype == torch.uint8 and b.data.shape[1:] == (3, 96, 160)
        assert b.data.is_contiguous() and b.format == "rgb" and b.device.type == "cpu"
    frames = frames_of(batches)
    assert [f[0] for f in frames] == list(range(30))
    assert [f[1] for f in frames] == pytest.approx(list(clip.pts), abs=1e-6)
    assert [read_stamp(f[2]) for f in frames] == list(range(30))
    assert all(m.source == str(clip.path) and (m.height, m.width) == (96, 160) for b in batches for m in b.frames)
    assert dec.frames_decoded == dec.frames_delivered == 30
    assert dec.error is None and not dec.partial


@pytest.mark.parametrize("suffix", [".mp4", ".mkv"])
def test_with_audio_track(make_clip, suffix):
    clip = make_clip(suffix, frames=20, gop=10, audio=True)
    dec, batches = decode(clip.path)
    frames = frames_of(batches)
    assert [f[0] for f in frames] == list(range(20))
    assert [read_stamp(f[2]) for f in frames] == list(range(20))
    assert not dec.partial  # a container duration that includes the audio is not truncation


def test_iterating_yields_single_frames_and_batches_rerun(make_clip):
    clip = make_clip(".mp4", frames=30, gop=10, width=160, height=96)
    with PyAVDecoder(str(clip.path)) as dec:
        singles = list(dec)
        assert len(singles) == 30 and all(len(b) == 1 for b in singles)
        again = list(dec.batches(32))  # a second pass decodes from the start again
        assert [len(b) for b in again] == [30]
        assert torch.equal(again[0].data[5], singles[5].data[0])


def test_batch_size_is_validated(make_clip):
    dec = PyAVDecoder(str(make_clip(".mp4", frames=30, gop=10, width=160, height=96).path))
    with pytest.raises(ConfigError, match="batch_size"):
        next(dec.batches(0))


@pytest.mark.parametrize(
    "codec,suffix,kwargs",
    [
        ("h264", ".mkv", {}),
        ("hevc", ".mp4", {"colorspace": "bt709"}),
        ("vp9", ".webm", {"colorspace": "bt709"}),
        ("av1", ".mkv", {"colorspace": "bt709"}),
        ("mpeg4", ".avi", {}),
        ("mjpeg", ".avi", {"color_range": "full"}),
    ],
)
def test_codecs(make_clip, codec, suffix, kwargs):
    if codec not in available_codecs():
        pytest.skip(f"no {codec} encoder in this PyAV build")
    clip = make_clip(suffix, codec=codec, frames=20, gop=10, **kwargs)
    _, batches = decode(clip.path)
    frames = frames_of(batches)
    assert [f[0] for f in frames] == list(range(20))
    assert [f[1] for f in frames] == pytest.approx(list(clip.pts), abs=1.5e-3)
    assert [read_stamp(f[2]) for f in frames] == list(range(20))
    tol = 12 if codec == "av1" else 6
    assert max(box_error(f[2], clip, f[0]) for f in frames) <= tol


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(colorspace="bt601", color_range="limited"),
        dict(colorspace="bt709", color_range="limited"),
        dict(colorspace="bt709", color_range="full"),
        dict(colorspace="bt601", color_range="full"),
        dict(colorspace="bt2020", color_range="limited", pix_fmt="yuv420p10le"),
        dict(colorspace="bt709", color_range="limited", pix_fmt="yuv444p"),
        dict(colorspace="bt601", tag_color=False),  # untagged, < 720 lines: BT.601 limited assumed
    ],
    ids=lambda k: "-".join(str(v) for v in k.values()),
)
def test_colour(make_clip, kwargs):
    clip = make_clip(".mp4", frames=6, gop=6, width=160, height=96, **kwargs)
    frames = frames_of(decode(clip.path)[1])
    for index, _, rgb in frames:
        assert box_error(rgb, clip, index) <= 6, (index, kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(colorspace="bt601"),
        dict(colorspace="bt709", color_range="full"),
        dict(pix_fmt="yuv444p", colorspace="bt709"),
    ],
    ids=["bt601", "bt709-full", "444"],
)
def test_8bit_matches_pyav_rgb24_bit_for_bit(make_clip, kwargs):
    """The planar (gbrp) conversion equals PyAV's rgb24 reformat, the reference of ops.color."""
    import av

    clip = make_clip(".mp4", frames=6, gop=6, width=160, height=96, **kwargs)
    ours = frames_of(decode(clip.path)[1])
    spaces = {"bt601": 5, "bt709": 1}
    with av.open(str(clip.path)) as c:
        for (_, _, rgb), f in zip(ours, c.decode(video=0)):
            ref = f.reformat(
                format="rgb24",
                src_colorspace=spaces[clip.colorspace],
                src_color_range=1 if clip.color_range == "limited" else 2,
            ).to_ndarray()
            assert np.array_equal(rgb.transpose(1, 2, 0), ref)


def test_10bit_is_at_least_as_accurate_as_rgb24(make_clip):
    import av

    clip = make_clip(
        ".mp4", frames=2, gop=2, pix_fmt="yuv420p10le", colorspace="bt2020", pattern="bars", width=256, height=64
    )
    (_, _, rgb), _ = frames_of(decode(clip.path)[1])
    truth = clip.rgb(0).astype(np.int32)
    with av.open(str(clip.path)) as c:
        ref = next(c.decode(video=0)).reformat(format="rgb24", src_colorspace=9, src_color_range=1).to_ndarray()
    ours_err = np.abs(rgb.transpose(1, 2, 0).astype(np.int32) - truth)[16:].mean()
    ref_err = np.abs(ref.astype(np.int32) - truth)[16:].mean()
    assert ours_err <= ref_err + 0.05
    assert min(rgb[:, 40, 8].tolist()) >= 254  # the white bar is white (rgb24 gives 253)


def test_colour_untagged_hd_assumes_bt709(make_clip):
    clip = make_clip(".mp4", frames=2, gop=2, width=1280, height=720, colorspace="bt709", tag_color=False)
    (index, _, rgb), _ = frames_of(decode(clip.path, max_frames=2)[1])
    assert box_error(rgb, clip, index) <= 6


@pytest.mark.parametrize(
    "codec,suffix,pix_fmt", [("h264", ".mp4", "yuv444p"), ("vp9", ".webm", "yuv420p"), ("mpeg4", ".avi", "yuv420p")]
)
def test_odd_size(make_clip, codec, suffix, pix_fmt):
    clip = make_clip(suffix, codec=codec, pix_fmt=pix_fmt, width=321, height=241, frames=6, gop=6, colorspace="bt601")
    _, batches = decode(clip.path)
    assert batches[0].data.shape[1:] == (3, 241, 321)
    frames = frames_of(batches)
    assert [read_stamp(f[2]) for f in frames] == list(range(6))
    assert max(box_error(f[2], clip, f[0]) for f in frames) <= 6


def test_frame_skip(make_clip):
    clip = make_clip(".mp4", frames=30, gop=10, width=160, height=96)
    dec, batches = decode(clip.path, frame_skip=4)
    frames = frames_of(batches)
    assert [f[0] for f in frames] == list(range(0, 30, 4))
    assert [read_stamp(f[2]) for f in frames] == list(range(0, 30, 4))
    assert [f[1] for f in frames] == pytest.approx([clip.pts[i] for i in range(0, 30, 4)], abs=1e-6)
    assert dec.frames_decoded == 30 and dec.frames_delivered == 8


def test_max_frames_stops_early(make_clip):
    clip = make_clip(".mp4", frames=30, gop=10, width=160, height=96)
    dec, batches = decode(clip.path, max_frames=7, batch_size=4)
    assert [len(b) for b in batches] == [4, 3]
    assert [m.index for b in batches for m in b.frames] == list(range(7))
    assert dec.frames_decoded == 7 and not dec.partial
    dec, batches = decode(clip.path, max_frames=3, frame_skip=5)
    assert [m.index for b in batches for m in b.frames] == [0, 5, 10]
    assert dec.frames_decoded == 11


@pytest.mark.parametrize("suffix", [".mp4", ".mkv"])
def test_time_range_from_mid_gop(make_clip, suffix):
    """start=0.44 s is frame 11 of the file, one frame into the second GOP (keyframes every 10
    frames): it is frame 0 of the range, as ``ffmpeg -ss 0.44`` numbers it."""
    clip = make_clip(suffix, frames=30, gop=10, width=160, height=96)
    dec, batches = decode(clip.path, start=0.44, end=0.8)
    frames = frames_of(batches)
    assert [f[0] for f in frames] == list(range(9))
    assert [read_stamp(f[2]) for f in frames] == list(range(11, 20))
    assert frames[0][1] == pytest.approx(0.44, abs=1.5e-3)
    assert dec.frames_decoded < 20  # sought to the keyframe at frame 10, not decoded from 0
    assert not dec.partial


def test_time_range_with_stride_numbers_within_the_range(make_clip):
    """The stride keeps frames 0, N, 2N, ... of the range; their numbers stay range positions."""
    clip = make_clip(".mp4", frames=30, gop=10, width=160, height=96)
    frames = frames_of(decode(clip.path, start=0.5, frame_skip=3)[1])  # from frame 13 (0.52 s)
    assert [f[0] for f in frames] == [0, 3, 6, 9, 12, 15]
    assert [read_stamp(f[2]) for f in frames] == [13, 16, 19, 22, 25, 28]


def test_end_only(make_clip):
    clip = make_clip(".mp4", frames=30, gop=10, width=160, height=96)
    dec, batches = decode(clip.path, end=0.2)
    assert [m.index for b in batches for m in b.frames] == [0, 1, 2, 3, 4]
    assert not dec.partial


def test_start_past_the_end_gives_nothing(make_clip):
    clip = make_clip(".mp4", frames=30, gop=10, width=160, height=96)
    dec, batches = decode(clip.path, start=5.0)
    assert batches == [] and dec.frames_delivered == 0


def test_size_change_starts_a_new_batch(tmp_path):
    clip = make_size_change(tmp_path / "s.mkv", sizes=((64, 48), (96, 64)), frames_each=5)
    _, batches = decode(clip.path, batch_size=4)
    assert [tuple(b.data.shape) for b in batches] == [(4, 3, 48, 64), (1, 3, 48, 64), (4, 3, 64, 96), (1, 3, 64, 96)]
    frames = frames_of(batches)
    assert [f[0] for f in frames] == list(range(10))
    assert [read_stamp(f[2]) for f in frames] == list(range(10))


@pytest.mark.parametrize(
    "suffix,codec,faststart", [(".mkv", "h264", False), (".mp4", "h264", True), (".webm", "vp9", False)]
)
def test_truncated_file_is_partial(make_clip, tmp_path, suffix, codec, faststart):
    clip = make_clip(suffix, codec=codec, frames=60, gop=10, faststart=faststart)
    cut = truncate(clip.path, 0.6, dst=tmp_path / f"cut{suffix}")
    dec, batches = decode(cut)
    frames = frames_of(batches)
    assert 10 < len(frames) < 60
    assert [f[0] for f in frames] == list(range(len(frames)))
    assert [read_stamp(f[2]) for f in frames] == list(range(len(frames)))
    assert dec.partial and isinstance(dec.error, DecodeError)
    assert str(cut) in str(dec.error) and "kept" in str(dec.error)


@pytest.mark.parametrize(
    "suffix,codec", [(".mp4", "h264"), (".mkv", "h264"), (".mkv", "hevc"), (".avi", "mpeg4"), (".avi", "mjpeg")]
)
def test_corrupt_middle_never_crashes(make_clip, tmp_path, suffix, codec):
    """Damage mid-file gives either concealed frames or a partial result, numbered consistently."""
    clip = make_clip(suffix, codec=codec, frames=60, gop=10)
    bad = corrupt_middle(clip.path, dst=tmp_path / f"bad{suffix}")
    dec, batches = decode(bad)
    indices = [m.index for b in batches for m in b.frames]
    assert len(indices) > 10
    assert indices == sorted(set(indices)) and indices[0] == 0 and indices[-1] < 60
    assert read_stamp(frames_of(batches[:1])[0][2]) == 0
    if dec.partial:
        assert isinstance(dec.error, DecodeError) and str(bad) in str(dec.error)
    else:  # decoded to the end; frames the demuxer lost with the damaged data are reported missing
        assert indices[-1] >= 55 or indices[-1] + dec.frames_missing + dec.timestamp_gaps >= 55


@pytest.mark.parametrize("device", device_params())
def test_device(make_clip, device):
    clip = make_clip(".mp4", frames=30, gop=10, width=160, height=96)
    _, batches = decode(clip.path, device=device, batch_size=16)
    assert all(b.data.device.type == device for b in batches)
    assert sum(len(b) for b in batches) == 30
    cpu = frames_of(decode(clip.path, device="cpu", batch_size=16)[1])
    assert np.array_equal(batches[0].data[3].cpu().numpy(), cpu[3][2])


def test_bikes(bikes_path):
    dec, batches = decode(bikes_path, batch_size=32)
    assert dec.info.width == 640 and dec.info.height == 272
    assert dec.info.fps == pytest.approx(25.0) and dec.info.frame_count == 250
    assert sum(len(b) for b in batches) == 250
    assert [m.index for b in batches for m in b.frames] == list(range(250))
    assert batches[-1].frames[-1].pts == pytest.approx(249 / 25)
    assert batches[0].data.shape == (32, 3, 272, 640)
    assert not dec.partial
