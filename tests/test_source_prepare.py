"""A run of video files on a GPU starts their workers before its CUDA graph's capture
(``DetectionRun._decodes_beside_warm_up``): each :class:`FileSource` probes its file (and, where
NVDEC may read it, scans its packets) meanwhile, in ``prepare`` (host work), and opens its decoder
only once the capture is over (``SourceContext.gpu_free``). The run's clock starts there.

On this CPU machine that decision is forced and the capture is a sleep in front of the real
warm-up; ``tests/test_decode_beside_warmup_gpu.py`` runs the real one on NVDEC. The files, the
decoder and the model are real; frame counts are held against PyAV's (FFmpeg's) decode."""

from __future__ import annotations

import threading
import time

import av
import pytest

import vidpipe
from vidpipe.decode import registry
from vidpipe.pipeline import DetectionRun
from vidpipe.pipeline_infer import Inference

CAPTURE_S = 0.6


@pytest.fixture
def early_start(monkeypatch):
    """Workers started before a warm-up whose first ``CAPTURE_S`` stand for the CUDA graph's
    capture; returns the marks: ``captured`` (its end), ``prepare`` and ``open`` ((thread, start,
    end) of each ``FileSource.prepare`` and ``open_decoder`` call), ``probes`` (threads)."""
    from vidpipe.decode import probe as probe_module
    from vidpipe.sources.file import FileSource

    marks: dict = {"captured": [], "prepare": [], "open": [], "probes": []}
    warm_up, prepare, open_decoder, probe = Inference.warm_up, FileSource.prepare, registry.open_decoder, probe_module.probe

    def capture_then_warm_up(self, *, nv12=True, captured=None):
        time.sleep(CAPTURE_S)
        marks["captured"].append(time.perf_counter())
        warm_up(self, nv12=nv12, captured=captured)

    def timed(name, fn):
        def call(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                marks[name].append((threading.current_thread().name, t0, time.perf_counter()))

        return call

    def counted_probe(*args, **kwargs):
        marks["probes"].append(threading.current_thread().name)
        return probe(*args, **kwargs)

    monkeypatch.setattr(DetectionRun, "_decodes_beside_warm_up", lambda self, *, nv12: True)
    monkeypatch.setattr(Inference, "warm_up", capture_then_warm_up)
    monkeypatch.setattr(FileSource, "prepare", timed("prepare", prepare))
    monkeypatch.setattr(registry, "open_decoder", timed("open", open_decoder))
    monkeypatch.setattr(probe_module, "probe", counted_probe)
    return marks


def _pyav_frames(path) -> int:
    with av.open(str(path)) as c:
        return sum(1 for _ in c.decode(video=0))


def test_files_are_probed_during_the_capture_and_opened_after_it(make_clip, early_start):
    a = make_clip(width=160, height=96, frames=24, fps=10, gop=6)
    b = make_clip(width=176, height=112, frames=17, fps=10, gop=5)
    run = vidpipe.detect([str(a.path), str(b.path)], device="cpu", batch_size=8)
    got = {}
    for r in run:
        got.setdefault(r.meta.source, []).append(r.meta.index)
    captured = early_start["captured"][0]
    assert len(early_start["prepare"]) == 2 and len(early_start["open"]) == 2
    for thread, t0, t1 in early_start["prepare"]:
        assert thread.startswith("vidpipe-src") and t1 < captured, "each file is probed during the capture"
    for thread, t0, _ in early_start["open"]:
        assert thread.startswith("vidpipe-src") and t0 > captured, "its decoder opens after the capture"
    assert run.started_at >= captured  # the run's clock starts with the decode, after the probes
    # each file probed once: the decoder opens from prepare's probe
    assert sorted(early_start["probes"]) == ["vidpipe-src0", "vidpipe-src1"]
    assert [got[str(a.path)], got[str(b.path)]] == [list(range(_pyav_frames(a.path))), list(range(_pyav_frames(b.path)))]
    assert [s.status for s in run.summary().sources] == ["ok", "ok"]


def test_a_file_that_cannot_be_probed_fails_as_it_would_without_the_early_start(tmp_path, make_clip, monkeypatch):
    bad = tmp_path / "broken.mp4"
    bad.write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes(range(256)) * 64)  # an MP4 header, then garbage
    good = make_clip(width=160, height=96, frames=12, fps=10, gop=6)

    def statuses():
        run = vidpipe.detect([str(bad), str(good.path)], device="cpu", batch_size=4)
        n = sum(1 for _ in run)
        return n, [(s.status, s.error) for s in run.summary().sources]

    plain = statuses()
    monkeypatch.setattr(DetectionRun, "_decodes_beside_warm_up", lambda self, *, nv12: True)
    early = statuses()
    assert early == plain
    assert early[0] == _pyav_frames(good.path) and early[1][0][0] == "failed" and "broken.mp4" in early[1][0][1]


def test_a_run_closed_during_the_capture_never_opens_its_files(make_clip, early_start):
    clip = make_clip(width=160, height=96, frames=24, fps=10, gop=6)
    run = vidpipe.detect(str(clip.path), device="cpu", batch_size=8)
    closer = threading.Timer(CAPTURE_S / 2, run.close)
    closer.start()
    try:
        assert list(run) == []
    finally:
        closer.join()
    assert early_start["open"] == [], "a worker stopped while it waited for the capture opened its file"
    assert not [t for t in threading.enumerate() if t.name.startswith("vidpipe-src")], "a worker outlived its run"
    assert run.summary().sources[0].status == "skipped"


def test_open_decoder_hands_a_scan_made_already_to_a_backend_that_plans_from_it(make_clip, monkeypatch):
    from vidpipe.decode import parallel
    from vidpipe.decode.parallel import PyAVParallelDecoder
    from vidpipe.decode.segments import scan_stream

    clip = make_clip(width=160, height=96, frames=40, fps=10, gop=5)
    index = scan_stream(clip.path)
    monkeypatch.setattr(registry, "_registered", dict(registry._registered))
    registry.register_backend(
        "segments-cpu",
        lambda info, *, device, options, index=None: PyAVParallelDecoder(info, device="cpu", options=options,
                                                                         workers=2, index=index),
        lambda info, device: None, gpu=False,
    )  # fmt: skip

    def no_second_scan(source):
        raise AssertionError(f"{source} scanned again")

    monkeypatch.setattr(parallel, "scan_stream", no_second_scan)
    with registry.open_decoder(clip.path, device="cpu", decoder="segments-cpu", index=index) as dec:
        frames = [m.index for b in dec.batches(8) for m in b.frames]
    assert frames == list(range(_pyav_frames(clip.path)))
    with registry.open_decoder(clip.path, device="cpu", decoder="pyav", index=index) as dec:  # takes none: ignored
        assert sum(len(b) for b in dec.batches(8)) == len(frames)
