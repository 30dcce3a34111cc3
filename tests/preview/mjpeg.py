"""Test helpers for the preview: a status dict shaped like ``run.status()``, solid frames, and a
reader of ``multipart/x-mixed-replace`` MJPEG responses that decodes each part with OpenCV."""

from __future__ import annotations

import http.client
import time

import numpy as np

BOUNDARY = b"--vidpipe-frame"


def stream_status(sid: int, source: str, **kw) -> dict:
    base = {"stream_id": sid, "source": source, "kind": "live", "status": "running", "state": "live",
            "decoder": "pyav", "frames_in": 0, "frames": 0, "drops": 0, "reconnects": 0, "stalls": 0,
            "decode_errors": 0, "detections": 0, "fps": 0.0,
            "latency_ms": {"p50": None, "p99": None, "count": 0}}  # fmt: skip
    base.update(kw)
    return base


def solid(rgb: tuple[int, int, int], height: int = 360, width: int = 640):
    import torch

    return torch.tensor(rgb, dtype=torch.uint8).view(3, 1, 1).expand(3, height, width).contiguous()


def decode(jpeg: bytes) -> np.ndarray:
    """JPEG bytes -> ``(H, W, 3)`` uint8 RGB, decoded by OpenCV (not by what encoded it)."""
    import cv2

    bgr = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
    assert bgr is not None, "not a JPEG OpenCV can decode"
    return bgr[..., ::-1]


def open_mjpeg(port: int, sid: int, timeout: float = 10.0) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request("GET", f"/preview/{sid}.mjpg")
    return conn.getresponse()


def read_part(resp: http.client.HTTPResponse) -> tuple[dict[str, str], bytes]:
    """The next part of an MJPEG response: its headers and its body."""
    line = resp.fp.readline()
    while line in (b"\r\n", b"\n"):
        line = resp.fp.readline()
    assert line.strip() == BOUNDARY, f"expected the boundary, got {line[:80]!r}"
    headers = {}
    while (line := resp.fp.readline()) not in (b"\r\n", b"\n", b""):
        key, _, value = line.decode().partition(":")
        headers[key.strip().lower()] = value.strip()
    body = resp.fp.read(int(headers["content-length"]))
    assert resp.fp.read(2) == b"\r\n"
    return headers, body


def wait_for(predicate, timeout: float = 5.0, step: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()
