"""``vidpipe serve`` and ``vidpipe detect --metrics-port`` against a real RTSP server (GStreamer's,
on loopback; tests/live/servers.py): password from the environment, cameras live, a camera added
and one removed at run time while the others go on, the latency histogram filled, the password
nowhere (metrics, /status, tables, metadata, terminal output), SIGTERM -> 143 with tables final,
and the live table drawn on a pseudo-terminal."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

import vidpipe

pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX signals and pseudo-terminals")

SRC = str(Path(__file__).resolve().parents[2] / "src")
PASSWORD = "s3cr3t-pw"
FAST = "live:\n  open_timeout: 5\n  read_timeout: 3\n  stall_timeout: 3\n  reconnect_min: 0.25\n  reconnect_max: 1\n"


@pytest.fixture
def rtsp(live_servers):
    """GStreamer's RTSP server (the live_servers plugin of tests/live: skipped where missing,
    a failure under CI=true) with three password-protected cameras, 320x240 at 15 fps."""
    return live_servers.rtsp(streams=3, width=320, height=240, fps=15, user="admin", password=PASSWORD)


def wait_until(predicate, *, timeout: float = 60.0, what: str = "the condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)


def config_text(srv, tmp_path: Path, metrics_port: int | None = 0) -> str:
    metrics = f"metrics: {{port: {metrics_port}}}\n" if metrics_port is not None else ""
    return (f"device: cpu\nimgsz: 128\nbatch_size: 4\noutput: {tmp_path / 'out'}/\n{metrics}{FAST}"
            f"cameras:\n"
            f"  - name: cam0\n    url: rtsp://admin:${{CAM_PASSWORD}}@127.0.0.1:{srv.port}/cam0\n"
            f"  - name: cam1\n    url: rtsp://admin:${{CAM_PASSWORD}}@127.0.0.1:{srv.port}/cam1\n"
            f"  - name: cam2\n    url: rtsp://admin:${{CAM_PASSWORD}}@127.0.0.1:{srv.port}/cam2\n    enabled: false\n")


def by_camera(status: dict) -> dict[str, dict]:
    return {s["camera"]: s for s in status["streams"]}


def test_serve_rtsp_cameras_runtime_changes_metrics_no_password(rtsp, tmp_path: Path) -> None:
    cfg = tmp_path / "serve.yaml"
    cfg.write_text(config_text(rtsp, tmp_path))
    with vidpipe.serve(cfg, env={"CAM_PASSWORD": PASSWORD}) as server:
        wait_until(lambda: all(s["state"] == "live" and s["frames"] >= 10 for s in server.status()["streams"]),
                   what="cam0 and cam1 live")  # fmt: skip
        server.add_camera("cam2")  # the configured, disabled one
        wait_until(lambda: by_camera(server.status())["cam2"]["frames"] >= 10, what="cam2 (added) live")
        server.remove_camera("cam1")
        wait_until(lambda: by_camera(server.status())["cam1"]["status"] == "removed", timeout=5, what="cam1 removed")
        removed_at = by_camera(server.status())["cam1"]["frames"]
        time.sleep(0.5)  # a batch already in the model when it was removed is still delivered
        before = by_camera(server.status())
        assert before["cam1"]["frames"] - removed_at <= 4  # at most that batch (batch_size 4)
        time.sleep(1.5)
        after = by_camera(server.status())
        assert after["cam1"]["frames"] == before["cam1"]["frames"]  # removed: no more results
        for cam in ("cam0", "cam2"):  # the others go on
            assert after[cam]["frames"] > before[cam]["frames"] and after[cam]["state"] == "live"
        with urllib.request.urlopen(server.metrics_url, timeout=10) as resp:
            text = resp.read().decode()
        with urllib.request.urlopen(server.metrics_url.replace("/metrics", "/status"), timeout=10) as resp:
            status_text = resp.read().decode()
        fam = {f.name: f for f in text_string_to_metric_families(text)}
        cam0 = {"camera": "cam0", "stream": f"rtsp://***@127.0.0.1:{rtsp.port}/cam0", "stream_id": "0"}

        def sample(name: str, **labels) -> float:
            family = name
            for suffix in ("_total", "_count", "_sum", "_bucket"):
                family = family.removesuffix(suffix)
            return next(s.value for s in fam[family].samples
                        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))  # fmt: skip

        assert sample("vidpipe_stream_state", state="live", **cam0) == 1
        assert sample("vidpipe_stream_state", state="reconnecting", **cam0) == 0
        assert sample("vidpipe_stream_latency_seconds_count", **cam0) >= 10  # one observation per live result
        assert 0 < sample("vidpipe_stream_latency_seconds_sum", **cam0) / sample("vidpipe_stream_latency_seconds_count", **cam0) < 5
        assert sample("vidpipe_stream_frames_in_total", **cam0) >= sample("vidpipe_stream_frames_total", **cam0)
        assert sample("vidpipe_stream_status", status="removed", camera="cam1") == 1
        assert sample("vidpipe_stream_fps", **cam0) > 0
        assert PASSWORD not in text and PASSWORD not in status_text
        assert json.loads(status_text)["cameras"] == {"cam0": 0, "cam2": 2}
    assert server.summary is not None
    for path in (tmp_path / "out").iterdir():  # tables and their metadata
        assert PASSWORD not in path.read_text(), path
    meta = json.loads((tmp_path / "out" / "cam0.detections.csv.meta.json").read_text())
    # a camera's normal end is the server stopping it: its table is complete
    assert meta["finished"] is True and meta["status"] == "complete" and meta["frames"] > 0
    header = (tmp_path / "out" / "cam0.detections.csv").read_text().splitlines()[0].split(",")
    assert header[-2:] == ["captured_at", "latency_ms"]  # live cameras' tables carry capture times


def _env() -> dict[str, str]:
    env = dict(os.environ, CAM_PASSWORD=PASSWORD)
    env["PYTHONPATH"] = SRC + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _pty_run(args: list[str], cwd: Path, until, timeout: float = 90.0) -> tuple[int, str]:
    """Run ``python -m vidpipe ARGS`` on a pseudo-terminal; SIGTERM once ``until(output)``."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: never returns
        os.chdir(cwd)
        os.execve(sys.executable, [sys.executable, "-m", "vidpipe", *args], _env())
    out = b""
    deadline = time.monotonic() + timeout
    signalled = False
    try:
        while True:
            if not signalled and until(out.decode(errors="replace")):
                os.kill(pid, signal.SIGTERM)
                signalled = True
                deadline = time.monotonic() + 30
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                pytest.fail(f"vidpipe {' '.join(args)} did not finish:\n{out.decode(errors='replace')[-3000:]}")
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                try:
                    data = os.read(fd, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not data:
                    break
                out += data
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    return os.waitstatus_to_exitcode(status), out.decode(errors="replace")


def test_cli_serve_table_on_a_terminal_and_sigterm(rtsp, tmp_path: Path) -> None:
    cfg = tmp_path / "serve.yaml"
    cfg.write_text(config_text(rtsp, tmp_path, metrics_port=None))
    rc, out = _pty_run(["serve", str(cfg)], tmp_path, until=lambda text: text.count("live ") >= 6)
    assert rc == 143, out[-3000:]
    assert "\x1b[4F\x1b[J" in out  # the 4-line table (title, header, 2 cameras) redrawn in place
    header = next(line for line in out.splitlines() if line.lstrip("\x1b[4FJ").startswith("stream"))
    assert header.split()[:4] == ["stream", "state", "fps", "p50"]
    rows = [line.split() for line in out.splitlines() if line.startswith("cam0 ")]
    assert any(r[1] == "live" and float(r[2]) > 0 for r in rows), rows
    assert PASSWORD not in out
    meta = json.loads((tmp_path / "out" / "cam0.detections.csv.meta.json").read_text())
    assert meta["status"] == "partial" and "SIGTERM" in meta["reason"]


def test_cli_detect_shows_the_table_instead_of_the_bar(rtsp, tmp_path: Path) -> None:
    args = ["detect", rtsp.url("cam0"), rtsp.url("cam1"), "--device", "cpu", "--imgsz", "128", "-o", "out/"]
    rc, out = _pty_run(args, tmp_path, until=lambda text: text.count(" live ") >= 4)
    assert rc == 143, out[-3000:]
    assert "\x1b[4F\x1b[J" in out and "frame/s" not in out and "it/s" not in out  # a table, not tqdm
    rows = [line.split() for line in out.splitlines() if line.startswith("rtsp://***@127.0.0.1")]
    assert any(r[1] == "live" for r in rows), out[-2000:]
    assert PASSWORD not in out


def test_cli_detect_live_flags_and_metrics(rtsp, tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = rtsp.url("cam0")
    out_csv = tmp_path / "cam.csv"
    proc = subprocess.Popen(
        [sys.executable, "-m", "vidpipe", "detect", url, "--device", "cpu", "--imgsz", "128", "--batch-size", "4",
         "-o", str(out_csv), "--metrics-port", str(port), "--rtsp-transport", "tcp", "--stall-timeout", "3",
         "--batch-timeout", "0.05"],
        cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        def scrape() -> dict | None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:
                    return {f.name: f for f in text_string_to_metric_families(resp.read().decode())}
            except OSError:
                return None

        def frames() -> float:
            fam = scrape()
            if not fam or not fam["vidpipe_stream_frames"].samples:
                return 0
            return fam["vidpipe_stream_frames"].samples[0].value

        wait_until(lambda: proc.poll() is not None or frames() >= 15, timeout=90, what="15 frames in the metrics")
        assert proc.poll() is None, proc.communicate()
        fam = scrape()
        labels = fam["vidpipe_stream_fps"].samples[0].labels
        assert labels == {"stream_id": "0", "stream": f"rtsp://***@127.0.0.1:{rtsp.port}/cam0"}
        assert next(s.value for s in fam["vidpipe_stream_state"].samples if s.labels["state"] == "live") == 1
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=5) as resp:
            status = json.loads(resp.read())
        assert status["streams"][0]["kind"] == "live" and status["streams"][0]["state"] == "live"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert PASSWORD not in out + err
    with pytest.raises(OSError):  # the endpoint closed with the run
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    assert json.loads((tmp_path / "cam.csv.meta.json").read_text())["status"] == "partial"
