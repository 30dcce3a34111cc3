"""The live per-stream table (formatting and the terminal/log modes) from ``status()``-shaped
dicts of the documented schema; the table over a real run is in tests/serve/test_serve_run.py."""

from __future__ import annotations

import io
import logging
import time

from vidpipe.cli._live_table import LiveTable, format_log_line, format_table

STATUS = {
    "time": 1.7e9,
    "uptime_s": 72.4,
    "streams": [
        {"stream_id": 0, "source": "rtsp://***@10.0.0.5/s", "camera": "front", "kind": "live", "status": "running",
         "state": "live", "frames": 2153, "drops": 0, "reconnects": 0, "fps": 29.94,
         "latency_ms": {"p50": 41.2, "p99": 88.0, "count": 2153}},
        {"stream_id": 1, "source": "rtsp://***@10.0.0.7/a-very-long-path/that/goes/on/and/on", "kind": "live",
         "status": "running", "state": "reconnecting", "frames": 602, "drops": 4, "reconnects": 2, "fps": 0.0,
         "latency_ms": {"p50": None, "p99": None, "count": 0}},
        {"stream_id": 2, "source": "clip.mp4", "kind": "file", "status": "ok", "state": None, "frames": 250,
         "drops": 0, "reconnects": 0, "fps": 0.0, "latency_ms": {"p50": None, "p99": None, "count": 0}},
    ],
}


def test_format_table() -> None:
    lines = format_table(STATUS, width=100)
    assert lines[0] == "vidpipe: 3 streams, 29.9 fps, up 0:01:12"
    assert lines[1].split() == ["stream", "state", "fps", "p50", "ms", "p99", "ms", "frames", "drops", "reconn"]
    assert lines[2].split() == ["front", "live", "29.9", "41", "88", "2153", "0", "0"]
    row = lines[3].split()
    assert row[0].startswith("rtsp://***@10.0.0.7/") and row[0].endswith("…")  # clipped, never a password
    assert row[1:] == ["reconnecting", "0.0", "-", "-", "602", "4", "2"]
    assert lines[4].split()[:2] == ["clip.mp4", "ok"]  # a finished stream shows its status
    assert all(len(line) <= 100 for line in lines)
    assert max(len(line) for line in format_table(STATUS, width=50)) <= 50


def test_format_log_line() -> None:
    line = format_log_line(STATUS)
    assert line == "3 streams (1 live, 1 reconnecting, 1 ok), 29.9 fps, worst p99 88 ms (front), 4 drops, 2 reconnects"
    assert format_log_line({"streams": []}) == "0 streams (none), 0.0 fps, 0 drops, 0 reconnects"


def test_terminal_mode_redraws_in_place_and_logs_go_above() -> None:
    out = io.StringIO()
    root = logging.getLogger("vidpipe")
    handler = logging.StreamHandler(out)
    old = root.handlers[:], root.level, root.propagate
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    try:
        table = LiveTable(lambda: STATUS, tty=True, stream=out, interval=0.05).start()
        deadline = time.monotonic() + 10
        while out.getvalue().count("vidpipe: 3 streams") < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        logging.getLogger("vidpipe.test").info("a message while the table is up")
        table.close()
    finally:
        root.handlers[:], root.level, root.propagate = old
    text = out.getvalue()
    assert text.count("vidpipe: 3 streams") >= 3  # drawn at least twice, and once more at close
    assert "\x1b[5F\x1b[J" in text  # each redraw goes back up over the 5 lines drawn
    before, after = text.split("a message while the table is up")
    assert before.endswith("\x1b[5F\x1b[J")  # the table was erased before the message...
    assert "vidpipe: 3 streams" in after  # ...and drawn again below it
    assert handler.stream is out  # the handler's own stream is back


def test_log_mode_logs_a_line_per_period(caplog) -> None:
    caplog.set_level(logging.INFO, logger="vidpipe.cli")
    table = LiveTable(lambda: STATUS, tty=False, stream=io.StringIO(), interval=0.02, log_every=0.1).start()
    deadline = time.monotonic() + 10
    while len([r for r in caplog.records if "streams (" in r.getMessage()]) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    table.close()
    lines = [r.getMessage() for r in caplog.records if "streams (" in r.getMessage()]
    assert len(lines) >= 2 and lines[0].startswith("3 streams (1 live")
