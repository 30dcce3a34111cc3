"""The preview page in a real headless browser (Debian's ``chromium-headless-shell``, or
``chromium --headless``): two streams pushing solid frames of different colours; the screenshot
must show both tiles in their colours, and the DOM (after the page's script polled /status) the
streams' numbers. Skips without the browser, but fails under ``CI=true`` (``.ci/run`` installs it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("prometheus_client")

from live.need import require  # noqa: E402
from preview.mjpeg import solid, stream_status  # noqa: E402
from vidpipe.metrics import MetricsServer, RunMetrics  # noqa: E402
from vidpipe.preview import PreviewHub  # noqa: E402

COLORS = {0: (220, 40, 40), 1: (40, 200, 60)}  # red, green: far apart in any colour management


def _browser() -> list[str] | None:
    for name, extra in (("chromium-headless-shell", []), ("chromium", ["--headless"])):
        path = shutil.which(name) or (f"/usr/bin/{name}" if os.access(f"/usr/bin/{name}", os.X_OK) else None)
        if path:
            return [path, *extra]
    return None


def _chromium(cmd: list[str], url: str, tmp: Path, *args: str) -> subprocess.CompletedProcess:
    sandbox = ["--no-sandbox"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    return subprocess.run(
        [*cmd, *sandbox, "--disable-gpu", f"--user-data-dir={tmp / 'profile'}", "--hide-scrollbars",
         "--window-size=900,420", "--virtual-time-budget=3000", *args, url],
        capture_output=True, timeout=60,
    )  # fmt: skip


def _area(img: np.ndarray, rgb: tuple[int, int, int], tol: int = 14) -> tuple[int, float]:
    """Pixels within ``tol`` of ``rgb``, and their mean column."""
    mask = (np.abs(img.astype(int) - np.array(rgb)).max(axis=2) <= tol)
    cols = np.nonzero(mask)[1]
    return int(mask.sum()), float(cols.mean()) if cols.size else -1.0


def test_page_in_headless_chromium(tmp_path: Path) -> None:
    import cv2

    cmd = _browser()
    require(None if cmd else "no headless Chromium (apt-get install chromium-headless-shell)")
    calls = []

    def status() -> dict:  # the first answer (the page's own HTML) differs from the later ones
        calls.append(1)
        state, fps = ("starting", 0.0) if len(calls) == 1 else ("live", 29.5)
        return {"streams": [
            stream_status(0, "left.mp4", state=state, fps=fps, frames=120, detections=7,
                          latency_ms={"p50": 41.0, "p99": 88.0, "count": 120}),
            stream_status(1, "rtsp://cam/right", state=state, fps=fps, drops=3, reconnects=1),
        ]}  # fmt: skip

    hub = PreviewHub()
    server = MetricsServer(RunMetrics(status), status=status, preview=hub)
    stop = threading.Event()

    def push() -> None:
        while not stop.is_set():
            for sid, rgb in COLORS.items():
                hub.push(sid, solid(rgb, 360, 640))
            stop.wait(0.05)

    pusher = threading.Thread(target=push, daemon=True)
    pusher.start()
    try:
        shot = tmp_path / "preview.png"
        p = _chromium(cmd, server.preview_url, tmp_path, f"--screenshot={shot}")
        assert shot.is_file(), p.stderr.decode(errors="replace")[-2000:]
        dom = _chromium(cmd, server.preview_url, tmp_path, "--dump-dom").stdout.decode()
    finally:
        stop.set()
        pusher.join(5)
        server.close()
        hub.close()
    img = cv2.imread(str(shot), cv2.IMREAD_COLOR)[..., ::-1]
    assert img.shape[:2] == (420, 900)
    red, red_x = _area(img, COLORS[0])
    green, green_x = _area(img, COLORS[1])
    tile = 400 * 225  # each tile's image area (CSS), the 16:9 frame fills it
    assert red > 0.8 * tile and green > 0.8 * tile, (red, green)
    assert red_x < green_x  # stream 0's tile first
    # the script polled /status: the tiles show the later numbers, not the page's first ones
    assert dom.count('class="tile"') == 2
    assert "state live" in dom and "fps 29.5" in dom and "state starting" not in dom
    assert "latency p50 41.0 ms  p99 88.0 ms" in dom and "drops 3  reconnects 1" in dom
    assert 'id="updated">-<' not in dom
    assert "rtsp://cam/right" in dom
