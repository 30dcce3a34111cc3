"""``vidpipe.serve`` and ``vidpipe serve`` over real inputs on the CPU: video files as cameras
(the real model, the real decoders), tables checked against a plain ``vidpipe.detect`` run of the
same clip, cameras added and removed at run time, /metrics scraped and parsed with
prometheus_client's parser, /status JSON, and SIGTERM ending the command with its tables final."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections import defaultdict
from pathlib import Path

import pytest
from serve_fixtures import IMGSZ, clips  # noqa: F401 - the clips fixture

import vidpipe
from vidpipe.errors import ConfigError
from vidpipe.serve import CameraConfig, MetricsConfig, OutputConfig, ServeConfig

pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

SRC = str(Path(__file__).resolve().parents[2] / "src")


def wait_until(predicate, *, timeout: float = 120.0, what: str = "the condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)


def stream(status: dict, camera: str) -> dict:
    found = [s for s in status["streams"] if s["camera"] == camera]
    assert found, f"no stream of camera {camera} in {status['streams']}"
    return found[-1]


def reference(clip: Path, **kw) -> dict[int, list[tuple]]:
    """Detections per frame of ``clip`` by vidpipe.detect (the same model and input size)."""
    out: dict[int, list[tuple]] = defaultdict(list)
    for r in vidpipe.detect(str(clip), device="cpu", imgsz=IMGSZ, batch_size=4, results_on_host=True, **kw):
        for name, score, box in zip(r.labels(), r.detections.scores.tolist(), r.detections.boxes.tolist()):
            out[r.index].append((name, score, *box))
    return out


def table(path: Path) -> dict[int, list[tuple]]:
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n"), f"{path} must end at a row boundary"
    out: dict[int, list[tuple]] = defaultdict(list)
    for row in csv.DictReader(text.splitlines()):
        out[int(row["frame"])].append(
            (row["class_name"], float(row["confidence"]), *(float(row[k]) for k in ("x1", "y1", "x2", "y2")))
        )
    return out


def same(got: dict[int, list[tuple]], ref: dict[int, list[tuple]], frames: range) -> None:
    for f in frames:
        a, b = sorted(got.get(f, []), key=lambda t: t[2]), sorted(ref.get(f, []), key=lambda t: t[2])
        assert len(a) == len(b), f"frame {f}: {len(a)} rows, vidpipe.detect has {len(b)}"
        for x, y in zip(a, b):
            assert x[0] == y[0] and abs(x[1] - y[1]) < 0.01 and all(abs(p - q) <= 1.0 for p, q in zip(x[2:], y[2:]))


def scrape(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return {f.name: f for f in text_string_to_metric_families(resp.read().decode())}


def sample(families: dict, name: str, suffix: str = "", **labels) -> float:
    for s in families[name].samples:
        if s.name == name + suffix and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    raise KeyError(f"{name}{suffix} {labels}")


def test_serve_api_tables_runtime_cameras_metrics_status(tmp_path: Path, clips: dict[str, Path]) -> None:
    short, long_ = clips["short"], clips["long"]
    ref = reference(short)
    assert sum(map(len, ref.values())) > 0, "the clip must have detections to compare"
    config = ServeConfig(
        cameras=(
            CameraConfig("a", str(short)),
            CameraConfig("b", str(short), classes=("person",), conf=0.4),
            CameraConfig("spare", str(long_), enabled=False),
        ),
        device="cpu", imgsz=IMGSZ, batch_size=4, conf=0.25,
        output=OutputConfig(str(tmp_path / "out") + "/"), metrics=MetricsConfig(port=0),
    )  # fmt: skip
    seen: list[int] = []
    with vidpipe.serve(config, on_batch=lambda batch: seen.append(len(batch))) as server:
        assert server.cameras == {"a": 0, "b": 1}
        wait_until(lambda: all(s["status"] == "ok" and s["frames"] == 24 for s in server.status()["streams"]),
                   what="both files to end")
        status = server.status()
        assert [stream(status, c)["frames"] for c in ("a", "b")] == [24, 24]
        assert status["tables"] == {"a": str(tmp_path / "out" / "a.detections.csv"),
                                    "b": str(tmp_path / "out" / "b.detections.csv")}  # fmt: skip
        assert status["metrics_url"] == server.metrics_url
        # /metrics: parsed by prometheus_client; /status: the same numbers as JSON
        fam = scrape(server.metrics_url)
        a = {"camera": "a", "stream_id": "0", "stream": str(short)}
        assert sample(fam, "vidpipe_stream_frames", "_total", **a) == 24
        dets_a = sample(fam, "vidpipe_stream_detections", "_total", **a)
        assert dets_a == sum(map(len, ref.values()))
        per_class = sum(s.value for s in fam["vidpipe_class_detections"].samples
                        if s.name.endswith("_total") and s.labels["camera"] == "a")  # fmt: skip
        assert per_class == dets_a
        assert sample(fam, "vidpipe_stream_status", status="ok", **a) == 1
        with urllib.request.urlopen(server.metrics_url.replace("/metrics", "/status"), timeout=10) as resp:
            js = json.loads(resp.read())
        assert [s["camera"] for s in js["streams"]] == ["a", "b"] and js["streams"][0]["frames"] == 24
        # cameras at run time: a configured (disabled) one, then removed while it runs
        with pytest.raises(ConfigError, match="is running"):
            server.add_camera("a", str(short))
        with pytest.raises(ConfigError, match="below the top-level conf"):
            server.add_camera("low", str(short), conf=0.1)
        sid = server.add_camera("spare")
        assert sid == 2 and server.cameras["spare"] == 2
        wait_until(lambda: stream(server.status(), "spare")["frames"] >= 8, what="8 frames of the added camera")
        server.remove_camera("spare")
        wait_until(lambda: stream(server.status(), "spare")["status"] == "removed", timeout=10, what="removed")
        with pytest.raises(ConfigError, match="no running camera"):
            server.remove_camera("spare")
        sid = server.add_camera("c", str(short), output=tmp_path / "c.jsonl")
        wait_until(lambda: stream(server.status(), "c")["frames"] == 24, what="the camera added at run time")
        spare_frames = stream(server.status(), "spare")["frames"]
    assert 8 <= spare_frames < 225
    assert server.summary is not None and sum(seen) == server.summary.frames == 24 * 3 + spare_frames
    # tables: camera a = vidpipe.detect of the clip; b narrowed to persons >= 0.4; c its own JSONL
    out = tmp_path / "out"
    same(table(out / "a.detections.csv"), ref, range(24))
    narrowed = {f: [d for d in v if d[0] == "person" and d[1] >= 0.4] for f, v in ref.items()}
    same(table(out / "b.detections.csv"), narrowed, range(24))
    spare_rows = table(out / "spare.detections.csv")
    assert spare_rows and max(spare_rows) < spare_frames
    c_rows = [json.loads(line) for line in (tmp_path / "c.jsonl").read_text().splitlines()]
    assert len(c_rows) == sum(map(len, ref.values()))
    assert "captured_at" not in (out / "a.detections.csv").read_text().splitlines()[0]  # files: no capture times
    meta = json.loads((out / "a.detections.csv.meta.json").read_text())
    assert meta["finished"] is True and meta["frames"] == 24
    assert meta["status"] == "complete"  # its own camera read its file to the end...
    spare_meta = json.loads((out / "spare.detections.csv.meta.json").read_text())
    assert spare_meta["status"] == "partial" and spare_meta["frames"] == spare_frames  # ...this one was removed
    with pytest.raises(ConfigError, match="has stopped"):
        server.add_camera("late", str(short))


def test_serve_metrics_port_taken_names_the_line(tmp_path: Path, clips: dict[str, Path]) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        cfg = tmp_path / "serve.yaml"
        cfg.write_text(f"device: cpu\nimgsz: {IMGSZ}\nmetrics:\n  port: {port}\n"
                       f"cameras:\n  - name: a\n    url: {clips['short']}\n")  # fmt: skip
        with pytest.raises(ConfigError, match=rf"serve.yaml:4: metrics.port: cannot serve metrics on 127.0.0.1:{port}"):
            vidpipe.serve(cfg)
    meta = json.loads((tmp_path / "detections" / "a.detections.csv.meta.json").read_text())
    assert meta["finished"] is True and meta["status"] == "partial"  # the table opened is finalised


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _cli(*args: str, cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vidpipe", *args], capture_output=True, text=True, cwd=cwd,
                          env=_env(), timeout=timeout, check=False)  # fmt: skip


def test_cli_check(tmp_path: Path, clips: dict[str, Path]) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(f"device: cpu\nclasses: [person, bicycle]\ncameras:\n  - name: a\n    url: {clips['short']}\n"
                    "    classes: [person]\n")  # fmt: skip
    p = _cli("serve", str(good), "--check", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "OK: 1 camera(s)" in p.stdout and f"a: {clips['short']} (file) -> {tmp_path / 'detections' / 'a.detections.csv'}" in p.stdout
    assert not (tmp_path / "detections").exists()  # --check writes nothing
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"device: cpu\ncameras:\n  - name: a\n    url: {clips['short']}\n    classes: [persn]\n")
    p = _cli("serve", str(bad), "--check", cwd=tmp_path)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines()[-1].startswith(f"vidpipe: error: {bad}:5: cameras[0].classes: unknown class 'persn'")
    bad.write_text(f"device: cpu\ncameras:\n  - name: a\n    url: {clips['short']}\n    blur: [persn]\n")
    p = _cli("serve", str(bad), "--check", cwd=tmp_path)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines()[-1].startswith(f"vidpipe: error: {bad}:5: cameras[0].blur: unknown class 'persn'")


def test_cli_ends_by_itself_when_every_camera_ended(tmp_path: Path, clips: dict[str, Path]) -> None:
    """Video files as cameras end; then the command ends too (exit 0, tables complete), and a
    camera that cannot be read makes it exit 2 naming it."""
    cfg = tmp_path / "serve.yaml"
    cfg.write_text(f"device: cpu\nimgsz: {IMGSZ}\nbatch_size: 4\noutput: out.csv\n"
                   f"cameras:\n  - {{name: a, url: {clips['short']}}}\n")  # fmt: skip
    p = _cli("serve", str(cfg), "--table", "off", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    meta = json.loads((tmp_path / "out.csv.meta.json").read_text())
    assert meta["status"] == "complete" and meta["frames"] == 24
    cfg.write_text(cfg.read_text() + f"  - {{name: gone, url: {tmp_path / 'missing.mp4'}}}\n")
    p = _cli("serve", str(cfg), "--table", "off", cwd=tmp_path)
    assert p.returncode == 2 and "missing.mp4" in p.stderr.strip().splitlines()[-1], p.stderr


@pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
def test_cli_sigterm_flushes_tables_and_exits_143(tmp_path: Path, clips: dict[str, Path]) -> None:
    long_ = clips["long"]
    cfg = tmp_path / "serve.yaml"
    cfg.write_text(f"device: cpu\nimgsz: {IMGSZ}\nbatch_size: 4\noutput: out/\n"
                   f"cameras:\n  - {{name: a, url: {long_}}}\n  - {{name: b, url: {long_}, output: b.jsonl}}\n")  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-m", "vidpipe", "serve", str(cfg), "--table", "off"], cwd=tmp_path,
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    a_csv = tmp_path / "out" / "a.detections.csv"
    try:
        def rows() -> int:
            return a_csv.read_text().count("\n") - 1 if a_csv.exists() else 0

        deadline = time.monotonic() + 180
        while rows() < 3:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no rows within 180 s"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert "SIGTERM" in err
    meta = json.loads((tmp_path / "out" / "a.detections.csv.meta.json").read_text())
    assert meta["finished"] is True and meta["status"] == "partial" and "SIGTERM" in meta["reason"]
    frames = meta["frames"]
    assert 0 < frames < 225
    same(table(a_csv), reference(long_, max_frames=frames), range(frames))  # every frame detected is there
    b_meta = json.loads((tmp_path / "b.jsonl.meta.json").read_text())
    assert b_meta["finished"] is True and b_meta["status"] == "partial"
    b_rows = [json.loads(line) for line in (tmp_path / "b.jsonl").read_text().splitlines()]
    assert all(r["frame"] < b_meta["frames"] for r in b_rows)


@pytest.mark.gpu
def test_serve_on_the_gpu_exports_gpu_memory_and_nvdec(tmp_path: Path, clips: dict[str, Path]) -> None:
    config = ServeConfig(
        cameras=(CameraConfig("a", str(clips["short"])),), device="cuda",
        output=OutputConfig(str(tmp_path / "out") + "/"), metrics=MetricsConfig(port=0),
    )  # fmt: skip
    with vidpipe.serve(config) as server:
        wait_until(lambda: stream(server.status(), "a")["frames"] == 24, what="24 frames on the GPU")
        fam = scrape(server.metrics_url)
        stats = server.status()["stats"]
        assert sample(fam, "vidpipe_gpu_memory_bytes") > 0
        assert sample(fam, "vidpipe_gpu_peak_memory_bytes") >= sample(fam, "vidpipe_gpu_memory_bytes")
        if stats.get("nvdec_util_percent") is not None:  # NVML (nvidia-ml-py) answered
            assert 0 <= sample(fam, "vidpipe_nvdec_utilization_ratio") <= 1
            assert 0 <= sample(fam, "vidpipe_gpu_utilization_ratio") <= 1
        else:
            assert "vidpipe_nvdec_utilization_ratio" not in fam
    meta = json.loads((tmp_path / "out" / "a.detections.csv.meta.json").read_text())
    assert meta["status"] == "complete" and meta["frames"] == 24


def test_serve_realtime_file_camera_capture_times_and_hourly_tables(tmp_path: Path, clips: dict[str, Path]) -> None:
    """A video file played at its own rate is a live camera: its results carry capture times (the
    latency histogram fills, the table has captured_at / latency_ms), and ``rotate: hourly``
    names the table by the hour."""
    from vidpipe.sources.options import LiveOptions

    config = ServeConfig(
        cameras=(CameraConfig("a", str(clips["short"])),), device="cpu", imgsz=IMGSZ, batch_size=4,
        live=LiveOptions(realtime=True), output=OutputConfig(str(tmp_path / "out") + "/", rotate="hourly"),
        metrics=MetricsConfig(port=0),
    )  # fmt: skip
    with vidpipe.serve(config) as server:
        wait_until(lambda: server.idle, what="the clip played to its end")
        s = stream(server.status(), "a")
        assert s["kind"] == "live" and s["frames"] > 0 and s["frames"] + s["drops"] == 24
        assert s["latency_ms"]["count"] == s["frames"]
        fam = scrape(server.metrics_url)
        labels = {"camera": "a", "stream_id": "0", "stream": str(clips["short"])}
        assert sample(fam, "vidpipe_stream_latency_seconds", "_count", **labels) == s["frames"]
        assert sample(fam, "vidpipe_stream_frames_in", "_total", **labels) == 24
    tables = sorted((tmp_path / "out").glob("a.detections-*.csv"))
    assert len(tables) in (1, 2), tables  # one per hour (two if the clip straddled an hour)
    rows = [r for t in tables for r in csv.DictReader(t.read_text().splitlines())]
    assert rows and all(r["captured_at"].endswith("Z") and float(r["latency_ms"]) >= 0 for r in rows)
