"""Decoder processes started in the background (vidpipe.decode.procpool.start_in_background), and
the command's early start of them or of its own NVDEC sessions (vidpipe.decode.prestart).

Real children are started (on the CPU: the same pool and worker program the GPU uses); the GPU
side (``vidpipe detect`` on a long 1080p file finds its processes ready) is in
tests/decode/test_nvdec_prestart.py.
"""

from __future__ import annotations

import sys
import threading
import time
import types

import pytest
import torch

from vidpipe.decode.parallel import PyAVParallelDecoder
from vidpipe.decode.prestart import gpu_name, prestart_decoding
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
    assert not prestart_decoding([str(clip.path)], **{"device": "cuda", **options})
    assert not is_starting("cuda:0")


def test_urls_and_folders_are_not_probed(tmp_path, monkeypatch):
    monkeypatch.setattr("vidpipe.decode.prestart.gpu_name", lambda device: "cuda:0")
    monkeypatch.setattr("importlib.util.find_spec", lambda name: object())
    assert not prestart_decoding(["rtsp://cam/1", str(tmp_path), "*.mp4"], device="cuda")


@pytest.fixture()
def a_gpu_here(monkeypatch):
    """The machine's side of the decision made true (a GPU's device node, PyNvVideoCodec); the
    start itself recorded instead of made (a real start is tested above and on the GPU)."""
    started = []
    nvdec = types.ModuleType("vidpipe.decode.nvdec")  # it imports only where PyNvVideoCodec does
    nvdec.default_workers = lambda gpu, codec: 21  # an H200's 7 engines
    monkeypatch.setitem(sys.modules, "vidpipe.decode.nvdec", nvdec)
    monkeypatch.setattr("vidpipe.decode.prestart.gpu_name", lambda device: "cuda:1" if device == "cuda:1" else "cuda:0")
    monkeypatch.setattr("importlib.util.find_spec", lambda name: object())
    monkeypatch.setattr("vidpipe.decode.procpool.start_in_background",
                        lambda name, n, warm_for=None: started.append((name, n, warm_for)))
    monkeypatch.setattr("vidpipe.prewarm.nvdec_reads", lambda info, gpu: info)  # NVDEC reads it
    monkeypatch.setattr("vidpipe.decode.nvdec_early.pool_sessions",
                        lambda info, gpu, count, stop=None: started.append(("sessions", gpu, info.location, count)) or count)
    return started


def _looked(deadline_s: float = 30.0) -> None:
    for t in threading.enumerate():
        if t.name == "vidpipe-prestart":
            t.join(deadline_s)


def test_a_short_file_starts_nothing(make_clip, a_gpu_here, monkeypatch):
    monkeypatch.setattr("vidpipe.decode.prestart.PROBE_BYTES", 0)
    clip = make_clip(".mp4", frames=12, gop=6, width=160, height=96)
    assert prestart_decoding([str(clip.path)], device="cuda")  # looked at in a thread
    _looked()
    assert a_gpu_here == []


def test_small_files_are_not_probed(make_clip, a_gpu_here, monkeypatch):
    monkeypatch.setattr("vidpipe.decode.prestart.COMMAND_PROCESS_FRAMES", 1)  # any length would do
    clip = make_clip(".mp4", frames=12, gop=6, width=160, height=96)
    assert not prestart_decoding([str(clip.path)], device="cuda")  # under PROBE_BYTES: no thread
    assert a_gpu_here == [] and not [t for t in threading.enumerate() if t.name == "vidpipe-prestart"]


def test_a_file_the_decode_would_start_them_for_starts_them(make_clip, a_gpu_here, monkeypatch):
    monkeypatch.setattr("vidpipe.decode.prestart.COMMAND_PROCESS_FRAMES", 40)  # a 40-frame clip is "long"
    monkeypatch.setattr("vidpipe.decode.prestart.PROBE_BYTES", 0)  # and big enough to look at
    clip = make_clip(".mp4", frames=40, gop=10, width=160, height=96)
    assert prestart_decoding(["rtsp://cam/1", str(clip.path)], device="cuda:1")
    _looked()
    assert a_gpu_here == [("cuda:1", 4, str(clip.path))]  # DEFAULT_PROCESSES, their sessions for the clip
    a_gpu_here.clear()
    assert prestart_decoding([str(clip.path)], device="cuda", max_frames=20)  # --max-frames: shorter
    _looked()
    assert a_gpu_here == []


@pytest.mark.parametrize("suffix", [".mp4", ".mkv"])
def test_mp4_lengths_are_read_at_once(make_clip, a_gpu_here, monkeypatch, suffix):
    """An MP4's length comes from its index before prestart_decoding returns (no thread, no PyAV
    beside PyTorch's import: the children start sooner); a Matroska file's from PyAV in the
    thread, to the same decision."""
    monkeypatch.setattr("vidpipe.decode.prestart.COMMAND_PROCESS_FRAMES", 40)
    monkeypatch.setattr("vidpipe.decode.prestart.PROBE_BYTES", 0)
    clip = make_clip(suffix, frames=40, gop=10, width=160, height=96)
    assert prestart_decoding([str(clip.path)], device="cuda")
    if suffix == ".mp4":
        assert a_gpu_here == [("cuda:0", 4, str(clip.path))]  # started on return
    _looked()
    assert a_gpu_here == [("cuda:0", 4, str(clip.path))]


def test_the_children_start_sessions_for_the_longest_file(make_clip, a_gpu_here, monkeypatch):
    monkeypatch.setattr("vidpipe.decode.prestart.COMMAND_PROCESS_FRAMES", 30)
    monkeypatch.setattr("vidpipe.decode.prestart.PROBE_BYTES", 0)
    short = make_clip(".mp4", frames=31, gop=10, width=160, height=96)
    long = make_clip(".mp4", frames=60, gop=10, width=160, height=96)
    assert prestart_decoding([str(short.path), str(long.path)], device="cuda")
    _looked()
    assert a_gpu_here == [("cuda:0", 4, str(long.path))]


def test_processes_asked_for_start_whatever_the_length(make_clip, a_gpu_here):
    clip = make_clip(".mp4", frames=12, gop=6, width=160, height=96)
    assert prestart_decoding([str(clip.path)], device="auto", processes=3)
    assert a_gpu_here == [("cuda:0", 3, str(clip.path))]  # at once: no probe needed (the children probe it)


def test_options_the_run_refuses_start_nothing(make_clip, a_gpu_here, monkeypatch):
    monkeypatch.setattr("vidpipe.decode.prestart.PROBE_BYTES", 0)
    clip = make_clip(".mp4", frames=12, gop=6, width=160, height=96)
    assert not prestart_decoding([str(clip.path)], device="cuda", start=2.0, end=1.0)  # no raise here
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
    monkeypatch.setattr("vidpipe.decode.prestart.COMMAND_PROCESS_FRAMES", 70)
    monkeypatch.setattr("vidpipe.decode.prestart.PROBE_BYTES", 0)
    a = make_clip(".mp4", frames=30, gop=10, width=160, height=96)
    b = make_clip(".mp4", frames=45, gop=15, width=160, height=96)
    assert prestart_decoding([str(a.path)], device="cuda")
    _looked()
    assert a_gpu_here == []  # 30 frames alone: auto reads so short a clip with PyAV
    assert prestart_decoding([str(a.path), str(b.path)], device="cuda")
    _looked()
    assert a_gpu_here == [("cuda:0", 4, str(b.path))]  # 75 together


@pytest.mark.parametrize(
    "case",
    ["nvdec asked for", "auto, a file too long for PyAV", "auto, two files", "threads asked for, a long file"],
)
def test_a_file_decoded_in_this_process_gets_its_sessions_started(make_clip, a_gpu_here, monkeypatch, case):
    """Where the run decodes with NVDEC in its own process, the command starts the sessions of
    its longest file (as many as the decode would start, while it imports PyTorch), not decoder
    processes."""
    monkeypatch.setattr("vidpipe.decode.prestart.PROBE_BYTES", 0)
    monkeypatch.setattr("vidpipe.decode.prestart.COMMAND_PROCESS_FRAMES", 60)
    short = make_clip(".mp4", frames=8, gop=4, width=160, height=96)  # 56 frames together: threads
    clip = make_clip(".mp4", frames=48, gop=12, width=160, height=96)
    inputs, options = [str(clip.path)], {}
    if case == "nvdec asked for":
        options = {"decoder": "nvdec"}
    elif case == "auto, a file too long for PyAV":
        monkeypatch.setattr("vidpipe.decode.auto_choice.PYAV_FRAMES_BELOW", ((0, 30),))
    elif case == "auto, two files":
        inputs = [str(short.path), str(clip.path)]
    else:
        monkeypatch.setattr("vidpipe.decode.prestart.COMMAND_PROCESS_FRAMES", 40)  # long enough for processes
        monkeypatch.setattr("vidpipe.decode.auto_choice.PYAV_FRAMES_BELOW", ((0, 30),))  # and for NVDEC
        options = {"processes": 0}  # but threads asked for
    early = prestart_decoding(inputs, device="cuda", **options)
    assert early is not None
    _looked()  # (a settle() before the probe is done starts none)
    frames = 48 + (8 if case == "auto, two files" else 0)  # files decoding at once share the sessions
    assert a_gpu_here == [("sessions", 0, str(clip.path), round((frames / 32.5) ** 0.5))]


def test_settle_stops_the_sessions_and_waits_for_the_one_starting(make_clip, a_gpu_here, monkeypatch):
    """The command settles the early start before its run captures the CUDA graph: no session
    starts after it returns."""
    monkeypatch.setattr("vidpipe.decode.prestart.PROBE_BYTES", 0)
    seen = []
    starting = threading.Event()

    def sessions(info, gpu, count, stop=None):
        starting.set()
        seen.append(stop.wait(30))  # a session start that lasts until settle() asks it to stop
        time.sleep(0.2)  # the one being started still finishes
        seen.append("finished")
        return 1

    monkeypatch.setattr("vidpipe.decode.nvdec_early.pool_sessions", sessions)
    clip = make_clip(".mp4", frames=48, gop=12, width=160, height=96)
    early = prestart_decoding([str(clip.path)], device="cuda", decoder="nvdec")
    assert starting.wait(30)
    early.settle()
    assert seen == [True, "finished"]
    early.settle()  # again: nothing to wait for


def test_settle_does_not_wait_for_decoder_processes(make_clip, a_gpu_here):
    clip = make_clip(".mp4", frames=12, gop=6, width=160, height=96)
    early = prestart_decoding([str(clip.path)], device="cuda", processes=2)
    t0 = time.monotonic()
    early.settle()
    assert time.monotonic() - t0 < 1 and a_gpu_here == [("cuda:0", 2, str(clip.path))]


def test_a_file_nvdec_cannot_read_gets_no_sessions(make_clip, a_gpu_here, monkeypatch):
    monkeypatch.setattr("vidpipe.decode.prestart.PROBE_BYTES", 0)
    monkeypatch.setattr("vidpipe.prewarm.nvdec_reads", lambda info, gpu: None)  # e.g. 4:4:4 on this GPU
    clip = make_clip(".mp4", frames=48, gop=12, width=160, height=96)
    prestart_decoding([str(clip.path)], device="cuda", decoder="nvdec").settle()
    assert a_gpu_here == []
