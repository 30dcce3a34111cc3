"""vidpipe.prewarm: which runs start the host-side preparation thread, the short-file rule it
shares with ``auto``'s choice, and Triton's cache key computed once however many threads ask."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
import threading

import pytest

from vidpipe.decode.auto_choice import pyav_frame_limit
from vidpipe.decode.base import DecodeOptions
from vidpipe.decode.probe import probe
from vidpipe.prewarm import pyav_reads, start_prewarm
from vidpipe.sources.spec import SourceSpec


@pytest.mark.parametrize(
    ("kind", "device", "decoder"),
    [("file", "cpu", "auto"), ("file", "cuda", "pyav"), ("file", "auto", "dali"), ("images", "cuda", "auto")],
)
def test_no_thread_for_a_run_without_nvdec_frames(tmp_path, kind, device, decoder):
    spec = SourceSpec(kind=kind, location=str(tmp_path))
    assert start_prewarm([spec], device=device, decoder=decoder) is None


def test_no_thread_without_an_nvidia_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU visible, judged without PyTorch
    spec = SourceSpec(kind="file", location=str(tmp_path / "a.mp4"))
    assert start_prewarm([spec], device="cuda", decoder="auto") is None


def test_the_short_file_rule_is_autos(make_clip):
    """A short only input is read with PyAV (no NV12 kernel to prepare); a long one, or one cut
    to fewer frames by the options, is judged by the frames the run decodes."""
    info = probe(make_clip(".mp4", frames=30).path)
    assert pyav_reads(info, None)  # 30 frames: below every size class's limit at any CPU count
    long = dataclasses.replace(info, frame_count=100_000)
    assert not pyav_reads(long, None)
    assert pyav_reads(long, DecodeOptions(max_frames=10))
    limit = pyav_frame_limit(long, cpus=1)
    assert limit == 2_400 // 8  # a small frame, one CPU: the 8-CPU measurement shrunk
    assert pyav_frame_limit(long, cpus=64) == 2_400


def test_tritons_cache_key_is_computed_once_for_every_thread():
    pytest.importorskip("triton")
    code = textwrap.dedent(
        """
        import threading
        from vidpipe.ops import triton_kernels as tk
        import triton.runtime.cache as c
        results = []
        threads = [threading.Thread(target=lambda: results.append(tk.prepare_cache_key())) for _ in range(4)]
        for t in threads: t.start()
        for t in threads: t.join()
        info = c.triton_key.cache_info()
        print(results, info.misses, info.currsize)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["[True,", "True,", "True,", "True]", "1", "1"], out.stdout


@pytest.mark.parametrize("what", ["missing", "not-video", "folder"])
def test_a_bad_input_stops_the_preparation_quietly(tmp_path, what, caplog):
    """The thread never raises: a file that is gone, not a video or a folder is logged at debug
    level and left to the run, which reports it (a live stream's URL never reaches it: it
    prepares no file then)."""
    from vidpipe.prewarm import _prepare

    path = {"missing": tmp_path / "gone.mp4", "not-video": tmp_path / "a.mp4", "folder": tmp_path}[what]
    if what == "not-video":
        path.write_bytes(b"not a video" * 100)
    with caplog.at_level("DEBUG", logger="vidpipe.prewarm"):
        _prepare(str(path), 0, triton=False, short_rule=True, options=None)  # returns: no raise
    assert "start-up preparation stopped" in caplog.text


@pytest.mark.parametrize("what", ["missing", "not-video", "folder"])
def test_a_decoder_process_given_a_bad_file_starts_no_session_and_waits_for_nothing(tmp_path, what):
    """A decoder process's preparation (``ChildPrewarm``) for a file that is gone, not a video or
    a folder ends with no session and no stream info: the process then says hello as before and
    the parent's decode reports the file."""
    from vidpipe.prewarm import ChildPrewarm

    path = {"missing": tmp_path / "gone.mp4", "not-video": tmp_path / "a.mp4", "folder": tmp_path}[what]
    if what == "not-video":
        path.write_bytes(b"not a video" * 100)
    early = ChildPrewarm(str(path), 0, processes=4)
    assert early.wait() == 0 and early.info is None
    assert early.wait() == 0  # asked again: still none, no raise


@pytest.fixture()
def processes_started(monkeypatch):
    """A GPU's side of the decision made true (its device node, PyNvVideoCodec); the start of the
    decoder processes recorded instead of made, and the preparation thread's work skipped (real
    starts: tests/decode/test_prestart.py on the CPU, tests/decode/test_nvdec_prestart.py)."""
    started = []
    monkeypatch.setattr("vidpipe.decode.prestart.gpu_name", lambda device: "cuda:0")
    monkeypatch.setattr("importlib.util.find_spec", lambda name: object())
    monkeypatch.setattr("vidpipe.decode.procpool.start_in_background",
                        lambda name, n, warm_for=None: started.append((name, n, warm_for)))  # fmt: skip
    monkeypatch.setattr("vidpipe.prewarm._prepare", lambda *a, **k: None)
    monkeypatch.setattr("vidpipe.decode.prestart.COMMAND_PROCESS_FRAMES", 50)  # a 50-frame clip is "long"
    monkeypatch.setattr("vidpipe.decode.auto_choice.PYAV_FRAMES_BELOW", ((0, 55),))  # auto: NVDEC from 55
    monkeypatch.setattr("vidpipe.decode.prestart.PROBE_BYTES", 0)
    return started


@pytest.mark.parametrize(
    ("suffix", "frames", "options", "decoder", "expect"),
    [
        (".mp4", 50, {}, "auto", 4),  # long enough: DEFAULT_PROCESSES, at the call's start
        (".mp4", 49, {}, "auto", None),  # shorter: threads, nothing started
        (".mp4", 60, {"max_frames": 10}, "auto", None),  # cut short by the options (PyAV's length, cut)
        (".mp4", 120, {"max_frames": 60}, "auto", 4),  # cut, still long enough
        (".mp4", 60, {"decoder_processes": 2}, "auto", 2),  # asked for, and auto reads it with NVDEC
        (".mp4", 50, {"decoder_processes": 2}, "auto", None),  # asked for, but auto may read it with PyAV
        (".mp4", 50, {"decoder_processes": 2}, "nvdec", 2),  # asked for, NVDEC asked for: whatever the length
        (".mp4", 60, {"decoder_processes": 2, "max_frames": 10}, "auto", None),  # cut: auto may read it with PyAV
        (".mp4", 60, {"decoder_processes": 0}, "auto", None),  # threads asked for
        (".mkv", 60, {}, "auto", 4),  # no index to read at once: PyAV's length, in a thread
        (".mkv", 49, {}, "auto", None),
        (".mkv", 60, {"decoder_processes": 2}, "auto", 2),
        (".mkv", 50, {"decoder_processes": 2}, "auto", None),
        (".mkv", 60, {"max_frames": 10}, "auto", None),
    ],
    ids=["long", "short", "max-frames", "max-frames-long", "asked", "asked-pyav-may-read", "asked-nvdec",
         "asked-cut-short", "threads", "mkv", "mkv-short", "mkv-asked", "mkv-asked-pyav-may-read", "mkv-max-frames"],
)
def test_a_scripts_run_starts_its_decoder_processes_at_the_call(make_clip, processes_started, suffix, frames,
                                                               options, decoder, expect):  # fmt: skip
    """``vidpipe.detect`` from a script starts the decoder processes its decode will use beside
    the model's load, not at the decode (which waits for them): from the command's length, or
    asked for where NVDEC reads the file."""
    clip = make_clip(suffix, frames=frames, gop=10, width=160, height=96)
    spec = SourceSpec(kind="file", location=str(clip.path))
    start_prewarm([spec], device="cuda", decoder=decoder, options=DecodeOptions(**options))
    _length_read()
    assert processes_started == ([] if expect is None else [("cuda:0", expect, str(clip.path))])


def _length_read() -> None:
    """Wait for the thread that reads lengths with PyAV (containers without an index), if any."""
    for thread in threading.enumerate():
        if thread.name == "vidpipe-prewarm-processes":
            thread.join(30)


@pytest.mark.parametrize("what", ["garbage", "small"])
def test_a_file_that_is_no_video_or_too_small_to_be_long_starts_nothing(tmp_path, processes_started, monkeypatch,
                                                                        make_clip, what):  # fmt: skip
    from vidpipe.decode import prestart

    probed = []
    read = prestart.frames_together
    monkeypatch.setattr(prestart, "frames_together", lambda *a: probed.append(a) or read(*a))
    if what == "garbage":
        path = tmp_path / "a.mkv"
        path.write_bytes(b"\x1a\x45\xdf\xa3 not matroska" * 1000)
    else:  # long enough, but under PROBE_BYTES: not read at all
        monkeypatch.setattr(prestart, "PROBE_BYTES", 1 << 40)
        path = make_clip(".mkv", frames=60, gop=10, width=160, height=96).path
    start_prewarm([SourceSpec(kind="file", location=str(path))], device="cuda", decoder="auto",
                  options=DecodeOptions())  # fmt: skip
    _length_read()
    assert processes_started == [] and len(probed) == (1 if what == "garbage" else 0)


@pytest.mark.parametrize("suffix", [".mp4", ".mkv"])
def test_processes_that_run_or_start_already_are_not_decided_again(make_clip, processes_started, monkeypatch,
                                                                   suffix):  # fmt: skip
    """The command's own start (or an earlier call) started them: no index read, no PyAV thread."""
    from vidpipe.decode import prestart

    monkeypatch.setattr("vidpipe.decode.procpool.is_up", lambda device: True)
    monkeypatch.setattr(prestart, "start_processes_now", lambda *a, **k: pytest.fail("decided again"))
    clip = make_clip(suffix, frames=60, gop=10, width=160, height=96)
    start_prewarm([SourceSpec(kind="file", location=str(clip.path))], device="cuda", decoder="auto",
                  options=DecodeOptions())  # fmt: skip
    assert not any(t.name == "vidpipe-prewarm-processes" for t in threading.enumerate())
    assert processes_started == []


def test_several_files_start_the_processes_asked_for_whatever_their_length(make_clip, processes_started):
    clips = [make_clip(".mkv", frames=20, gop=10, width=160, height=96).path for _ in range(2)]
    specs = [SourceSpec(kind="file", location=str(p)) for p in clips]
    start_prewarm(specs, device="cuda", decoder="auto", options=DecodeOptions(decoder_processes=3))
    assert processes_started == [("cuda:0", 3, str(clips[0]))]


def test_a_run_with_a_live_stream_starts_no_process_early(make_clip, processes_started):
    clip = make_clip(".mp4", frames=60, gop=10, width=160, height=96)
    specs = [SourceSpec(kind="file", location=str(clip.path)), SourceSpec(kind="live", location="rtsp://cam/1")]
    start_prewarm(specs, device="cuda", decoder="auto", options=DecodeOptions())
    assert processes_started == []
