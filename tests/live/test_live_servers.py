"""The live-test servers themselves, checked with outside clients (the ``ffmpeg`` tool and PyAV
directly, never vidpipe): each serves decodable frames, comes back on the same port after a
kill, keeps its pace; an RTSP mount with credentials refuses wrong ones; no server outlives its
owner. Each test takes a few seconds (320x240, 15 fps).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import av
import pytest
from ffmpeg_cli import require as require_tool
from media import read_stamp

from live.procs import port_open, wait_until

pytestmark = pytest.mark.live

#: PyAV/ffmpeg demuxer options: probe 0.5 s of a live stream instead of FFmpeg's default 5 s
FAST_PROBE = {"analyzeduration": "500000"}


def ffmpeg_frames(url: str, frames: int, *, input_args: tuple[str, ...] = (), timeout: float = 20.0
                  ) -> tuple[int, str, int]:
    """(frames the ``ffmpeg`` tool decoded, its stderr, its exit status), at most ``frames``."""
    cmd = [require_tool("ffmpeg"), "-nostdin", "-v", "error", "-analyzeduration", "500000", *input_args,
           "-i", url, "-map", "0:v:0", "-frames:v", str(frames), "-fps_mode", "passthrough", "-f", "framemd5", "-"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    n = sum(1 for line in out.stdout.splitlines() if line.strip() and not line.startswith("#"))
    return n, out.stderr, out.returncode


def pyav_frames(url: str, frames: int, *, options: dict[str, str] | None = None,
                read_timeout: float = 5.0) -> tuple[list, list[float]]:
    """``frames`` RGB frames (H x W x 3 uint8) PyAV decodes from ``url`` and their arrival times."""
    out, times = [], []
    with av.open(url, options={**FAST_PROBE, **(options or {})}, timeout=(10.0, read_timeout)) as c:
        for frame in c.decode(video=0):
            out.append(frame.to_ndarray(format="rgb24"))
            times.append(time.monotonic())
            if len(out) >= frames:
                break
    return out, times


def steady_rate(times: list[float], skip: int = 10) -> float:
    """Frames per second arriving after the first ``skip`` (those come in a burst: the client
    buffered them while probing the stream)."""
    t = times[skip:]
    return (len(t) - 1) / (t[-1] - t[0])


def assert_consecutive(stamps: list[int], period: int) -> None:
    """Stamps rise by one frame each (modulo the clip's ``period`` frames): none lost or repeated."""
    steps = [(b - a) % period for a, b in zip(stamps, stamps[1:])]
    assert all(s == 1 for s in steps), f"stamps not consecutive: {stamps}"


# -- RTSP (GStreamer) -----------------------------------------------------------------------------
@pytest.mark.parametrize("transport", ["tcp", "udp"])
def test_rtsp_live_mount_serves_h264(rtsp_server, transport):
    n, err, rc = ffmpeg_frames(rtsp_server.url("cam1"), 15, input_args=("-rtsp_transport", transport))
    assert (n, rc) == (15, 0), err
    frames, times = pyav_frames(rtsp_server.url("cam0"), 40, options={"rtsp_transport": transport})
    assert frames[0].shape == (240, 320, 3)
    assert any((a != b).any() for a, b in zip(frames, frames[1:])), "the pattern does not move"
    rate = steady_rate(times)
    assert 10 < rate < 20, f"{rate:.1f} frames/s arriving from a 15 fps live source"


def test_rtsp_keyframes_delivered_once(rtsp_server):
    """No frame twice: SPS/PPS only in the SDP (in-band ones make FFmpeg repeat each keyframe)."""
    with av.open(rtsp_server.url("cam0"), options={**FAST_PROBE, "rtsp_transport": "tcp"},
                 timeout=(10.0, 5.0)) as c:
        pts = []
        for frame in c.decode(video=0):
            pts.append(frame.pts)
            if len(pts) >= 40:  # past two keyframes (one a second at 15 fps)
                break
    later = [p for p in pts if p is not None]  # FFmpeg gives the first frame no pts
    assert len(later) >= 39 and all(b > a for a, b in zip(later, later[1:])), pts


def test_rtsp_restart_on_same_port(rtsp_server):
    url, port = rtsp_server.url("cam0"), rtsp_server.port
    assert ffmpeg_frames(url, 5)[0] == 5
    pid = rtsp_server.pid
    rtsp_server.stop()
    assert not port_open(port)
    n, err, rc = ffmpeg_frames(url, 5, timeout=10)
    assert n == 0 and rc != 0
    rtsp_server.restart(down_s=0.2)
    assert (rtsp_server.port, rtsp_server.url("cam0")) == (port, url) and rtsp_server.pid != pid
    assert rtsp_server.ready_s < 5
    assert ffmpeg_frames(url, 5)[0] == 5


def test_rtsp_auth_refuses_wrong_password(live_servers):
    server = live_servers.rtsp(user="cam user", password="p@ss:w/rd")
    wrong = server.url("cam0", user="cam user", password="nope")
    none = server.url("cam0", credentials=False)
    for url in (wrong, none):
        n, err, rc = ffmpeg_frames(url, 3, timeout=10)
        assert n == 0 and rc != 0 and "401" in err, err
    n, err, rc = ffmpeg_frames(server.url("cam0"), 3)
    assert (n, rc) == (3, 0), err
    assert "p%40ss%3Aw%2Frd@" in server.url("cam0")  # percent-encoded in the URL


def test_rtsp_file_mount_plays_every_frame_at_its_rate(live_servers, live_clip):
    server = live_servers.rtsp(streams=0, files={"clip": live_clip})
    t0 = time.monotonic()
    with av.open(server.url("clip"), options={**FAST_PROBE, "rtsp_transport": "tcp"}, timeout=(10.0, 5.0)) as c:
        stamps = [read_stamp(f.to_ndarray(format="rgb24")) for f in c.decode(video=0)]
    took = time.monotonic() - t0
    assert stamps == list(range(60))
    assert took > 3.0, f"60 frames at 15 fps came in {took:.1f} s: not paced"


def test_rtsp_freeze_goes_quiet_then_resumes(rtsp_server):
    with av.open(rtsp_server.url("cam0"), options={**FAST_PROBE, "rtsp_transport": "tcp"},
                 timeout=(10.0, 1.0)) as c:
        frames = c.decode(video=0)
        next(frames)
        rtsp_server.freeze()
        t0 = time.monotonic()
        with pytest.raises((av.FFmpegError, OSError, StopIteration)):
            for _ in range(100):  # frames buffered before the freeze, then the read times out
                next(frames)
        assert time.monotonic() - t0 < 10
    rtsp_server.thaw()
    assert ffmpeg_frames(rtsp_server.url("cam0"), 3)[0] == 3


# -- RTMP (nginx) ---------------------------------------------------------------------------------
def test_rtmp_publisher_paced_and_looping(rtmp_stream):
    server, publisher = rtmp_stream
    frames, times = pyav_frames(server.url("cam0"), 75)  # more than the clip's 60: one loop at least
    assert frames[0].shape == (240, 320, 3)
    assert_consecutive([read_stamp(f) for f in frames], 60)
    rate = steady_rate(times)
    assert 10 < rate < 20, f"{rate:.1f} frames/s from a publisher pacing a 15 fps clip"


def test_rtmp_restart_publisher_reconnects(rtmp_stream):
    server, publisher = rtmp_stream
    assert ffmpeg_frames(server.url("cam0"), 5)[0] == 5
    server.restart(down_s=0.5)
    t0 = time.monotonic()
    wait_until(lambda: publisher.publishing() >= 2, timeout=5.0,
               what="the publisher publishing again")
    n, err, rc = ffmpeg_frames(server.url("cam0"), 5)
    assert (n, rc) == (5, 0), err
    assert time.monotonic() - t0 < 8
    assert publisher.running


def test_rtmp_hls(live_servers, live_clip):
    server = live_servers.rtmp(hls=True)
    live_servers.publish(live_clip, server.url("cam0"))
    playlist = server.workdir / "hls" / "cam0.m3u8"
    wait_until(lambda: playlist.exists() and playlist.read_text().count(".ts") >= 2, timeout=10.0,
               what="two HLS fragments")
    n, err, rc = ffmpeg_frames(server.hls_url("cam0"), 20)
    assert (n, rc) == (20, 0), err


# -- HTTP (MPEG-TS, HLS) --------------------------------------------------------------------------
def test_http_ts_and_hls(live_servers, live_clip):
    server = live_servers.http({"cam0": live_clip})
    frames, _ = pyav_frames(server.url("cam0"), 20)
    assert_consecutive([read_stamp(f) for f in frames], 60)
    n, err, rc = ffmpeg_frames(server.hls_url("cam0"), 20)
    assert (n, rc) == (20, 0), err
    port = server.port
    server.restart()
    assert server.port == port
    assert ffmpeg_frames(server.url("cam0"), 5)[0] == 5


# -- SRT (ffmpeg listener) ------------------------------------------------------------------------
def test_srt_listener(live_servers, live_clip):
    server = live_servers.srt(live_clip)
    n, err, rc = ffmpeg_frames(server.url(), 10)
    assert (n, rc) == (10, 0), err
    wait_until(lambda: server.ready(), timeout=5.0, what="the next SRT listener")
    n, err, rc = ffmpeg_frames(server.url(), 5)  # a second caller after the first left
    assert (n, rc) == (5, 0), err


# -- no orphans -----------------------------------------------------------------------------------
def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # a zombie still answers kill(0); its state says it is dead
        return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def test_servers_die_with_their_owner(tmp_path, live_clip):
    """A SIGKILLed owner (no finalizer, no atexit) still takes its servers with it (PDEATHSIG)."""
    from live.need import require
    from live.servers import nginx_missing_reason, rtsp_missing_reason

    require(rtsp_missing_reason())
    require(nginx_missing_reason())
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
        from live.servers import RtspServer, NginxRtmp, Publisher
        r = RtspServer(workdir={str(tmp_path / 'r')!r}).start()
        n = NginxRtmp(workdir={str(tmp_path / 'n')!r}).start()
        p = Publisher({str(live_clip)!r}, n.url("x"), workdir={str(tmp_path / 'p')!r}).start()
        print(r.pid, n.pid, p.pid, flush=True)
        time.sleep(60)
    """)
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(x) for x in owner.stdout.readline().split()]
        assert len(pids) == 3 and not any(_gone(p) for p in pids)
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=10)
    wait_until(lambda: all(_gone(p) for p in pids), timeout=5.0, what="servers gone after their owner")


def test_stop_kills_process_group(live_servers):
    server = live_servers.rtsp()
    pid = server.pid
    server.stop()
    assert _gone(pid) and not server.running
    server.stop()  # idempotent


# -- nginx from an unpacked tree (the GPU host's way) ---------------------------------------------
def test_nginx_from_unpacked_tree(tmp_path, live_servers, live_clip):
    """``NginxRtmp.from_tree`` runs nginx and its module from a ``dpkg -x`` style tree (made here
    from this host's files: the GPU host gets one from tools/debs-for-gpu and live.debs)."""
    import shutil

    from live.need import require
    from live.servers import DEFAULT_RTMP_MODULE, nginx_missing_reason

    require(nginx_missing_reason())
    root = tmp_path / "root"
    (root / "usr/sbin").mkdir(parents=True)
    (root / "usr/lib/nginx/modules").mkdir(parents=True)
    shutil.copy2(shutil.which("nginx") or "/usr/sbin/nginx", root / "usr/sbin/nginx")
    shutil.copy2(DEFAULT_RTMP_MODULE, root / "usr/lib/nginx/modules/ngx_rtmp_module.so")
    server = live_servers.rtmp(root=root)
    assert Path(server.command()[0]) == root / "usr/sbin/nginx"
    assert f"load_module {root}/usr/lib/nginx/modules/ngx_rtmp_module.so;" in server.config()
    live_servers.publish(live_clip, server.url("cam0"))
    n, err, rc = ffmpeg_frames(server.url("cam0"), 5)
    assert (n, rc) == (5, 0), err


def test_unpack_deb_matches_dpkg(tmp_path):
    """:func:`live.debs.unpack_deb` extracts what ``dpkg -x`` does (a .deb built here with dpkg-deb)."""
    import shutil

    from live.debs import unpack_debs
    from live.need import require

    if shutil.which("dpkg-deb") is None:
        require("dpkg-deb not found (Debian's dpkg)")
    pkg = tmp_path / "pkg"
    (pkg / "DEBIAN").mkdir(parents=True)
    (pkg / "DEBIAN/control").write_text("Package: vidpipe-test\nVersion: 1.0\nArchitecture: all\n"
                                        "Maintainer: t <t@example.org>\nDescription: test\n")
    (pkg / "usr/lib/x").mkdir(parents=True)
    (pkg / "usr/lib/x/lib.so.1.2").write_bytes(os.urandom(3000))
    os.symlink("lib.so.1.2", pkg / "usr/lib/x/lib.so.1")
    debs = tmp_path / "debs"
    debs.mkdir()
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(pkg), str(debs / "t.deb")], check=True,
                   capture_output=True, timeout=60)
    ours, theirs = unpack_debs(debs, tmp_path / "ours"), tmp_path / "theirs"
    subprocess.run(["dpkg-deb", "-x", str(debs / "t.deb"), str(theirs)], check=True, timeout=60)
    for rel in ("usr/lib/x/lib.so.1.2", "usr/lib/x/lib.so.1"):
        assert (ours / rel).read_bytes() == (theirs / rel).read_bytes()
    assert os.readlink(ours / "usr/lib/x/lib.so.1") == "lib.so.1.2"


# -- six streams at once (the CPU machine's target) -----------------------------------------------
def test_six_rtmp_streams_from_one_publisher(live_servers, live_clip):
    from concurrent.futures import ThreadPoolExecutor

    server = live_servers.rtmp()
    urls = [server.url(f"cam{i}") for i in range(6)]
    publisher = live_servers.publish(live_clip, urls, stagger_s=0.05)
    assert publisher.publishing() == 6
    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(lambda u: ffmpeg_frames(u, 6), urls))
    assert [(n, rc) for n, _, rc in results] == [(6, 0)] * 6, [err for _, err, _ in results]


def test_six_rtsp_mounts_at_once(live_servers):
    from concurrent.futures import ThreadPoolExecutor

    server = live_servers.rtsp(streams=6)
    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(lambda m: ffmpeg_frames(server.url(m), 6), server.mounts))
    assert [(n, rc) for n, _, rc in results] == [(6, 0)] * 6, [err for _, err, _ in results]
