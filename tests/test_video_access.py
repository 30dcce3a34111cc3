"""Frame access on ``open_video`` (torchcodec's names): ``len(video)``, ``video[i]``, slices,
``get_frames_at``, ``get_frames_in_range``, ``get_frames_played_at``.

The reference is independent of vidpipe: PyAV's plain sequential decode, frame ``i`` of
``container.decode(video=0)`` converted with ``to_ndarray(format="rgb24")``, and its timestamp.
Clips: constant-rate H.264 with B-frames (MP4), HEVC (Matroska), VP9 (WebM), MPEG-TS (which starts
at a non-zero timestamp), variable-rate H.264 (MP4 and Matroska, written here with irregular
timestamps) and the bundled bikes.mp4.
"""

from __future__ import annotations

import random
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest
from media import _render, read_stamp

import vidpipe
from vidpipe.errors import ConfigError
from vidpipe.frame_access import OutOfRangeError

VFR_STEPS_MS = (40, 40, 20, 60, 33, 100, 40, 17, 40, 80)  # repeated: frame intervals of the VFR clips


def make_vfr(path: Path, *, frames: int = 45, gop: int = 12) -> Path:
    """H.264 with B-frames, time base 1/1000, frame intervals cycling through VFR_STEPS_MS."""
    out = av.open(str(path), "w")
    try:
        stream = out.add_stream("libx264", rate=25, options={"bf": "2", "g": str(gop), "keyint_min": str(gop),
                                                               "sc_threshold": "0", "crf": "16"})  # fmt: skip
        stream.width, stream.height, stream.pix_fmt = 160, 96, "yuv420p"
        stream.codec_context.time_base = Fraction(1, 1000)
        pts = 0
        for i in range(frames):
            rgb, _ = _render("boxes", i, 160, 96, frames, stamp=True)
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p")
            frame.pts, frame.time_base = pts, Fraction(1, 1000)
            pts += VFR_STEPS_MS[i % len(VFR_STEPS_MS)]
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    finally:
        out.close()
    return path


def reference(path) -> tuple[list[np.ndarray], list[float]]:
    """Every frame of a plain PyAV decode, as (H, W, 3) rgb24, and its time from the stream start."""
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        start = s.start_time or 0
        frames = list(c.decode(s))
        times = [None if f.pts is None else float((f.pts - start) * s.time_base) for f in frames]
        return [f.to_ndarray(format="rgb24") for f in frames], times


@pytest.fixture(scope="module")
def clips(tmp_path_factory, make_clip, bikes_path):
    d = tmp_path_factory.mktemp("access")
    return {
        "cfr-h264.mp4": make_clip(".mp4", codec="h264", frames=40, gop=10, bframes=2).path,
        "cfr-hevc.mkv": make_clip(".mkv", codec="hevc", frames=30, gop=8).path,
        "cfr-vp9.webm": make_clip(".webm", codec="vp9", frames=24, gop=6).path,
        "cfr-h264.ts": make_clip(".ts", codec="h264", frames=30, gop=10).path,
        "vfr-h264.mp4": make_vfr(d / "vfr.mp4"),
        "vfr-h264.mkv": make_vfr(d / "vfr.mkv"),
        "bikes.mp4": bikes_path,
    }


@pytest.fixture(scope="module")
def references(clips):
    return {name: reference(path) for name, path in clips.items()}


NAMES = ["cfr-h264.mp4", "cfr-hevc.mkv", "cfr-vp9.webm", "cfr-h264.ts", "vfr-h264.mp4", "vfr-h264.mkv", "bikes.mp4"]


def _check(batch, numbers, ref, times):
    assert [m.index for m in batch.frames] == numbers
    for row, n in enumerate(numbers):
        np.testing.assert_array_equal(batch.data[row].permute(1, 2, 0).cpu().numpy(), ref[n], err_msg=f"frame {n}")
        assert batch.frames[row].pts == pytest.approx(times[n], abs=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_frames_by_number_equal_a_sequential_decode(clips, references, name):
    ref, times = references[name]
    n = len(ref)
    rng = random.Random(name)
    with vidpipe.open_video(clips[name], device="cpu") as video:
        assert len(video) == n
        picks = [0, n - 1, n // 2, 1] + rng.sample(range(n), min(n, 12)) + [3, 3]
        batch = video.get_frames_at(picks)  # out of order, with repeats
        _check(batch, picks, ref, times)
        for i in rng.sample(range(n), 6) + [n - 1, 0]:  # one at a time: seeks back and forth
            np.testing.assert_array_equal(video[i].permute(1, 2, 0).numpy(), ref[i], err_msg=f"video[{i}]")
        np.testing.assert_array_equal(video[-1].permute(1, 2, 0).numpy(), ref[-1])
        np.testing.assert_array_equal(video[-n].permute(1, 2, 0).numpy(), ref[0])
        sl = video[2 : n - 1 : 3]
        assert sl.shape == (len(range(2, n - 1, 3)), 3, *ref[0].shape[:2])
        for row, i in enumerate(range(2, n - 1, 3)):
            np.testing.assert_array_equal(sl[row].permute(1, 2, 0).numpy(), ref[i])
        _check(video.get_frames_in_range(n - 7, n, 2), list(range(n - 7, n, 2)), ref, times)
        assert video[n:].shape[0] == 0 and video[::-1].shape[0] == n


@pytest.mark.parametrize("name", NAMES)
def test_frames_by_time_equal_a_sequential_decode(clips, references, name):
    ref, times = references[name]
    n = len(ref)
    with vidpipe.open_video(clips[name], device="cpu") as video:
        seconds, want = [], []
        for i in range(0, n - 1, max(1, n // 12)):
            gap = times[i + 1] - times[i]
            seconds += [times[i], times[i] + gap / 2, times[i + 1] - 1e-4]
            want += [i, i, i]
        seconds.append(times[-1])
        want.append(n - 1)
        batch = video.get_frames_played_at(seconds)
        _check(batch, want, ref, times)


def test_seeking_decodes_only_from_the_keyframe_before(make_clip):
    clip = make_clip(".mp4", codec="h264", frames=40, gop=10, bframes=2)
    ref, _ = reference(clip.path)
    with vidpipe.open_video(clip.path, device="cpu") as video:
        frame = video[35]
        reader = video._frames
        assert read_stamp(frame.numpy()) == 35
        np.testing.assert_array_equal(frame.permute(1, 2, 0).numpy(), ref[35])
        assert reader.frames_decoded <= 10  # keyframe 30 .. 35 plus the B-frame delay, not 36 frames
        before = reader.frames_decoded
        video.get_frames_at([36, 38])  # ahead in the same GOP: decodes on, no seek
        assert reader.frames_decoded - before <= 4


def test_access_ignores_the_iteration_options_and_iteration_still_works(make_clip):
    clip = make_clip(".mp4", codec="h264", frames=40, gop=10, bframes=2)
    with vidpipe.open_video(clip.path, device="cpu", frame_skip=5, start=0.4) as video:
        assert len(video) == 40 and read_stamp(video[3].numpy()) == 3
        # iteration numbers frames within the selected range (frame 0 is the first at or after
        # start, as `ffmpeg -ss` numbers them); the pictures are the file's frames 10, 15, ...
        batches = list(video.batches(4))
        assert [m.index for b in batches for m in b.frames] == [0, 5, 10, 15, 20, 25]
        stamps = [read_stamp(img.numpy()) for b in batches for img in b.data]
        assert stamps == [10, 15, 20, 25, 30, 35]
        assert read_stamp(video[0].numpy()) == 0


def test_out_of_range_and_bad_arguments(make_clip):
    clip = make_clip(".mp4", codec="h264", frames=40, gop=10, bframes=2)
    with vidpipe.open_video(clip.path, device="cpu") as video:
        with pytest.raises(IndexError, match=r"video\[40\] is out of range: .* has 40 frames \(0\.\.39"):
            video[40]
        with pytest.raises(OutOfRangeError, match=r"video\[-41\] is out of range"):
            video[-41]
        with pytest.raises(IndexError, match="frame indices=100 is out of range"):
            video.get_frames_at([1, 100])
        with pytest.raises(IndexError, match="frame start=45 is out of range"):
            video.get_frames_in_range(45, 46)
        assert len(video.get_frames_in_range(38, 40)) == 2  # stop may be len(video)
        with pytest.raises(IndexError, match=r"no frame .* is shown at 1.6 s: its frames cover \[0, 1.6\) seconds"):
            video.get_frames_played_at([0.5, 1.6])
        with pytest.raises(IndexError, match="shown at -0.1 s"):
            video.get_frames_played_at([-0.1])
        with pytest.raises(TypeError, match="expected an integer frame number"):
            video["1"]
        with pytest.raises(TypeError, match="expected an integer frame number"):
            video[1.0]
        with pytest.raises(ConfigError, match="invalid seconds='1'"):
            video.get_frames_played_at(["1"])
        with pytest.raises(ConfigError, match="invalid indices"):
            video.get_frames_at(3)
        with pytest.raises(ConfigError, match="step"):
            video.get_frames_in_range(0, 10, 0)
        # the errors left the reader usable
        assert read_stamp(video[39].numpy()) == 39


def test_tensor_arguments(make_clip):
    import torch

    clip = make_clip(".mp4", codec="h264", frames=40, gop=10, bframes=2)
    with vidpipe.open_video(clip.path, device="cpu") as video:
        batch = video.get_frames_at(torch.tensor([5, 1]))
        assert [read_stamp(x.numpy()) for x in batch.data] == [5, 1]
        batch = video.get_frames_played_at(torch.tensor([0.0, 0.5]))
        assert [m.index for m in batch.frames] == [0, 12]


@pytest.mark.gpu
@pytest.mark.parametrize("decoder", ["pyav", pytest.param("nvdec", marks=pytest.mark.nvdec)])
def test_frames_on_cuda_equal_a_sequential_decode(clips, references, decoder):
    import torch

    for name in ("cfr-h264.mp4", "vfr-h264.mkv", "bikes.mp4"):
        ref, times = references[name]
        n = len(ref)
        with vidpipe.open_video(clips[name], device="cuda", decoder=decoder) as video:
            assert len(video) == n
            frame = video[n // 2]
            assert frame.device.type == "cuda" and frame.dtype == torch.uint8
            np.testing.assert_array_equal(frame.permute(1, 2, 0).cpu().numpy(), ref[n // 2])
            picks = [n - 1, 0, 7, 7, n // 3]
            batch = video.get_frames_at(picks)
            assert batch.data.device.type == "cuda"
            _check(batch, picks, ref, times)
            batch = video.get_frames_played_at([times[5], times[-1]])
            assert batch.data.device.type == "cuda"
            _check(batch, [5, n - 1], ref, times)
            assert video[1:4].device.type == "cuda"
            if decoder == "nvdec":
                assert video.choice.name == "nvdec"  # frames by number come from PyAV, then move
            else:
                assert sum(len(b) for b in video.batches(16)) == n  # iteration unaffected


def test_size_change_mid_stream(tmp_path):
    from media import make_size_change

    from vidpipe.errors import UnsupportedError

    clip = make_size_change(tmp_path / "sizes.mkv", sizes=((64, 48), (96, 64)), frames_each=5)
    ref, _ = reference(clip.path)
    with vidpipe.open_video(clip.path, device="cpu") as video:
        assert len(video) == len(ref) == 10
        for i in (7, 2, 9, 0):
            np.testing.assert_array_equal(video[i].permute(1, 2, 0).numpy(), ref[i])
        assert video.get_frames_at([5, 9]).data.shape == (2, 3, 64, 96)
        with pytest.raises(UnsupportedError, match="different sizes .*64x48, 96x64"):
            video.get_frames_at([4, 5])


def test_stream_without_timestamps_is_counted_from_the_start(make_clip, tmp_path):
    """A raw H.264 elementary stream has no timestamps: frames are numbered as decoded."""
    from vidpipe.errors import UnsupportedError

    clip = make_clip(".mp4", codec="h264", frames=30, gop=10, bframes=2)
    raw = tmp_path / "raw.h264"
    with av.open(str(clip.path)) as src, av.open(str(raw), "w", format="h264") as dst:
        s_in = src.streams.video[0]
        s_out = dst.add_stream_from_template(s_in)
        bsf = av.bitstream.BitStreamFilterContext("h264_mp4toannexb", in_stream=s_in)
        for pkt in src.demux(s_in):
            for out in bsf.filter(pkt if pkt.size else None):
                out.stream = s_out
                dst.mux(out)
    ref, _ = reference(raw)
    assert len(ref) == 30
    with vidpipe.open_video(raw, device="cpu") as video:
        assert not video._frames.table.exact
        assert len(video) == 30
        for i in (20, 3, 29, 0, 17):
            np.testing.assert_array_equal(video[i].permute(1, 2, 0).numpy(), ref[i], err_msg=f"video[{i}]")
        assert [m.index for m in video.get_frames_at([12, 11]).frames] == [12, 11]
        with pytest.raises(UnsupportedError, match="timestamps are missing or repeated"):
            video.get_frames_played_at([0.5])


def test_truncated_file_gives_frames_or_a_clear_error(make_clip, tmp_path):
    from media import truncate

    from vidpipe.errors import DecodeError

    clip = make_clip(".mkv", codec="h264", frames=60, gop=10)
    cut = truncate(clip.path, 0.6, dst=tmp_path / "cut.mkv")
    ref, _ = reference(cut)
    with vidpipe.open_video(cut, device="cpu") as video:
        n = len(video)
        assert len(ref) - 1 <= n < 60
        for i in [*range(n - 1, n - 4, -1), 0, 5]:
            if i < len(ref):
                np.testing.assert_array_equal(video[i].permute(1, 2, 0).numpy(), ref[i], err_msg=f"video[{i}]")
            else:
                with pytest.raises(DecodeError, match=f"frame {i} could not be decoded"):
                    video[i]
        assert bool(video)
