"""Decoder processes decode NVDEC jobs without PyTorch: their ring slots are the parent's driver
allocations, mapped through CUDA IPC (:mod:`vidpipe.decode.ipc_memory`). Bit-exact with FFmpeg,
batches the caller keeps never overwritten, the rings' memory freed. Skipped without
CUDA/NVDEC."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_nvdec import ffmpeg_luma, luma, nvdec

pytestmark = [pytest.mark.gpu, pytest.mark.nvdec]


@pytest.fixture(autouse=True)
def _fresh_decoder_processes():
    from vidpipe.decode.procpool import close_pools

    close_pools()  # children started by this test, not by an earlier one
    yield
    close_pools()


def _children(dec):
    from vidpipe.decode.procpool import get_pool

    pool = get_pool(dec.device, None, start=False)
    assert pool is not None, "the decode ran without decoder processes"
    return [p.pid for p in pool.procs]


def _same_as_ffmpeg(out, path, frames: int) -> None:
    """Every frame ``0..frames-1`` once, in order, its Y plane bit-exact with FFmpeg's."""
    ref = ffmpeg_luma(path)
    got = luma(out)
    assert [i for i, _ in got] == list(range(frames))
    for i, y in got:
        assert np.array_equal(y, ref[i]), f"frame {i} differs"


def _maps(pid: int) -> str:
    with open(f"/proc/{pid}/maps") as f:
        return f.read()


def test_decoder_processes_decode_without_pytorch(make_clip):
    clip = make_clip(".mp4", frames=90, gop=10, bframes=2, width=320, height=192)
    dec, out = nvdec(clip.path, workers=4, processes=2)
    assert dec.stats()["processes"] == 2
    _same_as_ffmpeg(out, clip.path, 90)
    for pid in _children(dec):
        maps = _maps(pid)
        assert "libcuda" in maps and "libnvcuvid" in maps  # it did decode on the GPU
        assert "libtorch" not in maps, f"decoder process {pid} loaded PyTorch"


def test_batches_the_caller_keeps_are_never_overwritten(make_clip):
    """Every batch kept (not cloned) while the decode goes on: each of the 3-slot ring's slots
    then gets a new allocation that the children map by its new handle; at the end every kept
    batch still holds its frames, bit-exact with FFmpeg."""
    from vidpipe.decode.nvdec import NvdecDecoder

    clip = make_clip(".mp4", frames=120, gop=10, width=320, height=192)
    dec = NvdecDecoder(str(clip.path), device="cuda", workers=4, segment_frames=10, processes=2, buffer_bytes=1)
    kept = []
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for b in dec.batches(8):
            kept.append((b, b.data))
    stream.synchronize()
    assert dec.stats()["processes"] == 2
    _same_as_ffmpeg(kept, clip.path, 120)


def test_the_rings_memory_is_freed_with_the_processes(make_clip):
    """Six runs (each slot of the ring renewed for the batches kept during the run, the kept
    ones back to the ring's spares after it): once the decoder processes are closed, the GPU's
    free memory is what it was before they started (the rings' driver allocations freed here,
    the children's mappings gone with them)."""
    import gc

    from vidpipe.decode.procpool import close_pools

    clip = make_clip(".mp4", frames=60, gop=10, width=320, height=192)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    free_before = torch.cuda.mem_get_info()[0]
    for _ in range(6):
        dec, out = nvdec(clip.path, workers=4, processes=2)
        assert dec.stats()["frames_delivered"] == 60
        del dec, out
    close_pools()
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    free_after = torch.cuda.mem_get_info()[0]
    assert free_before - free_after < 4 << 20, f"{(free_before - free_after) >> 20} MiB still in use"
