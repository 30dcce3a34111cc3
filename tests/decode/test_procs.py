"""Decoder processes (vidpipe.decode.procpool / procrun / procworker) on the CPU.

The same orchestration runs NVDEC sessions with a CUDA IPC ring on the GPU
(tests/decode/test_nvdec.py); here real child processes decode with PyAV into CPU shared
memory, and everything is compared with the single-process PyAV backend: same frames, numbers,
timestamps and pixels, with a ring much smaller than the file (so children wait for the
consumer), stopping early, a caller that keeps every batch, damaged input, and children killed mid-run
(their segments are decoded again by the others, or by threads here: no frame lost).
"""

from __future__ import annotations

import os
import signal

import pytest
import torch
from media import corrupt_middle

from vidpipe.decode.base import DecodeOptions
from vidpipe.decode.parallel import PyAVParallelDecoder
from vidpipe.decode.procpool import close_pools, get_pool
from vidpipe.decode.pyav import PyAVDecoder


@pytest.fixture(scope="module", autouse=True)
def _stop_children():
    yield
    close_pools()


def reference(path, options=None):
    dec = PyAVDecoder(str(path), options=options or DecodeOptions())
    return [(m.index, m.pts, b.data[i].clone()) for b in dec.batches(8) for i, m in enumerate(b.frames)]


def frames(dec, batch_size=8):
    return [(m.index, m.pts, b.data[i].clone()) for b in dec.batches(batch_size) for i, m in enumerate(b.frames)]


def same(a, b):
    return len(a) == len(b) and all(
        x[0] == y[0] and x[1] == pytest.approx(y[1], abs=1e-9) and torch.equal(x[2], y[2]) for x, y in zip(a, b)
    )


def in_processes(path, *, options=None, buffer_bytes=1 << 30, **kwargs):
    return PyAVParallelDecoder(
        str(path), options=options, workers=4, segment_frames=10, processes=2, buffer_bytes=buffer_bytes, **kwargs
    )


@pytest.mark.parametrize(
    "options",
    [DecodeOptions(), DecodeOptions(frame_skip=3), DecodeOptions(start=1.0, end=2.5, frame_skip=2, max_frames=9)],
    ids=["all", "skip3", "range-skip-max"],
)
@pytest.mark.parametrize("batch_size", [8, 5])
def test_processes_match_the_pyav_backend(make_clip, options, batch_size):
    clip = make_clip(".mp4", frames=100, gop=10, bframes=2, width=160, height=96)
    # a ring of 3 batches for a 100-frame file: children wait for the consumer all the time
    dec = in_processes(clip.path, options=options, buffer_bytes=1)
    got = frames(dec, batch_size)
    assert same(got, reference(clip.path, options))
    st = dec.stats()
    assert st["processes"] == 2 and st["workers"] == 4 and st["frames_missing"] == 0 and not st["partial"]
    assert st["frames_before_processes"] is None  # the pool was up before the decode started


def test_other_containers(make_clip):
    clip = make_clip(".mkv", codec="hevc", frames=60, gop=10, width=160, height=96)
    assert same(frames(in_processes(clip.path)), reference(clip.path))


def test_a_kept_batch_is_never_overwritten(make_clip):
    clip = make_clip(".mp4", frames=100, gop=10, bframes=2, width=160, height=96)
    dec = in_processes(clip.path, buffer_bytes=1)  # 3 ring slots, 13 batches: slots are reused
    kept = list(dec.batches(8))  # every batch kept, none copied
    got = [(m.index, m.pts, b.data[i]) for b in kept for i, m in enumerate(b.frames)]
    assert same(got, reference(clip.path))
    again = frames(dec)  # the next run gets fresh slots for the ones still held
    assert same(again, reference(clip.path))
    assert same([(m.index, m.pts, b.data[i]) for b in kept for i, m in enumerate(b.frames)], reference(clip.path))


def test_without_use_counts_a_kept_batch_is_still_never_overwritten(make_clip, monkeypatch, caplog):
    """Where PyTorch cannot report storage use counts the ring fails closed: every slot is renewed,
    so batches the caller keeps stay intact (and it says so, once)."""
    import logging

    monkeypatch.setattr("vidpipe.decode.procring._use_count", lambda t: None)
    clip = make_clip(".mp4", frames=60, gop=10, width=160, height=96)
    dec = in_processes(clip.path, buffer_bytes=1)  # 3 ring slots, 8 batches: slots are reused
    with caplog.at_level(logging.WARNING, logger="vidpipe.decode.procring"):
        kept = list(dec.batches(8))
    assert same([(m.index, m.pts, b.data[i]) for b in kept for i, m in enumerate(b.frames)], reference(clip.path))
    assert sum("storage use counts" in r.getMessage() for r in caplog.records) == 1


def test_stopping_early_then_decoding_again(make_clip):
    clip = make_clip(".mp4", frames=100, gop=10, bframes=2, width=160, height=96)
    dec = in_processes(clip.path, buffer_bytes=1)
    it = dec.batches(8)
    first = next(it)
    assert len(first) == 8
    it.close()  # children stop their job; the ring is quiet before the next run
    assert same(frames(dec), reference(clip.path))


def test_damaged_file_keeps_what_decodes(make_clip, tmp_path):
    clip = make_clip(".mp4", frames=60, gop=10, width=160, height=96)
    bad = corrupt_middle(clip.path, dst=tmp_path / "bad.mp4")
    threads = frames(PyAVParallelDecoder(str(bad), workers=4, segment_frames=10))
    got = frames(in_processes(bad))
    assert same(got, threads)


def _kill_while_decoding(path, *, kill_after, victims, caplog):
    """Decode ``path`` in 2 processes with a 3-batch ring (children wait for the consumer, so
    each has segments in flight), SIGKILL the children ``victims`` once ``kill_after`` batches
    arrived; returns the frames, the decoder and the pids killed."""
    import logging

    dec = in_processes(path, buffer_bytes=1)
    pool = get_pool(torch.device("cpu"), 2, start=True)
    pids = [pool.procs[v].pid for v in victims]
    got = []
    with caplog.at_level(logging.WARNING, logger="vidpipe.decode.procpool"):
        for n, batch in enumerate(dec.batches(8)):
            if n == kill_after:
                for pid in pids:
                    os.kill(pid, signal.SIGKILL)
            got.extend((m.index, m.pts, batch.data[i].clone()) for i, m in enumerate(batch.frames))
    return got, dec, pids


def test_a_child_killed_mid_run_loses_no_frame(make_clip, caplog):
    clip = make_clip(".mp4", frames=100, gop=10, bframes=2, width=160, height=96)
    got, dec, (pid,) = _kill_while_decoding(clip.path, kill_after=1, victims=[0], caplog=caplog)
    # every frame once, in order, the same pixels as one PyAV decoder
    assert same(got, reference(clip.path))
    st = dec.stats()
    assert not dec.partial and st["frames_missing"] == 0 and st["processes_lost"] == 1
    warned = [r.getMessage() for r in caplog.records if "died" in r.getMessage()]
    assert len(warned) == 1 and f"pid {pid}" in warned[0] and "exit code -9, killed by SIGKILL" in warned[0]
    # the broken pool is replaced on the next use
    assert same(frames(in_processes(clip.path)), reference(clip.path))


def test_when_every_child_dies_the_rest_is_decoded_here(make_clip, caplog):
    clip = make_clip(".mp4", frames=100, gop=10, bframes=2, width=160, height=96)
    got, dec, pids = _kill_while_decoding(clip.path, kill_after=1, victims=[0, 1], caplog=caplog)
    assert same(got, reference(clip.path))
    assert not dec.partial and dec.stats()["processes_lost"] == 2
    assert sum("died" in r.getMessage() for r in caplog.records) == 2


def _side_by_side(decs, batch_size=8, *, each_batch=None):
    """Run the decoders at the same time (their batches taken in turn) -> the frames of each.
    ``each_batch(k, n)``: called before decoder ``k``'s ``n``-th batch is taken."""
    its = [d.batches(batch_size) for d in decs]
    out: list[list] = [[] for _ in decs]
    running = set(range(len(decs)))
    n = 0
    while running:
        for k in sorted(running):
            if each_batch is not None:
                each_batch(k, n)
            batch = next(its[k], None)
            if batch is None:
                running.discard(k)
                continue
            out[k].extend((m.index, m.pts, batch.data[i].clone()) for i, m in enumerate(batch.frames))
        n += 1
    return out


def test_files_decoding_at_once_share_the_processes(make_clip):
    """Two files decoding at the same time (``files_at_once=2``) each take one of the pool's two
    children, side by side, and each gets exactly what one PyAV decoder gives; alone, a file
    takes both."""
    a = make_clip(".mp4", frames=100, gop=10, bframes=2, width=160, height=96)
    b = make_clip(".mkv", codec="hevc", frames=60, gop=10, width=128, height=80)
    two = DecodeOptions(files_at_once=2)
    decs = [in_processes(a.path, options=two, buffer_bytes=1), in_processes(b.path, options=two, buffer_bytes=1)]
    pool = get_pool(torch.device("cpu"), 2, start=True)
    seen = []
    got = _side_by_side(decs, each_batch=lambda k, n: seen.append(pool.lent) if n == 1 else None)
    assert same(got[0], reference(a.path)) and same(got[1], reference(b.path))
    assert [d.stats()["processes"] for d in decs] == [1, 1]
    assert 2 in seen  # both children lent at once, one to each file
    assert pool.lent == 0  # given back
    alone = in_processes(a.path)
    assert same(frames(alone), reference(a.path)) and alone.stats()["processes"] == 2


def test_a_file_still_decoding_takes_the_processes_a_finished_one_gave_back(make_clip, caplog, monkeypatch):
    """Two files start side by side, one child each; the short one ends, and once its child has
    been free for ``GROW_IDLE_S`` the long one takes it too: the rest of its segments are shared
    by both, its frames are still exactly one PyAV decoder's."""
    import logging
    import time

    from vidpipe.decode import procrun

    monkeypatch.setattr(procrun, "GROW_IDLE_S", 0.2)  # (0.5 s by default: a loaded CI machine is slow)
    long = make_clip(".mp4", frames=240, gop=10, width=160, height=96)
    short = make_clip(".mp4", frames=40, gop=10, width=160, height=96)
    two = DecodeOptions(files_at_once=2)
    decs = [in_processes(long.path, options=two, buffer_bytes=1), in_processes(short.path, options=two, buffer_bytes=1)]
    pool = get_pool(torch.device("cpu"), 2, start=True)
    lent = []

    def pace(k, n):  # the long file's consumer is slow: its decode outlives the short one by far
        if k == 0:
            lent.append(pool.lent)
            time.sleep(0.04)

    with caplog.at_level(logging.INFO, logger="vidpipe.decode.procrun"):
        got = _side_by_side(decs, each_batch=pace)
    assert same(got[0], reference(long.path)) and same(got[1], reference(short.path))
    assert decs[1].stats()["processes"] == 1
    assert decs[0].stats()["processes"] == 2, lent  # it grew
    assert "1 more decoder process(es) joined (2 now)" in caplog.text
    # both lent, then the short file's child given back, then taken by the long one
    first_two = lent.index(2)
    given_back = lent.index(1, first_two)
    assert 2 in lent[given_back:], lent
    assert pool.lent == 0  # every child given back at the end


def test_a_file_does_not_take_the_processes_no_file_has_had_yet(make_clip, monkeypatch):
    """A child no decode has had yet is kept for the files still starting (their planning may
    take longer than the idle time): a file told it shares the pool with another one keeps its
    one child however long it runs alone."""
    import time

    from vidpipe.decode import procrun

    monkeypatch.setattr(procrun, "GROW_IDLE_S", 0.1)
    long = make_clip(".mp4", frames=160, gop=10, width=160, height=96)
    dec = in_processes(long.path, options=DecodeOptions(files_at_once=2), buffer_bytes=1)
    got = []
    for batch in dec.batches(8):
        got.extend((m.index, m.pts, batch.data[i].clone()) for i, m in enumerate(batch.frames))
        time.sleep(0.05)
    assert same(got, reference(long.path))
    assert dec.stats()["processes"] == 1


def test_a_grown_run_stopped_early_then_decoding_again(make_clip, monkeypatch):
    """A run that took a second child mid-way and is dropped early leaves the pool whole: the
    next decode of the same file takes both children and gets every frame."""
    import time

    from vidpipe.decode import procrun

    monkeypatch.setattr(procrun, "GROW_IDLE_S", 0.2)
    long = make_clip(".mp4", frames=240, gop=10, width=160, height=96)
    short = make_clip(".mp4", frames=40, gop=10, width=160, height=96)
    two = DecodeOptions(files_at_once=2)
    a, b = in_processes(long.path, options=two, buffer_bytes=1), in_processes(short.path, options=two, buffer_bytes=1)
    it_a = a.batches(8)
    next(it_a)
    assert sum(len(x.frames) for x in b.batches(8)) == 40  # the short file, beside it, to its end
    assert b.stats()["processes"] == 1
    for _ in range(20):  # the long one goes on slowly: its child and the given-back one
        next(it_a)
        time.sleep(0.06)
    it_a.close()
    assert a.stats()["processes"] == 2
    pool = get_pool(torch.device("cpu"), 2, start=True)
    assert pool.lent == 0
    again = in_processes(long.path)
    assert same(frames(again), reference(long.path)) and again.stats()["processes"] == 2


def test_a_file_that_finds_no_free_process_uses_threads(make_clip):
    """The default (one file at a time): the first decode takes every child, a second one
    running meanwhile decodes with threads here; both complete."""
    a = make_clip(".mp4", frames=60, gop=10, width=160, height=96)
    decs = [in_processes(a.path, buffer_bytes=1), in_processes(a.path, buffer_bytes=1)]
    got = _side_by_side(decs)
    assert same(got[0], reference(a.path)) and same(got[1], reference(a.path))
    assert [d.stats()["processes"] for d in decs] == [2, 0]


def test_a_child_killed_in_one_files_share_leaves_the_other_file_alone(make_clip, caplog):
    """Files sharing the pool: the child of the first is killed mid-run; its file is finished by
    threads here, the other file's child goes on; neither loses a frame."""
    import logging

    a = make_clip(".mp4", frames=100, gop=10, bframes=2, width=160, height=96)
    b = make_clip(".mp4", frames=80, gop=10, width=128, height=80)
    two = DecodeOptions(files_at_once=2)
    close_pools()
    decs = [in_processes(a.path, options=two, buffer_bytes=1), in_processes(b.path, options=two, buffer_bytes=1)]
    pool = get_pool(torch.device("cpu"), 2, start=True)

    def kill(k, n):
        if (k, n) == (0, 1):  # the first file asked first: it has the pool's first child
            os.kill(pool.procs[0].pid, signal.SIGKILL)

    with caplog.at_level(logging.WARNING, logger="vidpipe.decode.procpool"):
        got = _side_by_side(decs, each_batch=kill)
    assert same(got[0], reference(a.path)) and same(got[1], reference(b.path))
    assert [d.stats()["processes_lost"] for d in decs] == [1, 0]
    assert sum("died" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2"])
def test_invalid_files_at_once_is_refused(bad):
    from vidpipe.errors import ConfigError

    with pytest.raises(ConfigError, match="files_at_once"):
        DecodeOptions(files_at_once=bad)


def test_a_child_known_dead_before_its_end_is_read_still_hands_its_segments_over(make_clip):
    """Both children die, but one is known dead first (a send to it failed: marked dead) while
    its end of stream is read only after the other's: its segments must reach the threads that
    take over, not be left in the queue once those started (a GPU run hung so: every-child test
    of test_nvdec.py)."""
    import threading
    import time

    clip = make_clip(".mp4", frames=100, gop=10, bframes=2, width=160, height=96)
    close_pools()
    dec = in_processes(clip.path, buffer_bytes=1)
    pool = get_pool(torch.device("cpu"), 2, start=True)
    got: list = []

    def consume():
        for n, batch in enumerate(dec.batches(8)):
            if n == 1:
                late, first = pool.procs[1], pool.procs[0]
                os.kill(late.pid, signal.SIGSTOP)  # holds its socket open: no end of stream yet
                pool.alive[1] = False  # what a failed send to it records
                os.kill(first.pid, signal.SIGKILL)
                time.sleep(0.5)  # the other child's loss is handled first
                os.kill(late.pid, signal.SIGKILL)
            got.extend((m.index, m.pts, batch.data[i].clone()) for i, m in enumerate(batch.frames))

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    t.join(60)
    assert not t.is_alive(), "the decode hung"
    assert same(got, reference(clip.path))
    assert not dec.partial and dec.stats()["processes_lost"] == 2


@pytest.mark.parametrize("bad", [-1, 2.5, "2", True, 65])
def test_invalid_process_counts_are_refused(make_clip, bad):
    from vidpipe.errors import ConfigError

    clip = make_clip(".mp4", frames=20, gop=10, width=160, height=96)
    with pytest.raises(ConfigError, match="processes"):
        PyAVParallelDecoder(str(clip.path), processes=bad)
    with pytest.raises(ConfigError, match="decoder_processes"):
        DecodeOptions(decoder_processes=bad)


def test_children_that_cannot_start_are_a_clear_error(make_clip, monkeypatch):
    import sys

    from vidpipe.errors import DecodeError

    clip = make_clip(".mp4", frames=40, gop=10, width=160, height=96)
    close_pools()
    monkeypatch.setattr(sys, "executable", "/bin/false")  # every child exits at once
    with pytest.raises(DecodeError, match="decoder process exited while starting"):
        frames(in_processes(clip.path))
    monkeypatch.undo()
    assert same(frames(in_processes(clip.path)), reference(clip.path))  # a later run starts them


_SIGTERM_SCRIPT = r"""
import sys, threading, time
from vidpipe.cli._signals import StopOnSignal
from vidpipe.decode.parallel import PyAVParallelDecoder
from vidpipe.decode.procpool import get_pool
import torch

dec = PyAVParallelDecoder(sys.argv[1], workers=4, segment_frames=10, processes=2, buffer_bytes=1)
stop = threading.Event()
indices = []
with StopOnSignal(stop.set) as interrupt:
    for batch in dec.batches(8):
        if not indices:
            pids = [p.pid for p in get_pool(torch.device("cpu"), 2, start=False).procs]
            print("READY", *pids, flush=True)
        indices.extend(m.index for m in batch.frames)
        if stop.is_set():
            break
        time.sleep(0.1)  # a slow consumer: the children wait for ring slots
print("FRAMES", *indices, flush=True)
sys.exit(interrupt.exit_code or 0)
"""


def test_sigterm_during_a_process_decode_stops_cleanly(make_clip):
    """SIGTERM (the CLI's handler) while children decode: the run stops at the next batch,
    nothing hangs, the frames delivered are the file's first ones in order, exit 143, and the
    children are gone."""
    import subprocess
    import sys
    import time

    clip = make_clip(".mp4", frames=100, gop=10, bframes=2, width=160, height=96)
    proc = subprocess.Popen([sys.executable, "-c", _SIGTERM_SCRIPT, str(clip.path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        ready = proc.stdout.readline().split()
        assert ready and ready[0] == "READY", proc.communicate(timeout=60)
        children = [int(p) for p in ready[1:]]
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert "SIGTERM: stopping" in err and "Traceback" not in err
    indices = [int(i) for i in out.split("FRAMES", 1)[1].split()]
    assert 8 <= len(indices) < 100 and indices == list(range(len(indices)))

    def gone(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                return f.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
        except OSError:
            return True

    deadline = time.monotonic() + 5
    while not all(map(gone, children)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(map(gone, children)), children


def test_a_run_of_several_files_shares_the_processes_among_them(make_clip, monkeypatch):
    """``vidpipe.detect`` with three files and ``max_open_sources=2`` tells each decoder that two
    files decode at once: each takes one of the two children (none falls back to threads), and
    the detections are those of the plain PyAV backend, frame by frame."""
    import vidpipe
    from vidpipe.decode import registry

    seen = []

    def procs(info, *, device, options):
        seen.append(options.files_at_once)
        return PyAVParallelDecoder(info, device=device, options=options, workers=4, segment_frames=10, processes=2)

    monkeypatch.setattr(registry, "_registered", dict(registry._registered))
    registry.register_backend("pyav-procs", procs, lambda info, device: None, gpu=False)
    clips = [str(make_clip(".mp4", frames=n, gop=10, width=160, height=96).path) for n in (60, 40, 50)]

    def rows(decoder):
        run = vidpipe.detect(clips, device="cpu", decoder=decoder, batch_size=8, max_open_sources=2)
        got = sorted((r.stream_id, r.index, r.detections.boxes.tolist(), r.detections.class_ids.tolist()) for r in run)
        return got, run.summary()

    got, summary = rows("pyav-procs")
    want, _ = rows("pyav")
    assert seen == [2, 2, 2]
    assert [s.extra.get("decoder_processes") for s in summary.sources] == [1, 1, 1]
    assert got == want  # the same pixels: the same detections, frame by frame


def decode_damaged(make_clip, tmp_path, processes, *, width, height):
    """A 200-frame clip with 50-frame GOPs, damaged in the middle, decoded in 10-frame segments
    with a 3-batch window (``processes``: decoder processes, or threads): ``(file, decoder,
    frames)``; fails if the decode stalls."""
    import threading

    clip = make_clip(".mp4", frames=200, gop=50, width=width, height=height)
    bad = corrupt_middle(clip.path, dst=tmp_path / "bad.mp4")
    dec = PyAVParallelDecoder(str(bad), workers=3, segment_frames=10, processes=processes, buffer_bytes=1)
    out: list = []
    t = threading.Thread(target=lambda: out.extend(frames(dec)), daemon=True)
    t.start()
    t.join(120)
    if t.is_alive():
        dec.close()
        pytest.fail("the decode stalled")
    return bad, dec, out


@pytest.mark.parametrize("processes", [0, 2], ids=["threads", "processes"])
def test_frames_lost_inside_a_segment_longer_than_the_window_do_not_stall_it(make_clip, tmp_path, processes):
    """Frames lost in the middle of a segment longer than the decode window (a GOP longer than
    the ring): the consumer waits for one of them while the segment's worker waits for room past
    them. The worker now marks them missing then, instead of at the segment's end it never
    reached (a deadlock before). The frames kept are PyAV's (numbers and timestamps) and, pixel
    for pixel, those of the same decode with a window that holds the whole file (after damage,
    a decoder started at a keyframe conceals errors differently from PyAV's continuous one)."""
    bad, dec, out = decode_damaged(make_clip, tmp_path, processes, width=160, height=96)
    ref = reference(bad)
    assert len(ref) < 200  # frames were lost
    assert [(i, round(t, 6)) for i, t, _ in out] == [(i, round(t, 6)) for i, t, _ in ref]
    assert same(out, frames(PyAVParallelDecoder(str(bad), workers=3, segment_frames=10)))
    assert dec.partial and dec.stats()["frames_missing"] == 200 - len(ref)


@pytest.mark.parametrize("processes", [0, 2], ids=["threads", "processes"])
def test_a_lost_segment_longer_than_the_ring_does_not_stall_it(make_clip, tmp_path, processes):
    """Damage that takes a segment's keyframe: its 50 frames are lost, more than the 3-batch
    ring. The consumer skips them; the decoder processes must still be allowed to write past them,
    into the slot of the last batch the consumer took (a deadlock before: that slot was only freed
    once a later batch was handed out). Each frame PyAV's continuous decode gave that this one did
    not is counted lost, and the frames kept are those of the same decode with a window that holds
    the whole file."""
    bad, dec, out = decode_damaged(make_clip, tmp_path, processes, width=320, height=192)
    indices = [i for i, _, _ in out]
    assert indices == list(range(100)) + list(range(150, 200))  # the segment of frames 100-149 is lost
    ref = [i for i, _, _ in reference(bad)]
    assert set(ref) - set(indices) and len(set(ref) - set(indices)) <= dec.stats()["frames_missing"] == 50
    assert dec.partial
    assert same(out, frames(PyAVParallelDecoder(str(bad), workers=3, segment_frames=10)))


def test_a_decoder_process_starts_without_pytorch(make_clip):
    """A child loads no PyTorch to start, nor for a PyAV job (its rows go into NumPy views of the
    parent's CPU ring; an NVDEC child's into the GPU ring through the driver:
    test_torch_free_children_gpu.py)."""
    close_pools()
    pool = get_pool("cpu", 1, start=True)
    pid = pool.procs[0].pid
    with open(f"/proc/{pid}/maps") as f:
        assert "libtorch" not in f.read()
    clip = make_clip(".mp4", frames=40, gop=10, width=160, height=96)
    dec = PyAVParallelDecoder(str(clip.path), workers=2, segment_frames=10, processes=1)
    assert same(frames(dec), reference(clip.path))
    assert dec.stats()["processes"] == 1 and pool.procs[0].pid == pid
    with open(f"/proc/{pid}/maps") as f:
        assert "libtorch" not in f.read()
