"""Kept frames on the GPU (skipped without CUDA; NVDEC ones without PyNvVideoCodec): NVDEC's kept
images (NV12 -> RGB at full size on the worker's stream) against PyAV's rgb24 of the same file, in
threads and in decoder processes; PyAV decoding on a CUDA run; frames still right after many
batches (their memory is not reused while a result holds them)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import vidpipe
from test_keep_frames import pyav_rgb  # PyAV's rgb24 of every frame, the reference

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module", autouse=True)
def _stop_decoder_processes():
    yield
    from vidpipe.decode.procpool import close_pools

    close_pools()


def _check(results, want, *, exact: bool) -> None:
    for r in results:
        img = r.image
        assert img is not None and img.is_cuda and img.dtype == torch.uint8
        assert tuple(img.shape) == (3, r.meta.height, r.meta.width)
        got = img.permute(1, 2, 0).cpu().numpy().astype(np.int16)
        diff = np.abs(got - want[r.index].astype(np.int16))
        if exact:
            assert diff.max() == 0, (r.index, diff.max())
        else:  # the same rule as tests/decode/test_nvdec.py::test_colour_matches_the_cpu_path
            assert diff.max() <= 1 and diff.mean() < 0.05, (r.index, diff.max(), diff.mean())


@pytest.mark.nvdec
@pytest.mark.parametrize("processes", [0, 2], ids=["threads", "processes"])
def test_nvdec_kept_frames_match_pyav_rgb(make_clip, processes):
    clip = make_clip(".mp4", frames=64, gop=8, width=320, height=192, colorspace="bt709")
    want = pyav_rgb(clip)
    run = vidpipe.detect(clip.path, device="cuda", decoder="nvdec", keep_frames=True, batch_size=8,
                         decoder_processes=processes)  # fmt: skip
    results = list(run)  # all kept to the end: 8 batches, more than the queues hold
    st = run.states[0]
    assert st.decoder == "nvdec", (st.decoder, st.decoder_reason)
    if processes:
        assert "decoder processes" in (st.decoder_reason or ""), st.decoder_reason
    assert [r.index for r in results] == list(range(64))
    torch.cuda.synchronize()
    _check(results, want, exact=False)


@pytest.mark.nvdec
def test_nvdec_two_sources_and_frame_skip(make_clip):
    a = make_clip(".mp4", frames=24, gop=6, width=320, height=192, colorspace="bt709")
    b = make_clip(".mp4", frames=24, gop=6, width=256, height=160)
    want = {str(a.path): pyav_rgb(a), str(b.path): pyav_rgb(b)}
    results = list(vidpipe.detect([a.path, b.path], device="cuda", decoder="nvdec", keep_frames=True, batch_size=6,
                                  frame_skip=2, decoder_processes=0))  # fmt: skip
    assert sorted((r.stream_id, r.index) for r in results) == [(s, i) for s in (0, 1) for i in range(0, 24, 2)]
    for r in results:
        _check([r], want[r.source], exact=False)


def test_pyav_decoding_on_a_cuda_run_keeps_exact_frames(make_clip):
    clip = make_clip(".mp4", frames=20, gop=10, width=320, height=192)
    want = pyav_rgb(clip)
    results = list(vidpipe.detect(clip.path, device="cuda", decoder="pyav", keep_frames=True, batch_size=8))
    assert [r.index for r in results] == list(range(20))
    _check(results, want, exact=True)


def test_no_frames_kept_unless_asked_on_cuda(make_clip):
    clip = make_clip(".mp4", frames=8, gop=8, width=160, height=96)
    assert all(r.image is None for r in vidpipe.detect(clip.path, device="cuda", batch_size=4))
