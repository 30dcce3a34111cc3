"""Measure GStreamer's RTSP server here: start-to-ready time, and how many low-res clients it holds.

    python tests/live/measure_rtsp.py --starts 5 --clients 6 12 24 --seconds 8

Clients are ``ffmpeg -c copy -f null`` processes (no decoding, so the clients' CPU does not hide
the server's), one per mount (``--per-mount`` clients on each of ``N/per_mount`` mounts, default 1:
N cameras), over TCP. For each N: frames/s each client received after a warm-up (min/median), the server's CPU
(cores, from /proc), and the load average. Not a test: numbers for the report.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from live.servers import RtspServer  # noqa: E402


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _follow(proc: subprocess.Popen, samples: list) -> None:
    """Append (time, frames so far) for each ``frame=`` line of ffmpeg's ``-progress`` output."""
    for line in proc.stdout:
        if line.startswith("frame="):
            samples.append((time.monotonic(), int(line[6:])))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--starts", type=int, default=5)
    p.add_argument("--clients", type=int, nargs="+", default=[6, 12, 24])
    p.add_argument("--per-mount", type=int, default=1)
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--warmup", type=float, default=6.0)
    p.add_argument("--fps", type=int, default=15)
    p.add_argument("--shared", type=int, default=1)
    args = p.parse_args()

    ready = []
    for _ in range(args.starts):
        with RtspServer(streams=2) as srv:
            ready.append(srv.ready_s)
    print(f"ready after start: min {min(ready):.3f} s, median {statistics.median(ready):.3f} s, "
          f"max {max(ready):.3f} s over {len(ready)} starts")

    for n in args.clients:
        mounts = max(1, n // args.per_mount)
        with RtspServer(streams=mounts, fps=args.fps, shared=bool(args.shared)) as srv:
            procs, samples = [], []
            for i in range(n):
                cmd = ["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-stats_period", "0.5",
                       "-rtsp_transport", "tcp", "-i", srv.url(f"cam{i % mounts}"),
                       "-c", "copy", "-progress", "pipe:1", "-f", "null", "-"]
                procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
                samples.append([])
            readers = [threading.Thread(target=_follow, args=(pr, s), daemon=True) for pr, s in zip(procs, samples)]
            for r in readers:
                r.start()
            time.sleep(args.warmup)  # the clients' probing and a burst of buffered frames
            c0, t0 = cpu_seconds(srv.pid), time.monotonic()
            start = [s[-1][1] if s else 0 for s in samples]
            time.sleep(args.seconds)
            t1 = time.monotonic()
            end = [s[-1][1] if s else 0 for s in samples]
            cpu = (cpu_seconds(srv.pid) - c0) / (t1 - t0)
            for pr in procs:
                pr.terminate()
            for pr in procs:
                pr.wait(timeout=10)
            rates = sorted((e - b) / (t1 - t0) for b, e in zip(start, end))
            print(f"{n:3d} clients on {mounts:3d} mounts ({'shared' if args.shared else 'per-client'}, "
                  f"{args.fps} fps 320x240): fps/client min {rates[0]:.1f} median {statistics.median(rates):.1f}; "
                  f"server CPU {cpu:.2f} cores; load {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
