"""The fused NV12 kernels are compiled before a CUDA run's clock only when a source may be
NVDEC's (``DetectionRun._may_decode_nv12``): not for the short file ``auto`` gives PyAV (the
bundled clip), nor with ``decoder="pyav"``; yes with ``decoder="nvdec"`` and for a file long
enough for NVDEC. Either way every frame comes out (a run that skipped them compiles at first use)."""

from __future__ import annotations

import pytest

import vidpipe

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize(("decoder", "expected"), [("auto", False), ("pyav", False), ("nvdec", True)])
def test_the_bundled_clip(bikes_path, decoder, expected):
    if decoder == "nvdec":
        pytest.importorskip("PyNvVideoCodec")
    with vidpipe.detect(str(bikes_path), device="cuda", decoder=decoder, max_frames=40) as run:
        assert run._may_decode_nv12() is expected
        assert sum(1 for _ in run) == 40
    assert run.summary().sources[0].decoder == ("nvdec" if decoder == "nvdec" else "pyav")


@pytest.mark.nvdec
def test_a_long_1080p_file_gets_them(make_clip):
    clip = make_clip(".mp4", frames=320, gop=32, width=1920, height=1080)  # 1080p: NVDEC from 300 frames
    with vidpipe.detect(str(clip.path), device="cuda") as run:
        assert run._may_decode_nv12()
        assert sum(1 for _ in run) == 320
    assert run.summary().sources[0].decoder == "nvdec"
