"""``vidpipe bench soak``: memory and speed over a long run, the way a service runs for days.

Two modes, chosen by the inputs:

- **files** (the default: the bundled street clip): the same :func:`vidpipe.detect` call, with one
  detector built once, runs again and again for ``minutes``; after each run the process is
  sampled.
- **live streams** (any ``rtsp://``, ``rtmp://``, ... input): one run for ``minutes``, sampled
  every ``interval`` seconds.

Each sample (:class:`~vidpipe.bench.procstats.ProcessSnapshot`): host RSS and its anonymous
part, CUDA memory allocated and reserved, Python and OS threads, open descriptors, child
processes, and the frames per second since the previous sample. The report compares the last
sample with the first one after ``settle`` seconds (the warm-up: model, pools, caches): the
issue's target is host RSS and GPU memory within 2% of their value after the first minute, and
threads, descriptors and children unchanged.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vidpipe.bench.report import VideoBenchResult

__all__ = ["run_soak_bench", "SoakResult", "drift"]

logger = logging.getLogger(__name__)

#: the issue's bound on memory growth after the first minute
DRIFT_LIMIT = 0.02


class SoakResult(VideoBenchResult):
    """The soak report: one row per sample; ``<name>.png`` is memory over time, ``<name>_fps.png``
    frames per second over time."""

    def write(self, out_dir: str | Path, name: str | None = None) -> dict[str, Path]:
        from vidpipe.bench.report import line_chart_png, write_json, write_markdown

        name = name or self.name
        out = Path(out_dir)
        notes = [f"{k}: {v}" for k, v in {**self.machine, **self.targets}.items()]
        md = write_markdown(out / f"{name}.md", self.rows, title=self.title, columns=self.columns,
                            headers=self.headers, formats=self.formats, notes=notes)
        js = write_json(out / f"{name}.json", {"title": self.title, "meta": {"inputs": self.inputs,
                        "machine": self.machine, "targets": self.targets}, "rows": self.rows})
        mem = line_chart_png(out / f"{name}.png", self.rows, x="minutes",
                             series=["rss_mib", "anon_mib", "cuda_allocated_mib", "cuda_reserved_mib"],
                             title="Memory over time", x_label="minutes", y_label="MiB")
        fps = line_chart_png(out / f"{name}_fps.png", self.rows, x="minutes", series=["fps"],
                             title="Frames per second over time", x_label="minutes", y_label="frames/s")
        return {"markdown": md, "json": js, "png": mem, "fps_png": fps}


def drift(rows: Sequence[dict], key: str, *, settle_min: float) -> float | None:
    """Relative change of ``key`` from the first sample at or after ``settle_min`` minutes to the
    last sample (``None`` with fewer than two such samples or a zero base)."""
    later = [r for r in rows if r["minutes"] >= settle_min and isinstance(r.get(key), (int, float))]
    if len(later) < 2 or not later[0][key]:
        return None
    return (later[-1][key] - later[0][key]) / later[0][key]


def _sample(t0: float, frames: int, last: tuple[float, int], runs: int, cuda: bool, device: Any) -> dict:
    from vidpipe.bench.procstats import snapshot

    now = time.monotonic()
    snap = snapshot(cuda, device=device)
    dt = now - last[0]
    row = {
        "minutes": round((now - t0) / 60, 3),
        "runs": runs,
        "frames": frames,
        "fps": (frames - last[1]) / dt if dt > 0 else None,
        "rss_mib": round(snap.rss_mib, 1),
        "anon_mib": round(snap.anon_mib, 1),
        "cuda_allocated_mib": round(snap.cuda_allocated_mib, 1) if cuda else None,
        "cuda_reserved_mib": round(snap.cuda_reserved_mib, 1) if cuda else None,
        "threads": snap.threads,
        "tasks": snap.tasks,
        "fds": snap.fds,
        "children": len(snap.children),
    }
    return row


def run_soak_bench(
    inputs: Sequence[str] | None = None,
    *,
    minutes: float = 5.0,
    interval: float = 10.0,
    settle: float = 1.0,
    device: str = "auto",
    model: str = "yolov3-tiny",
    batch_size: int = 32,
) -> SoakResult:
    """Run ``inputs`` (default: the bundled street clip) for ``minutes`` and sample the process.

    ``settle``: minutes of warm-up before the baseline sample the drift is measured from.
    """
    import vidpipe
    from vidpipe.api import build_detector
    from vidpipe.bench.realclip import bundled_street_clip
    from vidpipe.sources.spec import is_live_url

    sources = [os.fspath(s) for s in inputs] if inputs else [str(bundled_street_clip())]
    live = any(is_live_url(s) for s in sources)
    detector = build_detector(model, device=device)
    cuda = detector.device.type == "cuda"
    rows: list[dict] = []
    t0 = time.monotonic()
    end = t0 + minutes * 60
    frames = runs = 0
    last = (t0, 0)
    next_sample = t0 + interval
    if live:
        run = vidpipe.detect(sources, model=detector, batch_size=batch_size)
        try:
            for _ in run:
                frames += 1
                now = time.monotonic()
                if now >= next_sample:
                    rows.append(_sample(t0, frames, last, 1, cuda, detector.device))
                    last, next_sample = (time.monotonic(), frames), now + interval
                if now >= end:
                    break
        finally:
            run.close()
    else:
        while time.monotonic() < end:
            run = vidpipe.detect(sources, model=detector, batch_size=batch_size)
            with run:
                frames += sum(1 for _ in run)
            runs += 1
            if time.monotonic() >= next_sample or time.monotonic() >= end:
                rows.append(_sample(t0, frames, last, runs, cuda, detector.device))
                last, next_sample = (time.monotonic(), frames), time.monotonic() + interval
    targets: dict[str, Any] = {}
    for key in ("rss_mib", "anon_mib", "cuda_allocated_mib", "cuda_reserved_mib"):
        d = drift(rows, key, settle_min=settle)
        targets[f"{key} drift after {settle:g} min"] = None if d is None else f"{100 * d:+.2f}%"
    base = [r for r in rows if r["minutes"] >= settle]
    if len(base) >= 2:
        changed = [k for k in ("threads", "tasks", "fds", "children") if base[-1][k] != base[0][k]]
        targets["counts unchanged after settle"] = "yes" if not changed else "no: " + ", ".join(changed)
    within = [abs(drift(rows, k, settle_min=settle) or 0) <= DRIFT_LIMIT
              for k in ("rss_mib", "cuda_reserved_mib" if cuda else "anon_mib")]
    targets["memory within 2%"] = "yes" if all(within) and len(base) >= 2 else "no"
    import platform

    machine = {"device": str(detector.device), "cpu_cores": os.cpu_count(), "python": platform.python_version(),
               "mode": "one live run" if live else "repeated file runs", "minutes": minutes}
    if cuda:
        import torch

        machine["gpu"] = torch.cuda.get_device_name(detector.device)
    from vidpipe.sources.redact import redact_url

    return SoakResult(
        rows=rows, inputs=[{"name": redact_url(s), "path": redact_url(s), "describe": ""} for s in sources],
        machine=machine, targets=targets, title="Soak: memory and fps over time",
        columns=["minutes", "runs", "frames", "fps", "rss_mib", "anon_mib", "cuda_allocated_mib", "cuda_reserved_mib",
                 "threads", "tasks", "fds", "children"],
        formats={"minutes": ".2f", "fps": ".0f", "rss_mib": ".1f", "anon_mib": ".1f", "cuda_allocated_mib": ".1f",
                 "cuda_reserved_mib": ".1f"},
        name="bench_soak",
    )
