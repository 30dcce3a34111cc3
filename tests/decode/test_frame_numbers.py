"""Frame numbers are positions (0, 1, 2, ... in presentation order within the selected range), never
derived from timestamps; missing frames are reported only where data is really missing.

The reference numbering is FFmpeg's ``n`` (every decoded frame counts once); the file's frames and
their true times come from the generator (:func:`media.vfr_times`), and the stamp drawn into each
frame says which source frame a decoder delivered.
"""

from __future__ import annotations

import logging

import pytest
from media import make_video, read_stamp, vfr_times

from vidpipe.decode.base import DecodeOptions
from vidpipe.decode.parallel import PyAVParallelDecoder
from vidpipe.decode.pyav import PyAVDecoder
from vidpipe.decode.timing import FrameNumbers, timestamp_gaps

MISSING = ("missing", "could not be decoded", "did not come out")


def _decode(dec, batch_size=8):
    out = []
    for b in dec.batches(batch_size):
        out += [(m.index, m.pts, read_stamp(b.data[i].cpu().numpy())) for i, m in enumerate(b.frames)]
    return out


def _warnings(caplog):
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


# ----------------------------------------------------------------------------- pure logic


def test_constant_rate_without_gaps_reports_nothing():
    assert timestamp_gaps([i / 25 for i in range(50)]).missing == 0
    assert timestamp_gaps([i / 25 for i in range(50)]).interval == pytest.approx(0.04)
    # Matroska rounds 30 fps times to milliseconds: 33, 34, 33 ms steps are still one interval
    assert timestamp_gaps([round(i / 30, 3) for i in range(60)]).missing == 0


def test_constant_rate_gap_counts_the_missing_frames():
    times = [i / 25 for i in range(50) if i not in (20, 21, 22, 40)]
    gaps = timestamp_gaps(times)
    assert (gaps.missing, gaps.gaps) == (4, 2) and gaps.first_at == pytest.approx(23 / 25)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_variable_frame_rate_is_never_missing_anything(seed):
    assert timestamp_gaps(vfr_times(56, fps=30, seed=seed)).missing == 0
    # 30 fps, then the camera drops to 15 fps for a while: whole multiples, but irregular
    times = [i / 30 for i in range(40)] + [40 / 30 + 2 * (i + 1) / 30 for i in range(16)]
    assert timestamp_gaps(times).missing == 0
    # jittery phone clock around 30 fps
    assert timestamp_gaps([i / 30 + (0.002 if i % 3 == 1 else 0.0) for i in range(60)]).missing == 0


def test_frame_numbers_rank_packets_and_skip_lost_ones():
    num = FrameNumbers()
    for t in (0.0, 0.3, 0.1, 0.2, 0.6, 0.4, 0.5):  # decode order with B-frames
        num.packet(t)
    # the frame at 0.2 never comes out (damaged): its number is skipped, the others keep theirs
    assert [num.frame(t) for t in (0.0, 0.1, 0.3, 0.4, 0.5, 0.6)] == [0, 1, 3, 4, 5, 6]
    assert num.finish() == 1 and num.lost_at == pytest.approx(0.3)


def test_frame_numbers_count_from_start():
    num = FrameNumbers(start=0.25)
    for t in (0.1, 0.2, 0.3, 0.35):
        num.packet(t)
    assert [num.frame(t) for t in (0.1, 0.2, 0.3, 0.35)] == [None, None, 0, 1]
    assert num.finish() == 0


def test_frame_numbers_without_timestamps_count_frames():
    num = FrameNumbers()
    num.packet(None)
    assert [num.frame(None), num.frame(None), num.frame(None)] == [0, 1, 2]


# ------------------------------------------------------------------------------ real files


@pytest.fixture(scope="module", params=[".mp4", ".mkv"])
def phone_clip(tmp_path_factory, request):
    """A phone-style VFR clip: 56 frames at irregular intervals (1 to 3 frame durations at 30 fps),
    H.264 with B-frames, keyframes every 10 frames; MP4 on a 1/90000 clock, or Matroska (1 ms),
    whose muxer announces a default 25 fps that FFmpeg then reports as both average and base rate:
    the stream *looks* constant-rate (the file that used to get frames 0, 2, 4, ... 86 and a false
    "frame(s) missing" warning)."""
    path = tmp_path_factory.mktemp("vfr") / f"phone{request.param}"
    return make_video(path, frames=56, timestamps=vfr_times(56, fps=30), gop=10, width=160, height=96)


def _parallel(path, options=None):
    return PyAVParallelDecoder(str(path), options=options, workers=3, segment_frames=10)


@pytest.mark.parametrize("backend", ["pyav", "parallel"])
def test_vfr_phone_clip_numbers_frames_0_to_n(phone_clip, backend, caplog):
    caplog.set_level(logging.WARNING)
    dec = PyAVDecoder(phone_clip.path) if backend == "pyav" else _parallel(phone_clip.path)
    got = _decode(dec)
    assert [g[0] for g in got] == list(range(56))
    assert [g[2] for g in got] == list(range(56))  # the frames themselves, in order
    assert [g[1] for g in got] == pytest.approx(list(phone_clip.pts), abs=1.5e-3)  # true times (ms in mkv)
    assert dec.frames_missing == 0 and dec.timestamp_gaps == 0 and not dec.partial
    assert not [w for w in _warnings(caplog) if any(m in w for m in MISSING)], _warnings(caplog)


@pytest.mark.parametrize("backend", ["pyav", "parallel"])
def test_vfr_start_and_stride_count_within_the_range(phone_clip, backend):
    """start selects by time; frame 0 is the first frame at or after it; the stride keeps
    frames 0, N, 2N, ... of the range; max_frames counts kept frames."""
    times = phone_clip.pts
    first = next(i for i, t in enumerate(times) if t >= 1.0)
    last = max(i for i, t in enumerate(times) if t < 2.0)
    opts = DecodeOptions(start=1.0, end=2.0, frame_skip=3, max_frames=5)
    dec = PyAVDecoder(phone_clip.path, options=opts) if backend == "pyav" else _parallel(phone_clip.path, opts)
    got = _decode(dec)
    want = list(range(0, last - first + 1, 3))[:5]
    assert [g[0] for g in got] == want
    assert [g[2] for g in got] == [first + k for k in want]
    assert [g[1] for g in got] == pytest.approx([times[first + k] for k in want], abs=1.5e-3)


@pytest.mark.parametrize("backend", ["pyav", "parallel"])
def test_constant_rate_gap_warns_and_keeps_counting(tmp_path, backend, caplog):
    """A 25 fps recording that lost 3 frames (its timestamps skip them): a warning naming the
    gap, and frames still numbered 0, 1, 2, ... as they are in the file."""
    caplog.set_level(logging.WARNING)
    times = tuple(i / 25 for i in range(40) if i not in (20, 21, 22))
    clip = make_video(tmp_path / "gap.mp4", frames=len(times), timestamps=times, fps=25, gop=10)
    dec = PyAVDecoder(clip.path) if backend == "pyav" else _parallel(clip.path)
    got = _decode(dec)
    assert [g[0] for g in got] == list(range(37)) and [g[2] for g in got] == list(range(37))
    warned = [w for w in _warnings(caplog) if "3 frame(s) missing from the file" in w]
    assert warned and "0.920s" in warned[0], _warnings(caplog)
    assert dec.timestamp_gaps == 3 and dec.frames_missing == 0  # missing from the file, none lost decoding


@pytest.mark.gpu
@pytest.mark.nvdec
def test_vfr_phone_clip_on_nvdec(tmp_path, caplog):
    """The same numbering on NVDEC (segment-parallel sessions over the packet scan)."""
    import vidpipe

    caplog.set_level(logging.WARNING)
    times = vfr_times(56, fps=30)
    clip = make_video(tmp_path / "phone.mp4", frames=56, timestamps=times, gop=10, width=256, height=144)
    with vidpipe.open_video(str(clip.path), device="cuda", decoder="nvdec", strict_gpu=True) as dec:
        got = _decode(dec)
        missing = dec.frames_missing
    assert [g[0] for g in got] == list(range(56)) and [g[2] for g in got] == list(range(56))
    assert [g[1] for g in got] == pytest.approx(list(clip.pts), abs=1e-4)
    assert missing == 0
    assert not [w for w in _warnings(caplog) if any(m in w for m in MISSING)], _warnings(caplog)
