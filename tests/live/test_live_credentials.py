"""Credentials against GStreamer's RTSP server with basic auth (issue 12, item 8): the CLI reads
a password-protected camera, and the password shows nowhere (stdout, stderr with ``--debug``,
the table, its metadata); a wrong password is a one-line error naming the redacted URL."""

from __future__ import annotations

import base64
import csv
import json
import subprocess
import sys

USER, PASSWORD = "admin", "rtsp-S3cret"
SECRETS = (PASSWORD, base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode())


def _clean(text: str, where: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{where} shows a credential"


def _detect(*args, cwd):
    return subprocess.run([sys.executable, "-m", "vidpipe", "detect", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=240)


def test_rtsp_with_basic_auth_end_to_end(live_servers, tmp_path):
    server = live_servers.rtsp(streams=1, user=USER, password=PASSWORD)
    good = server.url("cam0")
    assert PASSWORD in good
    shown = f"rtsp://***@{server.host}:{server.port}/cam0"
    out = tmp_path / "dets.csv"
    p = _detect(good, "--max-frames", "15", "--device", "cpu", "--imgsz", "160", "--conf", "0.01", "--debug",
                "-o", out, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    _clean(p.stdout, "stdout")
    _clean(p.stderr, "stderr")
    assert shown in p.stdout
    meta_text = (tmp_path / "dets.csv.meta.json").read_text()
    _clean(out.read_text(), "table")
    _clean(meta_text, "meta.json")
    meta = json.loads(meta_text)
    # 15 frames read; a live queue may drop one the model was too slow for (latest wins, counted)
    src = meta["summary"]["sources"][0]
    assert src["source"] == shown and 0 < meta["summary"]["frames"] <= 15
    assert meta["summary"]["frames"] + src["extra"]["drops"] == 15, src
    assert {r["source"] for r in csv.DictReader(out.open())} <= {shown}

    wrong = server.url("cam0", user=USER, password="not-" + PASSWORD)
    p = _detect(wrong, "--max-frames", "5", "--device", "cpu", "--imgsz", "160", "--debug", "-o",
                tmp_path / "bad.csv", cwd=tmp_path)
    assert p.returncode == 2
    assert "401" in p.stderr and f"vidpipe: error: cannot open {shown}" in p.stderr
    _clean(p.stderr, "stderr (wrong password)")
    assert "not-" + PASSWORD not in p.stderr + p.stdout + (tmp_path / "bad.csv.meta.json").read_text()
