"""An NVDEC run whose decoder processes are still starting (``vidpipe detect`` starts them beside
its own start, and the command's own start may be the faster one) decodes with threads here
until they are ready, then in them: every frame once, in order, bit-exact with FFmpeg."""

from __future__ import annotations

import logging
import time

import numpy as np
import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.nvdec]


@pytest.fixture(autouse=True)
def _no_pool():
    from vidpipe.decode.procpool import close_pools

    close_pools()
    yield
    close_pools()


def test_an_nvdec_run_starts_here_and_the_children_join_it(make_clip, caplog):
    import av

    from vidpipe.decode.nvdec import NvdecDecoder
    from vidpipe.decode.procpool import is_starting, start_in_background

    clip = make_clip(".mp4", frames=120, gop=10, bframes=2, width=320, height=192)
    assert start_in_background("cuda:0", 2, warm_for=str(clip.path))
    dec = NvdecDecoder(str(clip.path), device="cuda", workers=4, segment_frames=10, buffer_bytes=1)
    out = []
    stream = torch.cuda.Stream()
    with caplog.at_level(logging.INFO, logger="vidpipe.decode"), torch.cuda.stream(stream):
        for n, b in enumerate(dec.batches(8)):
            out.append((b, b.data.clone()))
            if n == 0:  # the children import PyTorch (seconds) while the threads here decode
                deadline = time.monotonic() + 120
                while is_starting("cuda:0") and time.monotonic() < deadline:
                    time.sleep(0.05)
    stream.synchronize()
    with av.open(str(clip.path)) as c:
        ref = [f.to_ndarray()[: f.height] for f in c.decode(video=0)]
    got = [(m.index, data[i, : b.height].cpu().numpy()) for b, data in out for i, m in enumerate(b.frames)]
    assert [i for i, _ in got] == list(range(120))
    for i, y in got:
        assert np.array_equal(y, ref[i]), f"frame {i} differs"
    assert any("until the decoder processes are ready" in r.getMessage() for r in caplog.records)
    st = dec.stats()
    assert st["processes"] == 2 and st["frames_missing"] == 0 and not dec.partial
    joined = [r.getMessage() for r in caplog.records if "joined after" in r.getMessage()]
    assert len(joined) == 1 and 1 <= int(joined[0].split("joined after ")[1].split()[0]) < 120, joined
