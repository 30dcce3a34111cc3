"""The preview from the command line and from ``vidpipe serve``: ``vidpipe detect --metrics-port 0
--preview`` logs the page's URL once and serves the run's frames; serve's ``metrics: preview:``
(and ``--preview``) do the same per camera. JPEGs are compared with PyAV's decode of the input."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("prometheus_client")

import vidpipe  # noqa: E402
from preview.mjpeg import decode  # noqa: E402
from serve.serve_fixtures import IMGSZ, cut  # noqa: E402
from vidpipe.cli import build_parser  # noqa: E402
from vidpipe.errors import ConfigError  # noqa: E402
from vidpipe.serve import CameraConfig, MetricsConfig, OutputConfig, ServeConfig, load_config  # noqa: E402


def _pyav_frame(path: Path, index: int) -> np.ndarray:
    import av

    with av.open(str(path)) as c:
        for i, frame in enumerate(c.decode(video=0)):
            if i == index:
                return frame.to_ndarray(format="rgb24")
    raise AssertionError(f"{path} has no frame {index}")


def _snapshot(base: str, sid: int) -> tuple[np.ndarray, int]:
    with urllib.request.urlopen(f"{base}/preview/{sid}.jpg", timeout=10) as r:
        return decode(r.read()), int(r.headers["X-Vidpipe-Frame"])


def _annotated(jpeg_rgb: np.ndarray, frame: np.ndarray, boxes: list[tuple[float, float, float, float]]) -> None:
    """``jpeg_rgb`` is ``frame`` (PyAV's decode of the input) outside the detections' boxes (and
    their labels), and differs from it on the boxes' outlines (drawn by the annotator)."""
    assert jpeg_rgb.shape == frame.shape
    diff = np.abs(jpeg_rgb.astype(int) - frame.astype(int)).max(axis=2)
    h, w = diff.shape
    outside = np.ones((h, w), bool)
    outline = np.zeros((h, w), bool)
    for x1, y1, x2, y2 in boxes:
        a, b = int(np.clip(x1, 0, w - 1)), int(np.clip(x2, 0, w - 1))
        c, d = int(np.clip(y1, 0, h - 1)), int(np.clip(y2, 0, h - 1))
        outside[max(0, c - 24) : d + 6, max(0, a - 6) : b + 6] = False  # the box, its label above
        outline[c, a : b + 1] = outline[d, a : b + 1] = True
        outline[c : d + 1, a] = outline[c : d + 1, b] = True
    assert outside.mean() > 0.2
    assert diff[outside].mean() < 6
    if boxes:
        assert diff[outline].mean() > 25  # the boxes are drawn


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cut(tmp_path_factory.mktemp("preview-cli") / "street.mp4", 100, start=35)  # people from frame 0


def test_detect_preview_flag(make_clip, tmp_path: Path) -> None:
    clip = Path(make_clip(width=320, height=192, frames=150, fps=25, gop=25, pattern="boxes").path)  # 6 s
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    p = subprocess.Popen(
        [sys.executable, "-m", "vidpipe", "detect", str(clip), "--device", "cpu", "--imgsz", str(IMGSZ),
         "--realtime", "--metrics-port", "0", "--preview", "-o", str(tmp_path / "d.csv")],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env,
    )  # fmt: skip
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 60
        url = None
        while url is None and time.monotonic() < deadline:
            line = p.stderr.readline()  # type: ignore[union-attr]
            if not line:
                break
            lines.append(line)
            if "preview at " in line:
                url = line.split("preview at ", 1)[1].strip()
        assert url is not None and url.endswith("/preview"), "".join(lines)
        base = url.removesuffix("/preview")
        rgb, index = _snapshot(base, 0)
        with urllib.request.urlopen(url, timeout=10) as r:
            assert str(clip).encode() in r.read()
    finally:
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
    lines.append(err)
    assert p.returncode == 130, "".join(lines)
    assert "".join(lines).count("preview at ") == 1
    with (tmp_path / "d.csv").open() as f:  # complete after the interrupt: every frame detected
        boxes = [tuple(float(r[k]) for k in ("x1", "y1", "x2", "y2")) for r in csv.DictReader(f) if int(r["frame"]) == index]
    _annotated(rgb, _pyav_frame(clip, index), boxes)


def test_detect_preview_needs_a_metrics_port(capsys) -> None:
    args = build_parser().parse_args(["detect", "x.mp4", "--preview"])
    with pytest.raises(SystemExit) as info:
        args.func(args)
    assert info.value.code == 2
    assert "--preview needs --metrics-port PORT" in capsys.readouterr().err


def test_serve_preview(clip: Path, tmp_path: Path) -> None:
    config = ServeConfig(
        cameras=(CameraConfig("door", str(clip)),), device="cpu", imgsz=IMGSZ, batch_size=4,
        output=OutputConfig(str(tmp_path / "out") + "/"), metrics=MetricsConfig(port=0, preview=True),
    )  # fmt: skip
    boxes: dict[int, list] = {}

    def keep(batch) -> None:
        for r in batch:
            boxes[r.meta.index] = [tuple(map(float, b)) for b in r.detections.boxes.tolist()]

    with vidpipe.serve(config, on_batch=keep) as server:
        base = server.metrics_url.removesuffix("/metrics")
        deadline = time.monotonic() + 60
        while not server.run.stages.stages[-1].hub.has(0) and time.monotonic() < deadline:
            time.sleep(0.05)
        rgb, index = _snapshot(base, 0)
        while index not in boxes and time.monotonic() < deadline:  # the batch is delivered after the stages
            time.sleep(0.05)
        assert boxes[index], "the street clip's frames have detections"
        _annotated(rgb, _pyav_frame(clip, index), boxes[index])
        with urllib.request.urlopen(base + "/preview", timeout=10) as r:
            assert b"door" in r.read()
        hub = server.run.stages.stages[-1].hub
    assert hub._closed  # stopped with the server


def test_serve_preview_config_and_flag(tmp_path: Path, capsys) -> None:
    cfg = tmp_path / "s.yaml"
    cfg.write_text("cameras:\n  - {name: a, url: a.mp4}\nmetrics:\n  port: 0\n  preview: true\n")
    assert load_config(cfg).metrics == MetricsConfig(port=0, preview=True)
    cfg.write_text("cameras:\n  - {name: a, url: a.mp4}\nmetrics:\n  preview: true\n")
    with pytest.raises(ConfigError, match="metrics.preview needs metrics.port"):
        load_config(cfg)
    cfg.write_text("cameras:\n  - {name: a, url: a.mp4}\nmetrics:\n  preview: yes please\n")
    with pytest.raises(ConfigError, match="preview"):
        load_config(cfg)
    from vidpipe.cli.serve import _config

    cfg.write_text("cameras:\n  - {name: a, url: a.mp4}\n")
    args = build_parser().parse_args(["serve", str(cfg), "--metrics-port", "0", "--preview"])
    assert _config(args).metrics == MetricsConfig(port=0, preview=True)
    args = build_parser().parse_args(["serve", str(cfg), "--preview"])
    with pytest.raises(SystemExit):
        _config(args)
    assert "--preview needs --metrics-port PORT" in capsys.readouterr().err
