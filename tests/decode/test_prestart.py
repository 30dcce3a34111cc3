"""Decoder processes started in the background (vidpipe.decode.procpool.start_in_background) and
the command's early start of them (vidpipe.decode.prestart).

Real children are started (on the CPU: the same pool and worker program the GPU uses); the GPU
side (``vidpipe detect`` on a long 1080p file finds its processes ready) is in
tests/decode/test_nvdec_prestart.py.
"""

from __future__ import annotations

import sys
import threading
import time

import pytest
import torch

from vidpipe.decode.parallel import PyAVParallelDecoder
from vidpipe.decode.prestart import gpu_name, prestart_decoder_processes
from vidpipe.decode.procpool import close_pools, get_pool, is_starting, start_in_background


@pytest.fixture(autouse=True)
def _no_pools():
    close_pools()
    yield
    close_pools()


def test_a_pool_started_in_the_background_is_waited_for_and_used(make_clip):
    t0 = time.monotonic()
    assert start_in_background("cpu", 2)
    assert time.monotonic() - t0 < 0.5  # returns at once; the children start meanwhile
    assert not start_in_background("cpu", 2)  # one start at a time
    assert is_starting("cpu")
    assert get_pool(torch.device("cpu"), None, start=False) is None  # not ready yet: no waiting asked for
    pool = get_pool(torch.device("cpu"), None, start=False, wait_s=120)
    assert pool is not None and pool.size == 2 and not is_starting("cpu")
    assert not start_in_background("cpu", 2)  # it runs now
    clip = make_clip(".mp4", frames=48, gop=12, width=160, height=96)
    dec = PyAVParallelDecoder(str(clip.path), processes=2, workers=2)
    assert sum(len(b) for b in dec.batches(8)) == 48 and dec.processes_used == 2
    assert get_pool(torch.device("cpu"), None, start=False) is pool  # the decode used the started pool


def test_a_start_that_fails_leaves_threads(monkeypatch, caplog):
    monkeypatch.setattr(sys, "executable", "/bin/false")  # every child exits at once
    assert start_in_background("cpu", 2)
    assert get_pool(torch.device("cpu"), None, start=False, wait_s=60) is None
    assert not is_starting("cpu")
    assert "decoder processes could not start" in caplog.text
    monkeypatch.undo()
    assert get_pool(torch.device("cpu"), 2, start=True).size == 2  # a later start works


def test_a_start_waited_for_by_a_starting_caller(make_clip):
    assert start_in_background("cpu", 2)
    pool = get_pool(torch.device("cpu"), 2, start=True)  # waits for the background start, starts no second pool
    assert pool is not None and pool.size == 2


def test_close_pools_while_starting_closes_the_late_pool():
    assert start_in_background("cpu", 1)
    close_pools()
    assert not is_starting("cpu")
    for t in threading.enumerate():
        if t.name == "vidpipe-procs-start-cpu":
            t.join(120)
    assert get_pool(torch.device("cpu"), None, start=False) is None  # the late pool was closed, not kept


@pytest.mark.parametrize("device", ["cpu", "cuda:x", "mps"])
def test_no_gpu_name_for_other_devices(device):
    assert gpu_name(device) is None


def test_no_gpu_name_when_cuda_devices_are_hidden(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert gpu_name("cuda") is None and gpu_name("auto") is None


@pytest.mark.parametrize(
    "options",
    [{"processes": 0}, {"decoder": "pyav"}, {"decoder": "dali"}, {"device": "cpu"}],
)
def test_runs_that_would_not_use_processes_start_none(make_clip, options):
    clip = make_clip(".mp4", frames=12, gop=6, width=160, height=96)
    assert not prestart_decoder_processes([str(clip.path)], **{"device": "cuda", **options})
    assert not is_starting("cuda:0")


def test_urls_and_folders_are_not_probed(tmp_path, monkeypatch):
    monkeypatch.setattr("vidpipe.decode.prestart.gpu_name", lambda device: "cuda:0")
    monkeypatch.setattr("importlib.util.find_spec", lambda name: object())
    assert not prestart_decoder_processes(["rtsp://cam/1", str(tmp_path), "*.mp4"], device="cuda")


@pytest.fixture()
def a_gpu_here(monkeypatch):
    """The machine's side of the decision made true (a GPU's device node, PyNvVideoCodec); the
    start itself recorded instead of made (a real start is tested above and on the GPU)."""
    started = []
    monkeypatch.setattr("vidpipe.decode.prestart.gpu_name", lambda device: "cuda:1" if device == "cuda:1" else "cuda:0")
    monkeypatch.setattr("importlib.util.find_spec", lambda name: object())
    monkeypatch.setattr("vidpipe.decode.procpool.start_in_background",
                        lambda name, n, warm_for=None: started.append((name, n, warm_for)))
    return started


def _looked(deadline_s: float = 30.0) -> None:
    for t in threading.enumerate():
        if t.name == "vidpipe-prestart":
            t.join(deadline_s)


def test_a_short_file_starts_nothing(make_clip, a_gpu_here, monkeypatch):
    monkeypatch.setattr("vidpipe.decode.prestart.PROBE_BYTES", 0)
    clip = make_clip(".mp4", frames=12, gop=6, width=160, height=96)
    assert prestart_decoder_processes([str(clip.path)], device="cuda")  # looked at in a thread
    _looked()
    assert a_gpu_here == []


def test_small_files_are_not_probed(make_clip, a_gpu_here, monkeypatch):
    monkeypatch.setattr("vidpipe.decode.procpool.AUTO_START_FRAMES", 1)  # any length would do
    clip = make_clip(".mp4", frames=12, gop=6, width=160, height=96)
    assert not prestart_decoder_processes([str(clip.path)], device="cuda")  # under PROBE_BYTES: no thread
    assert a_gpu_here == [] and not [t for t in threading.enumerate() if t.name == "vidpipe-prestart"]


def test_a_file_the_decode_would_start_them_for_starts_them(make_clip, a_gpu_here, monkeypatch):
    monkeypatch.setattr("vidpipe.decode.procpool.AUTO_START_FRAMES", 40)  # a 40-frame clip is "long"
    monkeypatch.setattr("vidpipe.decode.prestart.PROBE_BYTES", 0)  # and big enough to look at
    clip = make_clip(".mp4", frames=40, gop=10, width=160, height=96)
    assert prestart_decoder_processes(["rtsp://cam/1", str(clip.path)], device="cuda:1")
    _looked()
    assert a_gpu_here == [("cuda:1", 4, str(clip.path))]  # DEFAULT_PROCESSES, their sessions for the clip
    a_gpu_here.clear()
    assert prestart_decoder_processes([str(clip.path)], device="cuda", max_frames=20)  # --max-frames: shorter
    _looked()
    assert a_gpu_here == []


def test_the_children_start_sessions_for_the_longest_file(make_clip, a_gpu_here, monkeypatch):
    monkeypatch.setattr("vidpipe.decode.procpool.AUTO_START_FRAMES", 30)
    monkeypatch.setattr("vidpipe.decode.prestart.PROBE_BYTES", 0)
    short = make_clip(".mp4", frames=31, gop=10, width=160, height=96)
    long = make_clip(".mp4", frames=60, gop=10, width=160, height=96)
    assert prestart_decoder_processes([str(short.path), str(long.path)], device="cuda")
    _looked()
    assert a_gpu_here == [("cuda:0", 4, str(long.path))]


def test_processes_asked_for_start_whatever_the_length(make_clip, a_gpu_here):
    clip = make_clip(".mp4", frames=12, gop=6, width=160, height=96)
    assert prestart_decoder_processes([str(clip.path)], device="auto", processes=3)
    assert a_gpu_here == [("cuda:0", 3, str(clip.path))]  # at once: no probe needed (the children probe it)


def test_options_the_run_refuses_start_nothing(make_clip, a_gpu_here, monkeypatch):
    monkeypatch.setattr("vidpipe.decode.prestart.PROBE_BYTES", 0)
    clip = make_clip(".mp4", frames=12, gop=6, width=160, height=96)
    assert not prestart_decoder_processes([str(clip.path)], device="cuda", start=2.0, end=1.0)  # no raise here
    assert a_gpu_here == []


@pytest.mark.parametrize("what", ["missing", "not-video"])
def test_a_child_given_a_file_it_cannot_start_sessions_for_goes_on(tmp_path, what, caplog):
    """A decoder child told to start NVDEC sessions for a file that is gone or not a video (or on
    a machine without NVDEC, as here) logs it and says hello anyway: the decode reports the file."""
    from vidpipe.decode.procworker import _warm_at_start

    path = tmp_path / "clip.mp4"
    if what == "not-video":
        path.write_bytes(b"not a video" * 100)
    with caplog.at_level("DEBUG", logger="vidpipe.decode.procworker"):
        _warm_at_start(str(path), "cuda:0", 4)  # returns: no raise
    assert "no NVDEC sessions started" in caplog.text


def test_files_long_enough_together_start_them(make_clip, a_gpu_here, monkeypatch):
    """Files that decode at once share the processes: their frames together count, and the
    children start their sessions for the longest."""
    monkeypatch.setattr("vidpipe.decode.procpool.AUTO_START_FRAMES", 70)
    monkeypatch.setattr("vidpipe.decode.prestart.PROBE_BYTES", 0)
    a = make_clip(".mp4", frames=30, gop=10, width=160, height=96)
    b = make_clip(".mp4", frames=45, gop=15, width=160, height=96)
    assert prestart_decoder_processes([str(a.path)], device="cuda")
    _looked()
    assert a_gpu_here == []  # 30 frames alone: threads
    assert prestart_decoder_processes([str(a.path), str(b.path)], device="cuda")
    _looked()
    assert a_gpu_here == [("cuda:0", 4, str(b.path))]  # 75 together
