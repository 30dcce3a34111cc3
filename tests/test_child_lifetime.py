"""Every other process vidpipe starts dies with its parent too, by any signal (issue 15, item 1).

The decoder processes have their own tests (tests/decode/test_proc_lifetime.py); here, with the
same helpers (tests/proctrack.py) and a real parent process killed with ``kill -9``:

- the encoder process of :class:`~vidpipe.encode.process.ProcessVideoWriter`, killed mid-write:
  it finishes its fragmented MP4 with what it got and exits; the file is read back by PyAV and by
  the ``ffmpeg`` tool (same frame count), every frame in order (frame numbers stamped in the
  pixels), at least as many as had been handed to the encoder process;
- the RTMP server of the live benchmarks (nginx) and the publisher processes feeding it: gone, and
  the server's private folder is removed by the next server;
- the tracker's helper process (``TrackerStage(worker="process")``): gone;
- :class:`~vidpipe.lifetime.keeper.Keeper`: a program started from a thread that has ended still
  runs (Linux's parent-death signal follows the thread that forked; the keeper's thread is the
  one), and it is killed when the keeper closes.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import av
import ffmpeg_cli
import pytest
from media import read_stamp
from proctrack import ParentScript, children, process, running, wait_gone
from live.need import require_nginx

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc (Linux)")

#: seconds within which a child must be gone after its parent died: the target is one second;
#: the limit leaves room for a loaded two-core CI runner (measured times are printed)
GONE_S = 2.0

ENCODE_SCRIPT = r"""
import os, sys, time, numpy as np, torch
from media import _render
from vidpipe.encode.process import ProcessVideoWriter
w = ProcessVideoWriter(sys.argv[1], width=160, height=96, fps=25, options={"g": "5"})
w.wait_ready()
i = 0
while True:
    img, _ = _render("gradient", i, 160, 96, 1000, stamp=True)
    w.write(torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1))))
    i += 1
    if i == 40:
        while w.frames_sent < 30:
            time.sleep(0.01)
        if sys.argv[2] == "fork":  # a forked copy keeps the pipes' write ends open, and outlives us
            pid = os.fork()
            if pid == 0:
                time.sleep(600)
                os._exit(0)
            print("forked", pid, flush=True)
        print("ready", w.frames_sent, flush=True)
    time.sleep(0.005)
"""


@pytest.mark.parametrize("mode", ["kill", "fork"])
def test_encoder_process_finishes_its_file_when_the_parent_is_killed(tmp_path, mode):
    """``fork``: a copy of the parent (as ``multiprocessing``'s fork makes) holds the write ends
    of the encoder's stdin and of its lifeline; only the parent-death signal can tell."""
    ffmpeg_cli.require("ffmpeg")
    out = tmp_path / "killed.mp4"
    parent = ParentScript(ENCODE_SCRIPT, str(out), mode, match=b"vidpipe.encode.child")
    forked = None
    try:
        kids = parent.wait_for("ready", children_up=1)
        assert len(kids) == 1
        sent = int(parent.line("ready").split()[1])
        if mode == "fork":
            forked = process(int(parent.line("forked").split()[1]))
        t0 = parent.kill(signal.SIGKILL)
        took = wait_gone(kids, t0, GONE_S, "the encoder process")
        if forked is not None:
            assert running(forked)  # the copy lives on; the encoder process did not wait for it
    finally:
        parent.close()
        if forked is not None and running(forked):
            os.kill(forked[0], signal.SIGKILL)
    print(f"{mode}: encoder process gone {took:.2f} s after its parent was killed; {sent} frames had been sent")
    assert took <= GONE_S, f"the encoder process took {took:.2f} s to go"
    with av.open(str(out)) as c:
        stamps = [read_stamp(f.to_ndarray(format="rgb24")) for f in c.decode(video=0)]
    assert len(stamps) >= sent, f"{len(stamps)} frames in the file, {sent} had been sent to the encoder process"
    assert stamps == list(range(len(stamps))), stamps[:50]
    assert ffmpeg_cli.count_frames(out) == len(stamps)


SERVER_SCRIPT = r"""
import sys, time, av
from vidpipe.bench.publishers import PublisherProcesses
from vidpipe.bench.rtmp_server import RtmpServer
server = RtmpServer().start()
pubs = PublisherProcesses(sys.argv[1], [server.url("a"), server.url("b")], per_process=1).start()
with av.open(server.url("b"), timeout=(20, 20), options={"analyzeduration": "100000", "probesize": "100000"}) as c:
    next(c.decode(video=0))  # the publishers publish
print("ready", server.pid, server._dir, flush=True)
time.sleep(600)
"""




def test_rtmp_server_and_publishers_die_with_a_killed_parent(make_clip):
    require_nginx()
    clip = make_clip(".mp4", frames=50, gop=10, width=160, height=96)
    parent = ParentScript(SERVER_SCRIPT, str(clip.path), match=b"", ready_s=120.0)
    try:
        parent.wait_for("ready")
        _, pid, folder = parent.line("ready").split()
        server = process(int(pid))
        pubs = children(parent.proc.pid, b"vidpipe.bench.publish")
        assert len(pubs) == 2 and Path(folder).is_dir()
        assert children(parent.proc.pid, b"nginx") == [server]
        assert not children(server[0]), "nginx runs as one process (a master's workers would outlive it)"
        t0 = parent.kill(signal.SIGKILL)
        took = wait_gone([server, *pubs], t0, GONE_S, "the server and the publishers")
    finally:
        parent.close()
    print(f"nginx and 2 publisher processes gone {took:.2f} s after their parent was killed")
    assert took <= GONE_S, f"they took {took:.2f} s to go"
    from vidpipe.bench.rtmp_server import RtmpServer

    assert Path(folder).is_dir()  # nothing could remove it; the next server does
    RtmpServer().close()
    assert not Path(folder).exists()


TRACKER_SCRIPT = r"""
import time, torch
from vidpipe.track import TrackerStage
from vidpipe.types import Detections, FrameMeta, FrameResult
stage = TrackerStage(worker="process")
b = torch.tensor([[10.0, 10, 50, 90]])
dets = Detections(b, torch.ones(1), torch.zeros(1, dtype=torch.int64), torch.zeros(1, dtype=torch.int64))
stage.process([FrameResult(FrameMeta("cam", 0, i, i / 30, 480, 640), dets) for i in range(3)])
print("ready", stage._child.pid, flush=True)
time.sleep(600)
"""


def test_tracker_process_dies_with_a_killed_parent():
    parent = ParentScript(TRACKER_SCRIPT, match=b"vidpipe.track.child", ready_s=120.0)
    try:
        kids = parent.wait_for("ready", children_up=1)
        assert [k[0] for k in kids] == [int(parent.line("ready").split()[1])]
        t0 = parent.kill(signal.SIGKILL)
        took = wait_gone(kids, t0, GONE_S, "the tracker process")
    finally:
        parent.close()
    print(f"tracker process gone {took:.2f} s after its parent was killed")
    assert took <= GONE_S, f"it took {took:.2f} s to go"


def test_keeper_children_outlive_the_thread_that_asked_and_end_with_the_keeper():
    from vidpipe.lifetime.keeper import Keeper

    keeper = Keeper("test-keeper")
    procs: list = []
    t = threading.Thread(target=lambda: procs.append(keeper.popen(["sleep", "60"], python=False)))
    t.start()
    t.join()
    try:
        child = process(procs[0].pid)
        time.sleep(0.5)  # a child signalled when the asking thread ended would be gone by now
        assert running(child) and procs[0].poll() is None
        t0 = time.monotonic()
        keeper.close()  # its thread ends: the parent-death signal (SIGKILL) ends the program
        assert procs[0].wait(timeout=GONE_S + 3) == -signal.SIGKILL
        print(f"a keeper's program was killed {time.monotonic() - t0:.2f} s after the keeper closed")
        with pytest.raises(RuntimeError, match="closed"):
            keeper.popen(["true"], python=False)
    finally:
        if procs and procs[0].poll() is None:
            procs[0].kill()
            procs[0].wait()


@pytest.mark.parametrize("way", ["setpriv", "slow-setpriv", "preexec"])
def test_programs_die_with_the_thread_that_started_them_from_a_threaded_process(monkeypatch, tmp_path, way):
    """``popen_with_parent_death``: both ways (util-linux's ``setpriv --pdeathsig``, and the
    ``preexec_fn`` where it is missing) kill the program when the starting thread ends, also
    when it ends the moment ``Popen`` returns (``setpriv`` arms the signal later, in its own
    process: CI once saw a program outlive its thread); busy threads beside it (decoders, a
    model) do not hang the start. ``slow-setpriv``: a ``setpriv`` that takes 0.3 s before it arms
    the signal, so the thread surely ends first unless the start waits for it."""
    import shutil

    from vidpipe.lifetime import keeper as keeper_mod

    setpriv = way != "preexec"
    real = shutil.which("setpriv")
    if setpriv and real is None:
        pytest.skip("util-linux's setpriv is not installed")
    if way == "slow-setpriv":
        slow = tmp_path / "setpriv"
        slow.write_text(f'#!/bin/sh\nsleep 0.3\nexec {real} "$@"\n')
        slow.chmod(0o755)
        monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    if not setpriv:
        monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            pass

    busy = [threading.Thread(target=spin, daemon=True) for _ in range(4)]
    for b in busy:
        b.start()
    procs: list = []

    def start() -> None:
        argv, preexec = keeper_mod.with_parent_death(["sleep", "60"])
        assert (argv[0].endswith("setpriv") and preexec is None) if setpriv else (argv[0] == "sleep" and preexec)
        procs.append(keeper_mod.popen_with_parent_death(["sleep", "60"]))

    try:
        for _ in range(3 if way == "slow-setpriv" else 5):
            t = threading.Thread(target=start)
            t.start()
            t.join(timeout=10)
            assert not t.is_alive(), "starting the program hung"
            assert procs[-1].wait(timeout=GONE_S + 3) == -signal.SIGKILL  # its thread ended
    finally:
        stop.set()
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_folders_of_killed_runs_are_removed_by_the_next_one(tmp_path, monkeypatch):
    """A bench killed with ``kill -9`` leaves its media folder; the next bench removes it, and
    never a folder of a process that still runs."""
    import subprocess
    import tempfile

    from vidpipe.bench.workdir import media_folder

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = tmp_path / f"vidpipe-bench-{gone.pid}-abc123"
    alive = tmp_path / f"vidpipe-bench-{os.getppid()}-def456"
    other = tmp_path / "vidpipe-bench-annotate-x1"
    for d in (stale, alive, other):
        (d / "clip.mp4").parent.mkdir()
        (d / "clip.mp4").write_bytes(b"x")
    with media_folder() as work:
        assert work.name.startswith(f"vidpipe-bench-{os.getpid()}-")
    assert not stale.exists() and alive.is_dir() and other.is_dir() and not work.exists()
