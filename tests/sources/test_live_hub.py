"""Live streams run in decoder processes (vidpipe.sources.live_hub, LiveOptions.processes) against
a real RTSP server (GStreamer, tests/live/servers.py) on the CPU at low resolution: frames flow
with capture times, a server killed and restarted is reconnected in the child, a child killed
fails only its own streams, the transport changes no detection, and the children exit with the
run.

Each test runs a few seconds plus the children's start (PyTorch import). Missing servers skip,
and fail under ``CI=true``."""

from __future__ import annotations

import os
import signal
import time

import pytest
import torch
from test_live_source_servers import OPTS, require, start_server  # noqa: F401 - fixture

import vidpipe
from vidpipe.sources.options import LiveOptions

servers = pytest.importorskip("live.servers", reason="tests/live/servers.py (the servers fixtures) is missing")


def collect(results, until, timeout: float = 30.0) -> dict[int, list]:
    """Take from the iterator ``results`` until ``until(per_stream)`` or ``timeout``: per stream
    id, the results' (FrameMeta, receipt time). (An iterator, not the run: leaving a ``for``
    loop over the run itself ends the run.)"""
    per: dict[int, list] = {}
    t_end = time.monotonic() + timeout
    for r in results:
        per.setdefault(r.stream_id, []).append((r.meta, time.monotonic()))
        if until(per) or time.monotonic() > t_end:
            break
    return per


def enough(n: int, streams: int):
    return lambda per: len(per) == streams and all(len(v) >= n for v in per.values())


def children_of(run) -> list[int]:
    return [p.pid for p in run._live.hub.pool.procs]  # noqa: SLF001 - the test checks their lifetime


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone too
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_rtsp_streams_in_decoder_processes_reconnect_after_a_server_restart(start_server):  # noqa: F811
    srv = start_server(servers.RtspServer, streams=3, fps=15, keyint_s=0.5)
    urls = [srv.url(f"cam{i}") for i in range(3)]
    run = vidpipe.detect(urls, device="cpu", imgsz=128, batch_size=4, live=LiveOptions(processes=2, **OPTS))
    results = iter(run)
    try:
        per = collect(results, enough(15, 3))
        assert run.live_processes == 2
        pids = children_of(run)
        assert len(per) == 3 and all(len(v) >= 15 for v in per.values()), {k: len(v) for k, v in per.items()}
        for sid, items in per.items():
            idx = [m.index for m, _ in items]
            assert idx == sorted(set(idx)), idx  # increasing, never repeated (drops may skip)
            for m, got in items:
                assert m.source == urls[sid] and (m.height, m.width) == (240, 320)
                assert 0 < got - m.captured_mono < 5.0
        st = run.status()["streams"]
        assert all(s["state"] == "live" and s["frames_in"] >= 15 and s["decoder"] == "pyav" for s in st), st
        # the server dies and comes back on the same port: every stream reconnects in its child
        srv.stop()
        time.sleep(1.5)
        srv.start()
        back = time.monotonic()
        seen = {sid: len(v) for sid, v in per.items()}
        per2 = collect(results, lambda p: len(p) == 3 and all(len(v) >= 10 for v in p.values()), timeout=25)
        assert all(len(v) >= 10 for v in per2.values()) and len(per2) == 3, {k: len(v) for k, v in per2.items()}
        first = min(t for v in per2.values() for m, t in v if m.connection >= 1)
        print(f"decoder processes: first frame {first - back:.2f} s after the server's return; before {seen}")
        assert first - back < 5.0
        st = run.status()["streams"]
        assert all(s["reconnects"] >= 1 and s["state"] == "live" for s in st), st
    finally:
        run.close()
    summary = run.summary()
    assert [s.status for s in summary.sources] == ["ok"] * 3, [(s.status, s.error) for s in summary.sources]
    deadline = time.monotonic() + 10
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(p) for p in pids), "decoder processes outlived their run"


def test_a_killed_decoder_process_fails_only_its_streams(start_server):  # noqa: F811
    srv = start_server(servers.RtspServer, streams=2, fps=15, keyint_s=0.5)
    urls = [srv.url(f"cam{i}") for i in range(2)]
    run = vidpipe.detect(urls, device="cpu", imgsz=128, batch_size=2, live=LiveOptions(processes=2, **OPTS))
    results = iter(run)
    try:
        collect(results, enough(5, 2))
        victim = run._live.hub._links[0].child  # noqa: SLF001 - which child runs stream 0
        os.kill(children_of(run)[victim], signal.SIGKILL)
        per = collect(results, lambda p: len(p.get(1, [])) >= 20, timeout=20)
        assert len(per.get(1, [])) >= 20  # the other stream goes on
        deadline = time.monotonic() + 5
        while run.states[0].status == "running" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert run.states[0].status in ("partial", "failed"), run.states[0]
        assert "decoder process" in run.states[0].error and "exited" in run.states[0].error
        assert run.states[1].status == "running"
    finally:
        run.close()


def test_a_slow_consumer_drops_frames_without_starving_the_decoder_processes(start_server):  # noqa: F811
    """Frames dropped by the run's latest-wins queue hand their shared buffers back: after a
    spell of a consumer far slower than the cameras, frames flow again at the cameras' rate
    (a leaked buffer per drop would leave the children none: every frame a ``slots`` drop).
    Drops are counted by cause and add up."""
    srv = start_server(servers.RtspServer, streams=2, fps=15, keyint_s=0.5)
    urls = [srv.url(f"cam{i}") for i in range(2)]
    run = vidpipe.detect(urls, device="cpu", imgsz=128, batch_size=2,
                         live=LiveOptions(processes=1, queue_frames=2, **OPTS))  # fmt: skip
    results = iter(run)
    try:
        collect(results, enough(3, 2))
        t_end = time.monotonic() + 4
        for _ in results:  # 0.4 s per result: 2.5 of the 30 frames/s the cameras send
            time.sleep(0.4)
            if time.monotonic() > t_end:
                break
        st = run.status()["streams"]
        assert sum(s["drops"] for s in st) >= 20, st
        assert all(s["drops"] == sum(s["drop_causes"].values()) for s in st), st
        assert all(s["drop_causes"].get("queue", 0) > 0 for s in st), st
        t0 = time.monotonic()
        per = collect(results, enough(15, 2), timeout=10)  # at full speed again
        took = time.monotonic() - t0
        assert all(len(v) >= 15 for v in per.values()) and len(per) == 2, {k: len(v) for k, v in per.items()}
        assert took < 5.0, took  # 15 frames of a 15 fps camera: about 1 s
        slots_now = sum(s["drop_causes"].get("slots", 0) for s in run.status()["streams"])
        assert slots_now <= 4, run.status()["streams"]
    finally:
        run.close()


def test_detections_through_processes_equal_those_in_threads(bikes_path):
    """The same frames of a real video played as a camera give the same detections whether the
    stream runs in a decoder process (slots, shared memory) or in a thread of the run."""
    out = {}
    for procs in (0, 1):
        live = LiveOptions(realtime=True, processes=procs)
        run = vidpipe.detect(str(bikes_path), device="cpu", imgsz=224, max_frames=100, batch_size=1, live=live)
        out[procs] = {r.index: r.detections.cpu() for r in run}
        assert run.summary().sources[0].status == "ok"
    common = sorted(set(out[0]) & set(out[1]))
    assert len(common) >= 5, (sorted(out[0]), sorted(out[1]))  # a busy machine drops late frames
    assert sum(len(out[0][i]) for i in common) >= 5  # people and bicycles: something to compare
    compared = 0
    for i in common:
        a, b = out[0][i], out[1][i]
        assert len(a) == len(b), i
        if len(a):
            compared += 1
            assert (a.class_ids == b.class_ids).all()
            assert (a.boxes - b.boxes).abs().max() < 1e-3
    print(f"{len(common)} frames compared, {compared} with detections")


def test_passwords_never_leave_a_decoder_process(start_server, capfd):  # noqa: F811
    srv = start_server(servers.RtspServer, streams=1, fps=15, user="admin", password="Pa55-w0rd-xyz")
    good, bad = srv.url("cam0"), srv.url("cam0", user="admin", password="Wr0ng-pass-abc")
    run = vidpipe.detect([good, bad], device="cpu", imgsz=128, batch_size=2, live=LiveOptions(processes=1, **OPTS))
    results = iter(run)
    try:
        per = collect(results, lambda p: len(p.get(0, [])) >= 10 and run.states[1].status != "running", timeout=20)
        assert len(per.get(0, [])) >= 10 and 1 not in per
    finally:
        run.close()
    assert run.states[1].status == "failed" and "refused the credentials" in run.states[1].error
    text = capfd.readouterr()
    shown = text.out + text.err + repr(run.status()) + repr(run.summary().to_dict())
    assert "***@127.0.0.1" in shown
    for secret in ("Pa55-w0rd-xyz", "Wr0ng-pass-abc"):
        assert secret not in shown


def test_kept_frames_come_back_from_decoder_processes_as_in_threads(bikes_path, device):
    """A run that keeps frames (a stage that draws or encodes them) gets each live frame's image
    from a decoder process, the same pixels as from a thread of the run (PyAV decodes both)."""
    out = {}
    for procs in (0, 1):
        live = LiveOptions(realtime=True, processes=procs)
        run = vidpipe.detect(str(bikes_path), device=device, imgsz=160, max_frames=60, batch_size=1, live=live,
                             keep_frames=True, decoder="pyav")
        out[procs], seen = {}, set()
        for r in run:
            seen.add(run.live_processes)
            out[procs][r.index] = r.image.cpu()  # every result carries its frame
        assert run.summary().sources[0].status == "ok" and seen == {procs}
    common = sorted(set(out[0]) & set(out[1]))
    assert len(common) >= 5, (sorted(out[0]), sorted(out[1]))
    for i in common:
        a, b = out[0][i], out[1][i]
        assert a.shape == b.shape == (3, 272, 640) and a.dtype == b.dtype
        assert torch.equal(a, b), i
