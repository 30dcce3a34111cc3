"""``decoder="auto"`` and short files: PyAV where NVDEC's start would cost more than it gives back
(the measured limits of :mod:`vidpipe.decode.auto_choice`)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from vidpipe.decode import auto_choice
from vidpipe.decode.auto_choice import PYAV_FRAMES_BELOW, frames_to_decode, pyav_finishes_first
from vidpipe.decode.base import DecodeOptions
from vidpipe.decode.probe import probe

CUDA = torch.device("cuda")  # a device object only


@pytest.fixture
def clip(make_clip):
    return make_clip(".mp4", frames=60, gop=10, width=160, height=96, fps=30)


@pytest.fixture
def cold(monkeypatch):
    """No NVDEC session started in this process (the pool's state is the GPU test's business)."""
    monkeypatch.setattr(auto_choice, "_nvdec_started", lambda info, device: False)


def _sized(info, width, height, frames):
    return dataclasses.replace(info, width=width, height=height, frame_count=frames)


def test_frames_to_decode_follows_the_selection(clip):
    info = probe(clip.path)
    assert info.frame_count == 60
    assert frames_to_decode(info, None) == 60
    assert frames_to_decode(info, DecodeOptions(start=1.0)) == 30
    assert frames_to_decode(info, DecodeOptions(end=0.5)) == 15
    assert frames_to_decode(info, DecodeOptions(max_frames=10, frame_skip=2)) == 20  # skipped frames are decoded too
    assert frames_to_decode(info, DecodeOptions(start=5.0)) == 0
    assert frames_to_decode(dataclasses.replace(info, frame_count=None), None) is None


@pytest.mark.parametrize(("width", "height", "limit"), [(1920, 1080, 300), (3840, 2160, 300), (1280, 720, 2000),
                                                         (640, 360, 2400), (160, 96, 2400)])
def test_the_measured_limits_by_size(clip, cold, width, height, limit):
    info = probe(clip.path)
    short = _sized(info, width, height, limit - 1)
    why = pyav_finishes_first(short, CUDA, limit - 1, cpus=16)
    assert why is not None and f"{limit - 1} frames of {width}x{height}" in why and f"fewer than {limit}" in why
    assert pyav_finishes_first(short, CUDA, limit, cpus=16) is None


def test_fewer_cores_shrink_the_limits(clip, cold):
    info = _sized(probe(clip.path), 1920, 1080, 200)
    assert pyav_finishes_first(info, CUDA, 140, cpus=4) is not None  # 300 * 4 / 8 = 150
    assert pyav_finishes_first(info, CUDA, 150, cpus=4) is None
    assert pyav_finishes_first(info, CUDA, 299, cpus=64) is not None  # more cores than measured: not raised


def test_no_rule_without_a_length_or_once_nvdec_has_started(clip, cold, monkeypatch):
    info = probe(clip.path)
    assert pyav_finishes_first(info, CUDA, None, cpus=16) is None  # unknown, or a run of several inputs
    monkeypatch.setattr(auto_choice, "_nvdec_started", lambda info, device: True)
    assert pyav_finishes_first(info, CUDA, 10, cpus=16) is None


def test_limits_are_ordered_largest_size_first():
    sizes = [least for least, _ in PYAV_FRAMES_BELOW]
    assert sizes == sorted(sizes, reverse=True) and sizes[-1] == 0


# -- on the GPU: the run's choice, as a user sees it in the summary -------------------------------


@pytest.fixture
def fresh_nvdec():
    """No NVDEC session pooled and no decoder process running, before and after."""
    from vidpipe.decode.nvdec_pool import clear
    from vidpipe.decode.procpool import close_pools

    close_pools()
    clear()
    yield
    close_pools()
    clear()


@pytest.mark.gpu
@pytest.mark.nvdec
def test_a_short_file_alone_is_read_with_pyav_until_nvdec_has_started(make_clip, fresh_nvdec):
    import vidpipe

    path = make_clip(".mp4", frames=24, gop=12, width=1920, height=1080).path
    run = vidpipe.detect(path, device="cuda")
    assert len(list(run)) == 24
    st = run.states[0]
    assert st.decoder == "pyav" and "a short file (24 frames of 1920x1080" in st.decoder_reason, st.decoder_reason

    strict = vidpipe.detect(path, device="cuda", strict_gpu=True)  # the rule never leaves the GPU
    assert len(list(strict)) == 24 and strict.states[0].decoder == "nvdec", strict.states[0].decoder_reason

    again = vidpipe.detect(path, device="cuda")  # its sessions are pooled now: nothing left to start
    assert len(list(again)) == 24
    assert again.states[0].decoder == "nvdec", again.states[0].decoder_reason

    from vidpipe.decode.nvdec_pool import clear

    clear()
    two = vidpipe.detect([path, path], device="cuda")  # several inputs share NVDEC's sessions
    assert len(list(two)) == 48
    assert [s.decoder for s in two.states] == ["nvdec", "nvdec"], [s.decoder_reason for s in two.states]
