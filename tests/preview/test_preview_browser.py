"""The preview page in a real headless browser (Debian's ``chromium-headless-shell``, or
``chromium --headless``): streams pushing solid frames of different colours; the screenshot must
show every tile in its colour, in order, and the DOM (after the page's script polled /status) the
streams' numbers. Two streams (both MJPEG) and six (more than a browser's six connections to one
server: four MJPEG tiles, two renewed snapshots). Skips without the browser, but fails under
``CI=true`` (``.ci/run`` installs it)."""

from __future__ import annotations

import os
import re
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

# far apart in any colour management
COLORS = [(220, 40, 40), (40, 200, 60), (40, 60, 220), (230, 220, 40), (220, 40, 220), (40, 220, 220)]


def _browser() -> list[str] | None:
    for name, extra in (("chromium-headless-shell", []), ("chromium", ["--headless"])):
        path = shutil.which(name) or (f"/usr/bin/{name}" if os.access(f"/usr/bin/{name}", os.X_OK) else None)
        if path:
            return [path, *extra]
    return None


def _chromium(cmd: list[str], url: str, tmp: Path, size: str, *args: str) -> subprocess.CompletedProcess:
    sandbox = ["--no-sandbox"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    return subprocess.run(
        [*cmd, *sandbox, "--disable-gpu", f"--user-data-dir={tmp / 'profile'}", "--hide-scrollbars",
         f"--window-size={size}", "--virtual-time-budget=3000", *args, url],
        capture_output=True, timeout=60,
    )  # fmt: skip


def _area(img: np.ndarray, rgb: tuple[int, int, int], tol: int = 14) -> tuple[int, float, float]:
    """Pixels within ``tol`` of ``rgb``, and their mean row and column."""
    mask = (np.abs(img.astype(int) - np.array(rgb)).max(axis=2) <= tol)
    rows, cols = np.nonzero(mask)
    return int(mask.sum()), float(rows.mean()) if rows.size else -1.0, float(cols.mean()) if cols.size else -1.0


@pytest.mark.parametrize(("n", "width", "height"), [(2, 900, 420), (6, 1300, 720)])
def test_page_in_headless_chromium(tmp_path: Path, n: int, width: int, height: int) -> None:
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
            *(stream_status(i, f"cam{i}.mp4", state=state, fps=fps) for i in range(2, n)),
        ]}  # fmt: skip

    hub = PreviewHub()
    server = MetricsServer(RunMetrics(status), status=status, preview=hub)
    stop = threading.Event()

    def push() -> None:
        while not stop.is_set():
            for sid, rgb in enumerate(COLORS[:n]):
                hub.push(sid, solid(rgb, 360, 640))
            stop.wait(0.05)

    pusher = threading.Thread(target=push, daemon=True)
    pusher.start()
    try:
        shot = tmp_path / "preview.png"
        size = f"{width},{height}"
        p = _chromium(cmd, server.preview_url, tmp_path, size, f"--screenshot={shot}")
        assert shot.is_file(), p.stderr.decode(errors="replace")[-2000:]
        dom = _chromium(cmd, server.preview_url, tmp_path, size, "--dump-dom").stdout.decode()
    finally:
        stop.set()
        pusher.join(5)
        server.close()
        hub.close()
    img = cv2.imread(str(shot), cv2.IMREAD_COLOR)[..., ::-1]
    assert img.shape[:2] == (height, width)
    tile = 400 * 225  # each tile's image area (CSS), the 16:9 frame fills it
    found = [_area(img, rgb) for rgb in COLORS[:n]]
    assert all(count > 0.8 * tile for count, _, _ in found), [count for count, _, _ in found]
    order = sorted(range(n), key=lambda i: (round(found[i][1] / 100), found[i][2]))  # rows, then columns
    assert order == list(range(n))  # the tiles in stream order
    # the script polled /status: the tiles show the later numbers, not the page's first ones
    assert dom.count('class="tile"') == n
    assert dom.count("state live") == n and "fps 29.5" in dom and "state starting" not in dom
    assert "latency p50 41.0 ms  p99 88.0 ms" in dom and "drops 3  reconnects 1" in dom
    assert 'id="updated">-<' not in dom
    assert "rtsp://cam/right" in dom
    assert len(re.findall(r'src="/preview/\d+\.mjpg"', dom)) == min(n, 4)
    assert len(re.findall(r'class="snap"[^>]* src="/preview/\d+\.jpg\?t=', dom)) == max(0, n - 4)
