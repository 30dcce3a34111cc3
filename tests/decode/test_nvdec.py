"""NVDEC on the GPU: decode parity with FFmpeg, frame numbering, segment-parallel order and counts,
colour parity of the NV12 path, fallbacks, damaged input, memory. Skipped without CUDA/NVDEC."""

from __future__ import annotations

import threading

import av
import numpy as np
import pytest
import torch
from media import corrupt_middle, read_stamp, truncate

from vidpipe.decode.base import DecodeOptions
from vidpipe.decode.probe import probe
from vidpipe.decode.pyav import PyAVDecoder
from vidpipe.errors import UnsupportedError

pytestmark = [pytest.mark.gpu, pytest.mark.nvdec]


@pytest.fixture(scope="module", autouse=True)
def _stop_decoder_processes():
    yield
    from vidpipe.decode.procpool import close_pools

    close_pools()


def nvdec(path, workers=3, batch_size=8, segment_frames=10, processes=0, **options):
    from vidpipe.decode.nvdec import NvdecDecoder

    dec = NvdecDecoder(str(path), device="cuda", workers=workers, segment_frames=segment_frames,
                       options=DecodeOptions(**options), processes=processes)  # fmt: skip
    out = []
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):  # the decoder's stream contract: consume on the current stream
        for b in dec.batches(batch_size):
            assert b.device.type == "cuda" and b.format in ("nv12", "p010") and b.color is not None
            out.append((b, b.data.clone()))
    stream.synchronize()
    return dec, out


def metas(out):
    return [(m.index, m.pts) for b, _ in out for m in b.frames]


def ffmpeg_luma(path):
    """``{frame number: Y plane}`` decoded by FFmpeg (10-bit as uint16 values)."""
    with av.open(str(path)) as c:
        frames = list(c.decode(video=0))
    return {i: f.to_ndarray()[: f.height] for i, f in enumerate(frames)}


def luma(out):
    """``[(index, Y plane as numpy)]``; P016 shifted down to 10-bit values."""
    rows = []
    for b, data in out:
        h = b.height
        y = data[:, :h].cpu()
        y = (y.to(torch.int32) >> 6).numpy() if b.format == "p010" else y.numpy()
        rows += [(m.index, y[i]) for i, m in enumerate(b.frames)]
    return rows


@pytest.mark.parametrize("workers,processes", [(1, 0), (3, 0), (3, 2)], ids=["1", "3", "3-in-2-processes"])
@pytest.mark.parametrize(
    "suffix,codec,pix_fmt",
    [(".mp4", "h264", "yuv420p"), (".mkv", "hevc", "yuv420p"), (".mkv", "hevc", "yuv420p10le")],
)
def test_bit_exact_with_ffmpeg(make_clip, workers, processes, suffix, codec, pix_fmt):
    clip = make_clip(suffix, codec=codec, pix_fmt=pix_fmt, frames=60, gop=10, bframes=2, width=320, height=192)
    dec, out = nvdec(clip.path, workers=workers, processes=processes)
    ref = ffmpeg_luma(clip.path)
    got = luma(out)
    assert [i for i, _ in got] == list(range(60))
    for i, y in got:
        assert np.array_equal(y, ref[i]), f"frame {i} differs"
    assert metas(out) == [(m.index, m.pts) for b in PyAVDecoder(str(clip.path)).batches(16) for m in b.frames]
    assert out[0][0].format == ("p010" if "10" in pix_fmt else "nv12")
    st = dec.stats()
    assert st["frames_missing"] == 0 and st["bytes_device_to_host"] == 0 and not dec.partial
    assert st["workers"] == (1 if workers == 1 else 4 if processes else 3)  # 2 sessions in each process
    assert st["processes"] == processes


@pytest.mark.parametrize(
    "options",
    [dict(frame_skip=4), dict(frame_skip=25), dict(start=1.1, end=2.3), dict(start=0.5, frame_skip=3, max_frames=7)],
)
def test_selection_matches_pyav_numbering(make_clip, options):
    clip = make_clip(".mp4", frames=100, gop=10, bframes=2, width=320, height=192)
    _, out = nvdec(clip.path, workers=4, **options)
    ref = PyAVDecoder(str(clip.path), options=DecodeOptions(**options))
    assert metas(out) == [(m.index, m.pts) for b in ref.batches(8) for m in b.frames]


@pytest.mark.parametrize("processes", [0, 2])
def test_segment_parallel_order_and_counts(make_clip, processes):
    """Many small segments over 8 sessions (in this process or two decoder processes): every frame
    once, in order, batches full."""
    clip = make_clip(".mp4", frames=300, gop=15, bframes=2, width=320, height=192)
    from vidpipe.ops.fused import nv12_to_rgb

    dec, out = nvdec(clip.path, workers=8, batch_size=16, segment_frames=15, processes=processes)
    assert [len(b) for b, _ in out] == [16] * 18 + [12]
    assert [m.index for b, _ in out for m in b.frames] == list(range(300))
    stamps = []
    for b, data in out:
        rgb = nv12_to_rgb(type(b)(data=data, frames=b.frames, format=b.format, color=b.color)).cpu().numpy()
        stamps += [read_stamp(rgb[i]) for i in range(len(b))]
    assert stamps == [i % 256 for i in range(300)]
    st = dec.stats()
    assert st["segments"] == 20 and st["workers"] == 8


def test_colour_matches_the_cpu_path(make_clip):
    from vidpipe.ops.fused import nv12_to_rgb

    clip = make_clip(".mp4", frames=12, gop=6, width=320, height=192, colorspace="bt709", pattern="bars")
    _, out = nvdec(clip.path, workers=2)
    gpu = torch.cat([nv12_to_rgb(type(b)(data=d, frames=b.frames, format=b.format, color=b.color)) for b, d in out])
    cpu = torch.cat([b.data for b in PyAVDecoder(str(clip.path)).batches(16)])
    diff = (gpu.cpu().to(torch.int16) - cpu.to(torch.int16)).abs()
    assert diff.max().item() <= 1 and diff.float().mean().item() < 0.05


@pytest.mark.parametrize(
    "kwargs,reason",
    [
        (dict(codec="h264", pix_fmt="yuv420p10le"), "10-bit"),
        (dict(codec="h264", pix_fmt="yuv444p"), "4:4:4"),
        (dict(codec="mjpeg"), "MJPEG"),
    ],
)
def test_unsupported_streams_fall_back_with_a_reason(make_clip, kwargs, reason):
    from vidpipe.decode.nvdec import NvdecDecoder
    from vidpipe.decode.registry import open_decoder

    suffix = ".avi" if kwargs["codec"] == "mjpeg" else ".mkv"
    clip = make_clip(suffix, frames=6, gop=3, width=320, height=192, **kwargs)
    with pytest.raises(UnsupportedError, match=reason):
        NvdecDecoder(str(clip.path), device="cuda")
    dec = open_decoder(str(clip.path), device="cuda")
    assert dec.choice.name == "pyav" and reason in dec.choice.rejected[0][1]
    assert sum(len(b) for b in dec.batches(8)) == 6


@pytest.mark.parametrize("processes", [0, 2])
def test_corrupt_packets_keep_what_decodes(make_clip, tmp_path, processes):
    from vidpipe.decode.pyav import PyAVDecoder

    clip = make_clip(".mp4", frames=60, gop=10, width=320, height=192)
    bad = corrupt_middle(clip.path, dst=tmp_path / "bad.mp4")
    dec, out = nvdec(bad, workers=3, processes=processes)
    indices = [m.index for b, _ in out for m in b.frames]
    assert len(indices) > 30 and indices == sorted(set(indices)) and indices[0] == 0
    # held against the PyAV backend on the same bytes: frames lost in the damage make both
    # partial with a "damaged" error (not only a warning); the two decoders conceal different
    # frames (FFmpeg keeps a damaged frame NVDEC drops), but each frame PyAV gave that NVDEC did
    # not is one NVDEC counted as lost
    single = PyAVDecoder(str(bad))
    ref = [m.index for b in single.batches(8) for m in b.frames]
    assert len(set(ref) - set(indices)) <= dec.frames_missing
    assert dec.partial == (dec.frames_missing > 0) and single.partial == (len(ref) < 60)
    if dec.frames_missing:
        assert "damaged" in str(dec.error) and "kept" in str(dec.error)


@pytest.mark.parametrize("processes", [0, 2], ids=["threads", "processes"])
def test_frames_lost_inside_a_segment_longer_than_the_window_do_not_stall_it(make_clip, tmp_path, processes):
    """A damaged 50-frame GOP, each a segment longer than the 3-batch CUDA ring: the frames NVDEC
    loses in its middle are marked missing when a later frame must wait for the consumer, not at
    the segment's end (a deadlock before). Every frame PyAV gave that NVDEC did not is counted
    lost, and the frames kept are, bit for bit, those of the same decode with a window that holds
    the whole file."""
    from vidpipe.decode.nvdec import NvdecDecoder

    clip = make_clip(".mp4", frames=200, gop=50, width=320, height=192)
    bad = corrupt_middle(clip.path, dst=tmp_path / "bad.mp4")
    dec = NvdecDecoder(str(bad), device="cuda", workers=3, segment_frames=10, processes=processes, buffer_bytes=1)
    out: list = []

    def consume():
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            out.extend((b, b.data.clone()) for b in dec.batches(8))
        stream.synchronize()

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    t.join(120)
    if t.is_alive():
        dec.close()
        pytest.fail("the decode stalled")
    got = luma(out)
    indices = [i for i, _ in got]
    assert indices == sorted(set(indices)) and indices[0] == 0 and len(indices) < 200
    ref = [m.index for b in PyAVDecoder(str(bad)).batches(8) for m in b.frames]
    assert len(set(ref) - set(indices)) <= dec.frames_missing
    assert dec.partial and dec.stats()["frames_missing"] == 200 - len(indices)
    whole = luma(nvdec(bad, workers=3, processes=processes)[1])  # the default window: the whole file
    assert [i for i, _ in whole] == indices
    assert all(np.array_equal(y, w) for (_, y), (_, w) in zip(got, whole))


def test_truncated_file_is_partial(make_clip, tmp_path):
    clip = make_clip(".mkv", frames=60, gop=10, width=320, height=192)
    cut = truncate(clip.path, 0.6, dst=tmp_path / "cut.mkv")
    dec, out = nvdec(cut, workers=3)
    indices = [m.index for b, _ in out for m in b.frames]
    assert 10 < len(indices) < 60 and indices == list(range(len(indices)))
    assert dec.partial and "truncated" in str(dec.error)


def test_rotation_is_reported_not_applied(make_clip):
    clip = make_clip(".mp4", frames=10, gop=5, width=320, height=192, rotation=90)
    dec, out = nvdec(clip.path, workers=1)
    assert (out[0][0].height, out[0][0].width) == (192, 320)  # as the PyAV backend: coded orientation
    assert dec.info.rotation in (0, 90, 270)  # PyAV 18 cannot read it; 19 does


@pytest.mark.parametrize("processes", [0, 2])
def test_memory_is_recycled(make_clip, processes):
    from vidpipe.decode.nvdec import NvdecDecoder

    clip = make_clip(".mp4", frames=300, gop=10, width=320, height=192)
    dec = NvdecDecoder(str(clip.path), device="cuda", workers=4, segment_frames=10, buffer_bytes=64 * 92160,
                       processes=processes)  # fmt: skip
    before = torch.cuda.memory_allocated()
    alloc = []
    for b in dec.batches(8):
        alloc.append(torch.cuda.memory_allocated())
    st = dec.stats()
    assert st["frames_delivered"] == 300 and st["processes"] == processes
    if processes:  # a fixed ring of 64 frames shared with the decoder processes
        assert st["buffer_peak_bytes"] == 64 * 92160
        assert max(alloc) - before <= 64 * 92160
        return
    assert st["buffer_allocations"] <= 64 // 8 + 4 and st["buffer_reuses"] > 20
    # no growth beyond the pool's buffers (the 64-frame window + the batches the consumer holds)
    assert max(alloc) - before <= (64 // 8 + 4) * 8 * 92160


def test_stopping_early_releases_the_sessions(make_clip):
    from vidpipe.decode.nvdec import NvdecDecoder

    clip = make_clip(".mp4", frames=200, gop=10, width=320, height=192)
    before = threading.active_count()
    it = NvdecDecoder(str(clip.path), device="cuda", workers=4, segment_frames=10, processes=0).batches(8)
    assert [m.index for m in next(it).frames] == list(range(8))
    it.close()
    assert threading.active_count() == before


def test_check_with_the_real_gpu_caps(make_clip):
    from vidpipe.decode.nvdec import check, default_workers

    info = probe(make_clip(".mp4", frames=3, gop=3, width=320, height=192).path)
    assert check(info, torch.device("cuda")) is None
    assert "device is cpu" in check(info, torch.device("cpu"))
    assert default_workers(torch.device("cuda")) >= 2


@pytest.mark.parametrize("victims", [[0], [0, 1]], ids=["one-child", "every-child"])
def test_a_killed_decoder_process_loses_no_frame(make_clip, victims):
    """SIGKILL decoder processes mid-run (a 3-batch CUDA ring, so each has segments in flight):
    their segments are decoded again by the other one, or by threads here once none is left;
    every frame once, in order, bit-exact with FFmpeg."""
    import os
    import signal

    from vidpipe.decode.nvdec import NvdecDecoder
    from vidpipe.decode.procpool import get_pool

    clip = make_clip(".mp4", frames=120, gop=10, bframes=2, width=320, height=192)
    dec = NvdecDecoder(str(clip.path), device="cuda", workers=4, segment_frames=10, processes=2, buffer_bytes=1)
    out = []
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for n, b in enumerate(dec.batches(8)):
            if n == 1:
                pool = get_pool(dec.device, None, start=False)
                for v in victims:
                    os.kill(pool.procs[v].pid, signal.SIGKILL)
            out.append((b, b.data.clone()))
    stream.synchronize()
    ref = ffmpeg_luma(clip.path)
    got = luma(out)
    assert [i for i, _ in got] == list(range(120))
    for i, y in got:
        assert np.array_equal(y, ref[i]), f"frame {i} differs"
    st = dec.stats()
    assert not dec.partial and st["frames_missing"] == 0 and st["processes_lost"] == len(victims)


def test_two_files_at_once_share_the_decoder_processes(make_clip):
    """Two files decoding at the same time with ``files_at_once=2``: each takes one of the two
    decoder processes (CUDA rings of their own, side by side) and each is bit-exact with FFmpeg."""
    from vidpipe.decode.nvdec import NvdecDecoder
    from vidpipe.decode.procpool import close_pools

    close_pools()
    clips = [make_clip(".mp4", frames=120, gop=10, bframes=2, width=320, height=192),
             make_clip(".mkv", codec="hevc", frames=90, gop=10, width=256, height=160)]  # fmt: skip
    two = DecodeOptions(files_at_once=2)
    decs = [NvdecDecoder(str(c.path), device="cuda", workers=4, segment_frames=10, processes=2, buffer_bytes=1,
                         options=two) for c in clips]  # fmt: skip
    its = [d.batches(8) for d in decs]
    outs: list[list] = [[], []]
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        running = {0, 1}
        while running:
            for k in sorted(running):
                b = next(its[k], None)
                if b is None:
                    running.discard(k)
                else:
                    outs[k].append((b, b.data.clone()))
    stream.synchronize()
    for clip, out, dec in zip(clips, outs, decs):
        ref = ffmpeg_luma(clip.path)
        got = luma(out)
        assert [i for i, _ in got] == list(range(len(ref)))
        assert all(np.array_equal(y, ref[i]) for i, y in got)
        assert dec.stats()["processes"] == 1 and not dec.partial
