"""A run whose decoder processes are still starting (vidpipe.decode.proclate, procrun) starts with
threads in this process and the children join it once they are ready; on the CPU with real
child processes (PyAV into CPU shared memory), every frame compared with the single-process
PyAV backend. The same run with NVDEC: tests/decode/test_proc_late_gpu.py."""

from __future__ import annotations

import json
import logging
import time

import pytest
import torch

from vidpipe.decode.base import DecodeOptions
from vidpipe.decode.parallel import PyAVParallelDecoder
from vidpipe.decode.procpool import close_pools, is_starting, start_in_background
from vidpipe.decode.pyav import PyAVDecoder


@pytest.fixture(autouse=True)
def _no_pool():
    close_pools()
    yield
    close_pools()


def reference(path):
    dec = PyAVDecoder(str(path), options=DecodeOptions())
    return [(m.index, m.pts, b.data[i].clone()) for b in dec.batches(8) for i, m in enumerate(b.frames)]


def same(a, b):
    return len(a) == len(b) and all(
        x[0] == y[0] and x[1] == pytest.approx(y[1], abs=1e-9) and torch.equal(x[2], y[2]) for x, y in zip(a, b)
    )


def decoder(path):
    # a window of two batches: the threads decode only as far as the consumer has taken
    return PyAVParallelDecoder(str(path), workers=3, segment_frames=10, processes=2, buffer_bytes=1)


def decoder_of(info, options):
    """:func:`decoder` as a registered backend builds it (``vidpipe.detect``)."""
    return PyAVParallelDecoder(info, device="cpu", options=options, workers=3, segment_frames=10, processes=2,
                               buffer_bytes=1)  # fmt: skip


def test_the_children_join_a_run_that_started_without_them(make_clip, caplog):
    clip = make_clip(".mp4", frames=120, gop=10, bframes=2, width=160, height=96)
    assert start_in_background("cpu", 2)
    dec = decoder(clip.path)
    got = []
    with caplog.at_level(logging.INFO, logger="vidpipe.decode"):
        for n, b in enumerate(dec.batches(8)):
            got.extend((m.index, m.pts, b.data[i].clone()) for i, m in enumerate(b.frames))
            if n == 0:  # the children start (import PyTorch) while the threads here decode the start
                deadline = time.monotonic() + 120
                while is_starting("cpu") and time.monotonic() < deadline:
                    time.sleep(0.05)
    assert same(got, reference(clip.path))
    assert any("until the decoder processes are ready" in r.getMessage() for r in caplog.records)
    stats = dec.stats()
    assert stats["processes"] == 2 and not dec.partial and stats["frames_missing"] == 0
    joined = [r.getMessage() for r in caplog.records if "joined after" in r.getMessage()]
    assert len(joined) == 1, joined
    here = int(joined[0].split("joined after ")[1].split()[0])
    assert 1 <= here < 120  # the first frames came from the threads here, the rest from the children
    assert stats["frames_before_processes"] == here  # what the run's summary reports


def test_a_pool_that_never_comes_leaves_the_run_to_the_threads(make_clip, caplog):
    clip = make_clip(".mp4", frames=60, gop=10, width=160, height=96)

    class CloseWhenStarted(logging.Handler):  # the run has started here: drop the pool still starting
        def emit(self, record):
            if "until the decoder processes are ready" in record.getMessage():
                close_pools()  # (a pool dropped while starting closes itself once up)

    closer = CloseWhenStarted()
    logging.getLogger("vidpipe.decode.parallel").addHandler(closer)
    try:
        assert start_in_background("cpu", 2)
        dec = decoder(clip.path)
        with caplog.at_level(logging.INFO, logger="vidpipe.decode"):
            got = [(m.index, m.pts, b.data[i].clone()) for b in dec.batches(8) for i, m in enumerate(b.frames)]
    finally:
        logging.getLogger("vidpipe.decode.parallel").removeHandler(closer)
    assert same(got, reference(clip.path))
    assert dec.stats()["processes"] == 0 and not dec.partial
    assert dec.stats()["frames_before_processes"] == 60  # every frame decoded here
    assert any("decoding on with threads" in r.getMessage() for r in caplog.records)


def test_children_that_die_as_they_join_lose_no_frame(make_clip, caplog):
    """Both children are killed once the pool is ready, before the run has looked for them: the
    run takes them anyway (nothing has noticed yet), finds them gone, and decodes the rest here."""
    import os
    import signal

    from vidpipe.decode.procpool import get_pool

    clip = make_clip(".mp4", frames=120, gop=10, bframes=2, width=160, height=96)
    assert start_in_background("cpu", 2)
    dec = decoder(clip.path)
    got = []
    for n, b in enumerate(dec.batches(8)):
        got.extend((m.index, m.pts, b.data[i].clone()) for i, m in enumerate(b.frames))
        if n == 0:
            deadline = time.monotonic() + 120
            while is_starting("cpu") and time.monotonic() < deadline:
                time.sleep(0.05)
            pool = get_pool("cpu", None, start=False)
            for p in pool.procs:
                os.kill(p.pid, signal.SIGKILL)
                p.wait(timeout=30)
    assert same(got, reference(clip.path))
    assert not dec.partial and dec.stats()["frames_missing"] == 0


def test_the_run_summary_says_its_decode_started_before_the_processes(make_clip, monkeypatch):
    """Through ``vidpipe.detect``: a run whose decoder processes were still starting says so in
    its source's summary (``frames_before_processes``: here every frame, as the pool that was
    starting is dropped once the run has begun), and its detections are those of the plain PyAV
    backend, frame by frame."""
    import threading

    import vidpipe
    from vidpipe.decode import procpool, registry

    monkeypatch.setattr(registry, "_registered", dict(registry._registered))
    registry.register_backend("pyav-late", lambda info, *, device, options: decoder_of(info, options),
                              lambda info, device: None, gpu=False)  # fmt: skip
    clip = str(make_clip(".mp4", frames=60, gop=10, width=160, height=96).path)
    began = threading.Event()
    hello = procpool.DecoderProcessPool._hello

    def hello_once_the_run_began(pool):  # the model's load on a busy CPU may outlast the children's start
        began.wait(120)
        hello(pool)

    monkeypatch.setattr(procpool.DecoderProcessPool, "_hello", hello_once_the_run_began)

    class CloseWhenStarted(logging.Handler):
        def emit(self, record):
            if "until the decoder processes are ready" in record.getMessage():
                close_pools()
                began.set()

    def rows(name):
        run = vidpipe.detect(clip, device="cpu", decoder=name, batch_size=8)
        got = [(r.index, r.detections.boxes.tolist(), r.detections.class_ids.tolist()) for r in run]
        return got, run.summary()

    closer = CloseWhenStarted()
    logging.getLogger("vidpipe.decode.parallel").addHandler(closer)
    try:
        assert start_in_background("cpu", 2)
        got, source = rows("pyav-late")
    finally:
        began.set()
        logging.getLogger("vidpipe.decode.parallel").removeHandler(closer)
    want, plain = rows("pyav")
    assert len(got) == 60 and got == want
    extra = source.sources[0].extra
    assert extra["frames_before_processes"] == 60 and "decoder_processes" not in extra
    assert "frames_before_processes" not in plain.sources[0].extra
    # bench startup marks that run (and only it) in each run's frames/s, from the summary as written
    from vidpipe.bench.startup import _series_row

    runs = [{"wall": 1.0, "summary": json.loads(json.dumps(x.to_dict()))} for x in (source, plain)]
    marks = [r.endswith("*") for r in _series_row("clip", None, runs, 0.5, "cpu")["runs_fps"].split(" / ")]
    assert marks == [True, False]

