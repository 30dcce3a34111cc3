"""Live re-stream against real servers on loopback: RTMP to nginx-rtmp (read back by a player,
PyAV), RTSP RECORD to GStreamer's RTSP server (what it received, remuxed to a file); a dead or
silent server is a clear SinkError within the timeout, its URL's credentials masked."""

from __future__ import annotations

import socket
import sys
import threading
import time
from pathlib import Path

import av
import numpy as np
import pytest
import torch

from live.need import require
from live.procs import LOOPBACK, ServerProcess, free_port, port_open
from live.servers import GST_PYTHON, rtsp_missing_reason
from media import _render, read_stamp
from vidpipe.encode import VideoWriter
from vidpipe.errors import SinkError

HERE = Path(__file__).resolve().parent
W, H, FPS, N = 160, 96, 15, 30

pytestmark = pytest.mark.live


def frame(i: int) -> torch.Tensor:
    rgb, _ = _render("boxes", i, W, H, N, stamp=True)
    return torch.from_numpy(np.ascontiguousarray(rgb)).permute(2, 0, 1)


def publish(url: str) -> dict:
    """``N`` stamped frames at about twice real time, then close."""
    with VideoWriter(url, width=W, height=H, fps=FPS, timeout_s=5) as w:
        for i in range(N):
            w.write(frame(i), pts=i / FPS)
            time.sleep(0.5 / FPS)
    return w.report()


def test_rtmp_publish_is_played_back(live_servers):
    server = live_servers.rtmp()
    url = server.url("annotated")
    stamps: list[int] = []
    times: list[float] = []
    errors: list[BaseException] = []

    def play() -> None:  # a player waiting for the stream before it is published
        try:
            # a short probe: the stream is short, and nginx keeps a finished stream's player waiting
            with av.open(url, timeout=(15, 2), options={"analyzeduration": "300000", "probesize": "4096"}) as f:
                for fr in f.decode(video=0):
                    stamps.append(read_stamp(fr.to_ndarray(format="rgb24")))
                    times.append(float(fr.pts * fr.time_base))
        except (OSError, av.error.FFmpegError) as exc:  # a live stream ends in an I/O error or the read timeout
            errors.append(exc)

    player = threading.Thread(target=play, daemon=True)
    player.start()
    time.sleep(0.5)
    rep = publish(url)
    player.join(timeout=20)
    assert not player.is_alive(), "the player did not see the stream end"
    assert rep["frames"] == N and rep["codec"] == "libx264"
    assert stamps == list(range(N)), (stamps, errors)
    assert times == pytest.approx([i / FPS for i in range(N)], abs=1.5e-3)  # FLV keeps milliseconds


class RecordServer(ServerProcess):
    """``rtsp_record_server.py``: GStreamer's RTSP server taking a published stream into ``out``."""

    name = "rtsp-record"

    def __init__(self, out: Path, **kwargs) -> None:
        super().__init__(**kwargs)
        self.out, self.port = out, free_port()

    def new_ports(self) -> None:
        self.port = free_port()

    def command(self) -> list[str]:
        return [GST_PYTHON, "-u", str(HERE / "rtsp_record_server.py"), "--port", str(self.port), "--out", str(self.out)]

    def ready(self) -> bool:
        return "READY" in self.log_since_start() and port_open(self.port, LOOPBACK)


def test_rtsp_record_is_received(tmp_path):
    require(rtsp_missing_reason())
    out = tmp_path / "received.mkv"
    with RecordServer(out, workdir=tmp_path / "srv") as server:
        server.start()
        rep = publish(f"rtsp://{LOOPBACK}:{server.port}/out")
        assert rep["frames"] == N
        stamps: list[int] = []
        deadline = time.monotonic() + 10
        while len(stamps) < N and time.monotonic() < deadline:  # the server writes as it receives
            time.sleep(0.2)
            try:
                with av.open(str(out)) as f:
                    stamps = [read_stamp(fr.to_ndarray(format="rgb24")) for fr in f.decode(video=0)]
            except (OSError, av.error.FFmpegError):
                continue
    assert stamps == list(range(N))


@pytest.mark.parametrize("scheme", ["rtmp", "rtsp"])
def test_refused_connection_is_a_clear_error(scheme):
    port = free_port()  # nothing listens there
    url = f"{scheme}://admin:s3cret@{LOOPBACK}:{port}/live/x"
    t0 = time.monotonic()
    with pytest.raises(SinkError) as info:
        VideoWriter(url, width=W, height=H, fps=FPS, timeout_s=3)
    assert time.monotonic() - t0 < 5
    text = str(info.value) + repr(info.value.__cause__) + repr(info.value.__context__)
    assert "s3cret" not in text and "admin" not in text
    assert f"{LOOPBACK}:{port}" in str(info.value) and "server running" in str(info.value)


@pytest.mark.parametrize("scheme", ["rtmp", "rtsp"])
def test_silent_server_times_out(scheme):
    """A server that accepts the connection and never answers: an error after ``timeout_s``, no hang."""
    with socket.socket() as listener:
        listener.bind((LOOPBACK, 0))
        listener.listen(4)  # the kernel completes the handshake; nobody reads
        port = listener.getsockname()[1]
        t0 = time.monotonic()
        with pytest.raises(SinkError, match="no answer within 1.5 s; is the server running"):
            VideoWriter(f"{scheme}://u:pw@{LOOPBACK}:{port}/live/x", width=W, height=H, fps=FPS, timeout_s=1.5)
        elapsed = time.monotonic() - t0
    assert 1.0 <= elapsed < 6, elapsed


def test_server_gone_mid_stream_is_an_error_not_a_hang(live_servers):
    server = live_servers.rtmp()
    w = VideoWriter(server.url("gone"), width=W, height=H, fps=FPS, timeout_s=3)
    t_kill = None
    with pytest.raises(SinkError, match="writing failed|stopped taking"):
        for i in range(2000):
            if i == 10:
                server.stop()  # SIGKILL: the server vanishes
                t_kill = time.monotonic()
            w.write(frame(i % N), pts=i / FPS)
            time.sleep(0.005)
    assert t_kill is not None and time.monotonic() - t_kill < 6
    w.close()  # the error was raised once; closing is quiet and does not hang
    assert 0 < w.report()["frames"] <= 2000
