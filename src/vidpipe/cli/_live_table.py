"""The live per-stream table of ``vidpipe detect <live URLs>`` and ``vidpipe serve`` (stderr).

On a terminal a table redrawn about once a second replaces the progress bar::

    vidpipe: 3 streams, 58.7 fps, up 0:01:12
    stream                 state         fps   p50 ms   p99 ms   frames  drops  reconn
    front                  live         29.9       41       88     2153      0       0
    rtsp://***@10.0.0.7/s  reconnecting  0.0        -        -      602      4       2

Off a terminal (a log file, a service) it logs one line per minute instead (INFO: ``-q`` hides
it). Log messages written while the table is shown appear above it (the table is erased, the
message written, the table drawn again), so the two never garble each other.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import IO, Any

logger = logging.getLogger("vidpipe.cli")

__all__ = ["format_table", "format_log_line", "LiveTable"]

_COLUMNS = (("stream", 24, "<"), ("state", 12, "<"), ("fps", 6, ">"), ("p50 ms", 7, ">"), ("p99 ms", 7, ">"),
            ("frames", 9, ">"), ("drops", 7, ">"), ("reconn", 6, ">"))  # fmt: skip


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _ms(value: Any) -> str:
    return "-" if value is None else f"{value:.0f}"


def _label(s: Mapping[str, Any]) -> str:
    return str(s.get("camera") or s.get("source") or s.get("stream_id"))


def _state(s: Mapping[str, Any]) -> str:
    """The live state while the stream runs (connecting, live, ...), else its status."""
    if s.get("status") in ("pending", "running") and s.get("state"):
        return str(s["state"])
    return str(s.get("status") or "-")


def _uptime(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def format_table(status: Mapping[str, Any], *, width: int = 100) -> list[str]:
    """The table's lines for a ``status()`` dict (no trailing newlines), at most ``width`` wide."""
    streams = list(status.get("streams", ()))
    total = sum(float(s.get("fps") or 0.0) for s in streams)
    lines = [f"vidpipe: {len(streams)} stream{'s' * (len(streams) != 1)}, {total:.1f} fps, "
             f"up {_uptime(float(status.get('uptime_s') or 0.0))}"]  # fmt: skip
    extra = (("tracks", 6, ">"),) if any("tracks" in s for s in streams) else ()  # serve with tracking
    rest = sum(w + 2 for _, w, _ in _COLUMNS[1:] + extra)  # the other columns and their gaps
    name_w = max(10, min(width - rest, max((len(_label(s)) for s in streams), default=6)))
    cols = ((_COLUMNS[0][0], name_w, "<"),) + _COLUMNS[1:] + extra

    def row(cells: list[str]) -> str:
        return "  ".join(f"{_clip(c, w):{a}{w}}" for c, (_, w, a) in zip(cells, cols)).rstrip()[:width]

    lines.append(row([c[0] for c in cols]))
    for s in streams:
        lat = s.get("latency_ms") or {}
        lines.append(row([
            _label(s), _state(s), f"{float(s.get('fps') or 0.0):.1f}", _ms(lat.get("p50")), _ms(lat.get("p99")),
            str(s.get("frames", 0)), str(s.get("drops", 0)), str(s.get("reconnects", 0)),
        ] + ([str(s.get("tracks", "-"))] if extra else [])))  # fmt: skip
    return lines


def format_log_line(status: Mapping[str, Any]) -> str:
    """One line for the log: counts by state, total fps, the worst p99, drops and reconnects."""
    streams = list(status.get("streams", ()))
    by_state: dict[str, int] = {}
    for s in streams:
        by_state[_state(s)] = by_state.get(_state(s), 0) + 1
    states = ", ".join(f"{n} {k}" for k, n in sorted(by_state.items(), key=lambda kv: -kv[1])) or "none"
    total = sum(float(s.get("fps") or 0.0) for s in streams)
    p99s = [((s.get("latency_ms") or {}).get("p99"), _label(s)) for s in streams]
    known = [(p, name) for p, name in p99s if p is not None]
    worst = max(known) if known else None
    worst_text = f", worst p99 {worst[0]:.0f} ms ({worst[1]})" if worst else ""
    drops = sum(int(s.get("drops") or 0) for s in streams)
    reconnects = sum(int(s.get("reconnects") or 0) for s in streams)
    return (f"{len(streams)} streams ({states}), {total:.1f} fps{worst_text}, "
            f"{drops} drops, {reconnects} reconnects")  # fmt: skip


class _Guarded:
    """A stream whose writes erase the table first (log messages go above it)."""

    def __init__(self, table: "LiveTable", real: IO[str]) -> None:
        self._table = table
        self._real = real

    def write(self, text: str) -> int:
        with self._table._lock:  # noqa: SLF001 - the table's own helper
            self._table._erase()  # noqa: SLF001
            return self._real.write(text)

    def flush(self) -> None:
        self._real.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class LiveTable:
    """Shows ``status()`` as a table on a terminal (``tty=True``), or logs a line per
    ``log_every`` seconds otherwise; a background thread, stopped by :meth:`close`."""

    def __init__(
        self,
        status: Callable[[], Mapping[str, Any]],
        *,
        tty: bool,
        stream: IO[str] | None = None,
        interval: float = 1.0,
        log_every: float = 60.0,
    ) -> None:
        self._status = status
        self._tty = tty
        self._stream = stream or sys.stderr
        self._interval = interval
        self._log_every = log_every
        self._lock = threading.RLock()
        self._drawn = 0  # lines of the table on screen
        self._stop = threading.Event()
        self._handlers: list[tuple[logging.StreamHandler, Any]] = []
        self._thread = threading.Thread(target=self._loop, name="vidpipe-live-table", daemon=True)

    def start(self) -> "LiveTable":
        if self._tty:
            for h in logging.getLogger("vidpipe").handlers:  # messages go above the table
                if isinstance(h, logging.StreamHandler) and h.stream is self._stream:
                    self._handlers.append((h, h.stream))
                    h.setStream(_Guarded(self, self._stream))  # type: ignore[arg-type]
        self._thread.start()
        return self

    def _erase(self) -> None:
        if self._drawn:
            self._stream.write(f"\x1b[{self._drawn}F\x1b[J")  # up to the table's first line, clear below
            self._drawn = 0

    def draw(self) -> None:
        """Redraw the table now (terminal mode)."""
        try:
            status = self._status()
        except Exception as exc:  # noqa: BLE001 - the table must never end the run
            logger.debug("live table: status failed: %s", exc)
            return
        import shutil

        width = shutil.get_terminal_size((100, 24)).columns
        lines = format_table(status, width=max(40, width - 1))
        with self._lock:
            self._erase()
            self._stream.write("\n".join(lines) + "\n")
            self._stream.flush()
            self._drawn = len(lines)

    def log(self) -> None:
        try:
            logger.info("%s", format_log_line(self._status()))
        except Exception as exc:  # noqa: BLE001
            logger.debug("live table: status failed: %s", exc)

    def _loop(self) -> None:
        next_log = time.monotonic() + self._log_every
        while not self._stop.wait(self._interval if self._tty else min(self._interval, 1.0)):
            if self._tty:
                self.draw()
            elif time.monotonic() >= next_log:
                next_log += self._log_every
                self.log()

    def close(self) -> None:
        """Stop refreshing; on a terminal the last table stays on screen (drawn once more)."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        if self._tty:
            self.draw()
            with self._lock:
                self._drawn = 0  # leave it on screen
            for h, real in self._handlers:
                h.setStream(real)
            self._handlers.clear()

    def __enter__(self) -> "LiveTable":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
