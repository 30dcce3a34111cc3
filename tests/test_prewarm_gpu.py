"""vidpipe.prewarm on the GPU: the NVDEC capabilities its thread asks for before PyTorch has a
CUDA context are the driver's answer the run itself got before (asked on its own thread after
PyTorch's start), and a run that prepared itself decodes every frame on NVDEC."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

import vidpipe

pytestmark = [pytest.mark.gpu, pytest.mark.nvdec]

ASK = """
import dataclasses, json, threading
from vidpipe.decode.nvdec_caps import query_caps
KEYS = [("h264", "420", 8), ("hevc", "420", 10), ("av1", "420", 8), ("mjpeg", "444", 8)]
def ask():
    return [dataclasses.asdict(query_caps(0, *k)) for k in KEYS]
"""


def _caps(code: str) -> list[dict]:
    out = subprocess.run([sys.executable, "-c", ASK + textwrap.dedent(code)], capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_caps_asked_from_a_thread_before_cuda_starts_are_the_drivers_answer():
    pytest.importorskip("PyNvVideoCodec")
    early = _caps("""
        box = []
        t = threading.Thread(target=lambda: box.append(ask()))
        t.start(); t.join()
        import torch; torch.zeros(1, device="cuda")
        print(json.dumps(box[0]))
    """)
    after = _caps("""
        import torch; torch.zeros(1, device="cuda")
        print(json.dumps(ask()))
    """)
    assert early == after
    assert early[0]["supported"] and early[0]["engines"] >= 1


def test_a_prepared_run_decodes_every_frame_on_nvdec(make_clip):
    pytest.importorskip("PyNvVideoCodec")
    from vidpipe.prewarm import start_prewarm
    from vidpipe.sources.spec import classify_inputs

    clip = make_clip(".mp4", frames=320, gop=32, width=1920, height=1080)  # NVDEC's under auto
    thread = start_prewarm(classify_inputs([str(clip.path)]), device="cuda", decoder="auto")
    assert thread is not None
    with vidpipe.detect(str(clip.path), device="cuda") as run:  # starts its own, with the first's results
        assert sum(1 for _ in run) == 320
    thread.join(30)
    assert not thread.is_alive()
    assert run.summary().sources[0].decoder == "nvdec"
