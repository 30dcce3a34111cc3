"""NVDEC sessions started before PyTorch is imported (vidpipe.decode.nvdec_early, a decoder
process's first seconds): in a fresh interpreter, the sessions a ``ChildPrewarm`` starts import no
PyTorch, are pooled before it, share the primary context PyTorch binds afterwards, are the
sessions the next decode takes from the pool, and decode every frame bit-exact with FFmpeg."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import av
import numpy as np
import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.nvdec]

CHILD = """
import ctypes, json, sys
import numpy as np
from vidpipe.prewarm import ChildPrewarm

path, out = sys.argv[1], sys.argv[2]
early = ChildPrewarm(path, 0, processes=2)
started = early.wait()
torch_free = "torch" not in sys.modules
from vidpipe.decode.nvdec_pool import POOL
pooled_before_torch = POOL.idle()
import torch
torch.zeros(1, device="cuda")
lib = ctypes.CDLL("libcuda.so.1")
current = ctypes.c_void_p()
assert lib.cuCtxGetCurrent(ctypes.byref(current)) == 0
from vidpipe.decode.cuda_driver import use_primary_context
same_context = current.value == use_primary_context(0)
from vidpipe.decode.nvdec import NvdecDecoder, default_workers
from vidpipe.decode.base import DecodeOptions
created = POOL.created
dec = NvdecDecoder(path, device="cuda", workers=started, segment_frames=12, options=DecodeOptions(), processes=0)
rows, index = [], []
with torch.cuda.stream(torch.cuda.Stream()):
    for b in dec.batches(8):
        rows.append(b.data[:, : b.height].cpu().numpy().copy())
        index += [m.index for m in b.frames]
np.save(out, np.concatenate(rows))
print(json.dumps(dict(started=started, pooled_before_torch=pooled_before_torch, share=-(-default_workers(0, "h264") // 2), torch_free=torch_free,
                      same_context=same_context, new_sessions=POOL.created - created, index=index,
                      missing=dec.stats()["frames_missing"])))
"""


def test_sessions_started_before_pytorch_decode_bit_exact(make_clip, tmp_path):
    pytest.importorskip("PyNvVideoCodec")
    clip = make_clip(".mp4", frames=96, gop=12, width=640, height=360)
    out = tmp_path / "y.npy"
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(CHILD), str(clip.path), str(out)], capture_output=True,
                       text=True, timeout=180)  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["torch_free"], "starting the sessions imported PyTorch"
    assert got["started"] == got["share"] >= 1  # this process's share of the default sessions over 2
    assert got["pooled_before_torch"] == got["started"]  # pooled as they start, their PyTorch stream given on use
    assert got["same_context"], "the sessions' context is not the one PyTorch binds"
    assert got["new_sessions"] == 0, "the decode did not take the sessions started before PyTorch"
    assert got["index"] == list(range(96)) and got["missing"] == 0
    with av.open(str(clip.path)) as c:
        ref = np.stack([f.to_ndarray()[: f.height] for f in c.decode(video=0)])
    y = np.load(out)
    assert y.shape == ref.shape
    for i in range(len(ref)):
        assert np.array_equal(y[i], ref[i]), f"frame {i} differs from FFmpeg's"
