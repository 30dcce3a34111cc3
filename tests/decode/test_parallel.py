"""Segment-parallel orchestration on the CPU, with PyAV sessions as the per-segment decoders.

The same machinery runs NVDEC sessions on the GPU (tests/decode/test_nvdec.py); here it is
checked against the single-threaded PyAV backend: same frames, numbers, timestamps and colours,
whatever the number of workers, the segment size, the stride or the time range; failures of a
session are retried or skipped without hanging; memory stays bounded.
"""

from __future__ import annotations

import threading

import pytest
import torch
from media import corrupt_middle, read_stamp, truncate

from vidpipe.decode.base import DecodeOptions
from vidpipe.decode.demux import Demuxer
from vidpipe.decode.parallel import PyAVParallelDecoder, SegmentParallelDecoder
from vidpipe.decode.probe import probe
from vidpipe.decode.pyav import PyAVDecoder
from vidpipe.decode.sessions import PyAVSession
from vidpipe.errors import DecodeError


def reference(path, options=None):
    dec = PyAVDecoder(str(path), options=options or DecodeOptions())
    return [(m.index, m.pts, b.data[i].clone()) for b in dec.batches(8) for i, m in enumerate(b.frames)]


def frames(dec, batch_size=8):
    return [(m.index, m.pts, b.data[i].clone()) for b in dec.batches(batch_size) for i, m in enumerate(b.frames)]


def same(a, b):
    return len(a) == len(b) and all(
        x[0] == y[0] and x[1] == pytest.approx(y[1], abs=1e-9) and torch.equal(x[2], y[2]) for x, y in zip(a, b)
    )


class FailingSession(PyAVSession):
    """A real PyAV session that raises once it reaches the keyframe of chosen segments."""

    def __init__(self, *args, fail_segments=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fail_segments = set(fail_segments)
        self._segment = None
        self._fed = 0

    def start(self, segment):
        self._segment = segment.number
        self._fed = 0

    def feed(self, packet):
        self._fed += 1
        if self._segment in self.fail_segments and self._fed == 3:
            raise RuntimeError(f"injected failure in segment {self._segment}")
        return super().feed(packet)


def decoder(path, *, fail=(), fallback_fail=None, workers=3, options=None, **kwargs):
    info = probe(str(path))
    with Demuxer(str(path)) as d:
        ext = d.extradata

    def primary(i):
        return FailingSession(info, layout="rgb", extradata=ext, fail_segments=fail)

    def fallback(i):
        return FailingSession(info, layout="rgb", extradata=ext, fail_segments=fallback_fail or ())

    return SegmentParallelDecoder(
        info, device=torch.device("cpu"), options=options, session_factory=primary,
        fallback_factory=fallback if fallback_fail is not None else None,
        workers=workers, segment_frames=10, window=16, **kwargs,
    )  # fmt: skip


@pytest.mark.parametrize("workers", [1, 2, 4])
@pytest.mark.parametrize(
    "options",
    [
        DecodeOptions(),
        DecodeOptions(frame_skip=3),
        DecodeOptions(frame_skip=25),
        DecodeOptions(start=1.0, end=2.5),
        DecodeOptions(start=0.9, frame_skip=4, max_frames=5),
    ],
    ids=["all", "skip3", "skip25", "range", "range-skip-max"],
)
def test_matches_the_pyav_backend(make_clip, workers, options):
    clip = make_clip(".mp4", frames=100, gop=10, bframes=2, width=160, height=96)
    dec = PyAVParallelDecoder(str(clip.path), options=options, workers=workers, segment_frames=10)
    got = frames(dec)
    assert same(got, reference(clip.path, options))
    assert dec.error is None and dec.frames_missing == 0
    assert dec.stats()["workers"] == min(workers, dec.stats()["segments"])


@pytest.mark.parametrize("suffix,codec", [(".mkv", "hevc"), (".webm", "vp9"), (".mkv", "h264")])
def test_other_codecs_and_containers(make_clip, suffix, codec):
    clip = make_clip(suffix, codec=codec, frames=40, gop=10, width=160, height=96)
    got = frames(PyAVParallelDecoder(str(clip.path), workers=3, segment_frames=10))
    assert same(got, reference(clip.path))
    assert [read_stamp(f[2].numpy()) for f in got] == list(range(40))


def test_batches_are_full_except_the_last(make_clip):
    clip = make_clip(".mp4", frames=100, gop=10, bframes=2, width=160, height=96)
    dec = PyAVParallelDecoder(str(clip.path), workers=4, segment_frames=10)
    sizes = [len(b) for b in dec.batches(16)]
    assert sizes == [16] * 6 + [4]


def test_large_stride_decodes_only_needed_gops(make_clip):
    clip = make_clip(".mp4", frames=100, gop=10, bframes=0, width=160, height=96)
    dec = PyAVParallelDecoder(str(clip.path), options=DecodeOptions(frame_skip=30), workers=2, segment_frames=10)
    assert [f[0] for f in frames(dec)] == [0, 30, 60, 90]
    st = dec.stats()
    assert st["packets_decoded_planned"] == 40
    # each GOP stops feeding once its one kept frame is out: far fewer than 40 frames decoded
    assert st["frames_decoded"] < 40


def test_memory_is_bounded_by_the_window(make_clip):
    clip = make_clip(".mp4", frames=120, gop=10, width=160, height=96)
    dec = decoder(clip.path, workers=4)
    n = 0
    for b in dec.batches(8):  # window 16 = 2 batches ahead of the consumer
        n += len(b)
    assert n == 120
    st = dec.stats()
    # the consumer's batch + 2 in flight (+1 the loop variable still holds): buffers are recycled
    assert st["buffer_allocations"] <= 5 and st["buffer_reuses"] >= 10


def test_a_failing_session_is_retried_on_the_fallback(make_clip):
    clip = make_clip(".mp4", frames=60, gop=10, bframes=2, width=160, height=96)
    dec = decoder(clip.path, fail=(1, 4), fallback_fail=())
    assert same(frames(dec), reference(clip.path))
    assert len(dec.fallbacks) == 2 and "injected failure in segment 1" in " ".join(dec.fallbacks)
    assert dec.error is None


def test_when_the_fallback_fails_too_the_rest_is_kept(make_clip):
    clip = make_clip(".mp4", frames=60, gop=10, bframes=2, width=160, height=96)
    dec = decoder(clip.path, fail=(2,), fallback_fail=(2,), workers=3)
    got = frames(dec)
    indices = [f[0] for f in got]
    lost = set(range(60)) - set(indices)
    assert lost and lost <= set(range(20, 30))
    assert same(got, [r for r in reference(clip.path) if r[0] in indices])
    assert dec.partial and isinstance(dec.error, DecodeError)
    assert dec.frames_missing == len(lost) and "segment 2" in str(dec.error)


def test_without_a_fallback_a_failing_segment_is_skipped(make_clip):
    clip = make_clip(".mp4", frames=40, gop=10, width=160, height=96)
    dec = decoder(clip.path, fail=(0,), workers=2)
    got = frames(dec)
    indices = [f[0] for f in got]
    # what the failed session had decoded before its failure is kept (correct frames only)
    assert indices[-30:] == list(range(10, 40)) and set(indices[:-30]) < set(range(10))
    assert same(got, [r for r in reference(clip.path) if r[0] in indices])
    assert dec.partial and dec.frames_missing == 40 - len(indices)


def test_a_broken_worker_fails_the_run_instead_of_hanging(make_clip):
    clip = make_clip(".mp4", frames=40, gop=10, width=160, height=96)
    info = probe(str(clip.path))

    def broken(i):
        raise RuntimeError("no decoder for you")

    dec = SegmentParallelDecoder(info, device=torch.device("cpu"), session_factory=broken, workers=2, segment_frames=10)
    with pytest.raises(RuntimeError, match="no decoder for you"):
        list(dec.batches(8))


def test_stopping_early_stops_the_threads(make_clip):
    clip = make_clip(".mp4", frames=120, gop=10, width=160, height=96)
    before = threading.active_count()
    dec = PyAVParallelDecoder(str(clip.path), workers=4, segment_frames=10, buffer_bytes=1 << 20)
    it = dec.batches(8)
    first = next(it)
    assert [m.index for m in first.frames] == list(range(8))
    it.close()  # the consumer goes away mid-stream
    assert threading.active_count() == before


def test_truncated_file_is_partial(make_clip, tmp_path):
    clip = make_clip(".mkv", frames=60, gop=10, width=160, height=96)
    cut = truncate(clip.path, 0.6, dst=tmp_path / "cut.mkv")
    dec = PyAVParallelDecoder(str(cut), workers=3, segment_frames=10)
    got = frames(dec)
    assert 10 < len(got) < 60
    assert [f[0] for f in got] == list(range(len(got)))
    assert dec.partial and "truncated" in str(dec.error)


@pytest.mark.parametrize("suffix,codec", [(".mp4", "h264"), (".mkv", "hevc")])
def test_corrupt_middle_keeps_what_decodes(make_clip, tmp_path, suffix, codec):
    clip = make_clip(suffix, codec=codec, frames=60, gop=10, width=160, height=96)
    bad = corrupt_middle(clip.path, dst=tmp_path / f"bad{suffix}")
    dec = PyAVParallelDecoder(str(bad), workers=3, segment_frames=10)
    got = frames(dec)
    indices = [f[0] for f in got]
    assert len(indices) > 10 and indices == sorted(set(indices)) and indices[0] == 0
    assert read_stamp(got[0][2].numpy()) == 0
    # numbers follow the timestamps as in the PyAV backend, which stops at its first decode
    # error: everything it delivered is here too (and the segments after the damage)
    single = PyAVDecoder(str(bad))
    assert set(r[0] for r in frames(single)) <= set(indices)
    # frames the scan planned that did not come out are lost, and said so as the PyAV backend
    # says it: the decoder is partial (the source too), not only a warning
    assert dec.partial == single.partial == (dec.frames_missing > 0)
    if suffix == ".mp4":  # (this damage loses a frame in the MP4; the MKV's loses whole packets at demux)
        assert dec.frames_missing and "damaged" in str(dec.error) and "kept" in str(dec.error)


def test_uploads_to_cuda_when_asked(make_clip):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    clip = make_clip(".mp4", frames=30, gop=10, width=160, height=96)
    dec = PyAVParallelDecoder(str(clip.path), device="cuda", workers=2, segment_frames=10)
    got = [(m.index, b.data[i].cpu()) for b in dec.batches(8) for i, m in enumerate(b.frames)]
    ref = reference(clip.path)
    assert all(torch.equal(a[1], b[2]) for a, b in zip(got, ref)) and len(got) == 30


def test_close_stops_a_run_in_progress(make_clip):
    clip = make_clip(".mp4", frames=120, gop=10, width=160, height=96)
    before = threading.active_count()
    with PyAVParallelDecoder(str(clip.path), workers=4, segment_frames=10, buffer_bytes=1 << 20) as dec:
        it = dec.batches(8)
        next(it)
    # closed while suspended: the generator ends at its next step (at most the partial batch it
    # held), and its threads with it
    rest = list(it)
    assert sum(len(b) for b in rest) < 8
    assert threading.active_count() == before


@pytest.mark.parametrize("file_reads", [True, False], ids=["file-reads", "pyav-demux"])
@pytest.mark.parametrize("suffix,codec", [(".mp4", "h264"), (".mkv", "hevc"), (".webm", "vp9"), (".ts", "h264")])
def test_both_packet_readers_match_the_pyav_backend(make_clip, monkeypatch, file_reads, suffix, codec):
    from vidpipe.decode import workers

    monkeypatch.setattr(workers, "FILE_READS", file_reads)
    clip = make_clip(suffix, codec=codec, frames=150, gop=10, bframes=2, width=160, height=96)
    # a stride far beyond SEEK_GAP makes the PyAV reader seek; a range starts mid-file
    for options in (DecodeOptions(), DecodeOptions(frame_skip=110), DecodeOptions(start=2.0, end=4.0)):
        dec = PyAVParallelDecoder(str(clip.path), options=options, workers=3, segment_frames=10)
        assert same(frames(dec), reference(clip.path, options))
        assert dec.error is None
        byte_ranges = suffix != ".ts"  # MPEG-TS splits packets over 188-byte units
        assert dec.stats()["packet_reader"] == ("file" if file_reads and byte_ranges else "pyav")


def _yuv_decoder(path, *, annexb, workers=3):
    info = probe(str(path))
    with Demuxer(str(path)) as d:
        ext = d.extradata

    def session(i):
        return PyAVSession(info, layout="yuv", annexb=annexb, extradata=None if annexb else ext)

    return SegmentParallelDecoder(
        info, device=torch.device("cpu"), session_factory=session, layout="yuv", annexb=annexb,
        workers=workers, segment_frames=10,
    )  # fmt: skip


@pytest.mark.parametrize("file_reads", [True, False], ids=["file-reads", "pyav-demux"])
@pytest.mark.parametrize("suffix,codec", [(".mp4", "h264"), (".mkv", "hevc")])
def test_annexb_packets_decode_like_the_stored_ones(make_clip, monkeypatch, file_reads, suffix, codec):
    """What NVDEC is fed (Annex-B, from the file reader's converter or PyAV's filter) decodes to
    the same frames as the stored packets with their header."""
    from vidpipe.decode import workers

    monkeypatch.setattr(workers, "FILE_READS", file_reads)
    clip = make_clip(suffix, codec=codec, frames=60, gop=10, bframes=2, width=160, height=96)
    got = frames(_yuv_decoder(clip.path, annexb=True))
    monkeypatch.setattr(workers, "FILE_READS", False)
    assert same(got, frames(_yuv_decoder(clip.path, annexb=False)))
    assert len(got) == 60


@pytest.mark.parametrize("file_reads", [True, False], ids=["file-reads", "pyav-demux"])
def test_open_gops_shared_keyframes_and_non_idr_starts(tmp_path, monkeypatch, file_reads):
    """Open GOPs: a segment's leading pictures need the next segment's keyframe, which is an I
    picture, not IDR: both segments read it, and a fresh Annex-B decoder can start there."""
    from test_annexb import open_gop_clip

    from vidpipe.decode import workers
    from vidpipe.decode.segments import plan_decode, scan_stream

    monkeypatch.setattr(workers, "FILE_READS", file_reads)
    path = open_gop_clip(tmp_path / "open.mp4", frames=80)
    plan = plan_decode(scan_stream(path), target_frames=10)
    assert any(a.last_packet >= b.first_packet for a, b in zip(plan.segments, plan.segments[1:]))
    ref = reference(path)
    assert same(frames(PyAVParallelDecoder(str(path), workers=3, segment_frames=10)), ref)
    # Annex-B with one fresh session per segment: every segment starts a decoder from scratch
    info = probe(str(path))
    dec = SegmentParallelDecoder(
        info, device=torch.device("cpu"), layout="yuv", annexb=True, workers=3, segment_frames=10,
        session_factory=lambda i: FreshSession(info, layout="yuv", annexb=True),
    )  # fmt: skip
    got = frames(dec)
    monkeypatch.setattr(workers, "FILE_READS", False)
    assert same(got, frames(_yuv_decoder(path, annexb=False))) and dec.frames_missing == 0


class FreshSession(PyAVSession):
    """A PyAV session whose codec starts from scratch at every segment."""

    def start(self, segment):
        import av

        self._cc = av.CodecContext.create(self.info.codec, "r")


def test_laced_matroska_blocks_fall_back_to_pyav_reads(make_clip, monkeypatch):
    from vidpipe.decode import fileread

    clip = make_clip(".mkv", codec="h264", frames=60, gop=10, width=160, height=96)
    monkeypatch.setattr(fileread, "block_header_size", lambda head: None)  # as if every block were laced
    dec = PyAVParallelDecoder(str(clip.path), workers=3, segment_frames=10)
    assert same(frames(dec), reference(clip.path)) and dec.stats()["packet_reader"] == "pyav"


def test_the_decoder_is_the_job_its_threads_and_processes_take(make_clip):
    """workers.py and procrun.py see the decoder only through SegmentJob: every member it lists
    exists on a real decoder, and a pass reports through its methods (nothing set from outside)."""
    import inspect

    from vidpipe.decode.segment_job import SegmentJob

    clip = make_clip(".mp4", frames=30, gop=10, width=160, height=96)
    dec = PyAVParallelDecoder(str(clip.path), workers=2, segment_frames=10)
    members = {n for n, _ in inspect.getmembers(SegmentJob) if not n.startswith("_")} | set(SegmentJob.__annotations__)
    missing = sorted(n for n in members if not hasattr(dec, n))
    assert not missing, f"SegmentParallelDecoder lacks {missing}"
    assert sum(len(b) for b in dec.batches(8)) == 30
    st = dec.stats()
    assert st["frames_decoded"] == 30 and st["frames_missing"] == 0 and dec.frames_delivered == 30
    assert dec.packet_reader in ("file", "pyav") and dec.workers_used == 2
