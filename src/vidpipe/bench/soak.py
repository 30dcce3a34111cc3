"""``vidpipe bench soak``: memory and speed over a long run, the way a service runs for days.

Two modes, chosen by the inputs:

- **files** (the default: the bundled street clip): the same :func:`vidpipe.detect` call, with one
  detector built once, runs again and again for ``minutes``; the process is sampled after the
  run that ends each ``interval``.
- **live streams**: any ``rtsp://``, ``rtmp://``, ... input, or ``streams=N``: N copies of a
  camera-like clip published (paced, looped) to a real nginx-rtmp server on loopback
  (:func:`~vidpipe.bench.publishers.local_streams`). One run for ``minutes``, sampled every
  ``interval`` seconds; drops and reconnects are counted.

Each sample: host RSS and its anonymous part (:mod:`~vidpipe.bench.procstats`), GPU memory as
PyTorch (allocated, reserved), NVML (this process and its decoder processes) and the device
(used) see it (:mod:`~vidpipe.bench.gpumem`), Python and OS threads, open descriptors, child
processes, and the frames per second since the previous sample. With ``out_dir`` every sample
is appended to ``bench_soak.jsonl`` at once (flushed and synced), so a run that is killed keeps
its samples; :meth:`SoakResult.from_samples` makes the report from that file.

The verdict is the issue's target, literally: host RSS and GPU memory within 2% of their value
after the first minute (``settle``), at **every** later sample, not only the last. "GPU memory" is
the process's memory as NVML sees it (contexts, the caching allocator's pools and NVDEC's own
surfaces: what runs out); where NVML cannot see this process, the device's used memory. PyTorch's
allocated and reserved numbers are reported next to it, not judged: the first misses the pools
and NVDEC, the second NVDEC. Threads, descriptors and children must not change after settle.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from vidpipe.bench.report import VideoBenchResult

__all__ = ["run_soak_bench", "SoakResult", "drift", "judge", "load_samples"]

logger = logging.getLogger(__name__)

#: the issue's bound on memory change after the first minute
DRIFT_LIMIT = 0.02
MEMORY_KEYS = ("rss_mib", "anon_mib", "gpu_process_mib", "gpu_device_used_mib", "cuda_allocated_mib",
               "cuda_reserved_mib")
LABELS = {"rss_mib": "host RSS", "anon_mib": "host anonymous memory", "gpu_process_mib": "GPU memory of the "
          "process and its children (NVML)", "gpu_device_used_mib": "GPU memory used on the device",
          "cuda_allocated_mib": "CUDA allocated by PyTorch", "cuda_reserved_mib": "CUDA reserved by PyTorch"}
COLUMNS = ["minutes", "runs", "frames", "fps", "rss_mib", "anon_mib", "gpu_process_mib", "gpu_device_used_mib",
           "cuda_allocated_mib", "cuda_reserved_mib", "cuda_segments", "cuda_inactive_split_mib", "threads", "tasks",
           "fds", "children", "drops", "reconnects"]
SAMPLES_FILE = "bench_soak.jsonl"


class SoakResult(VideoBenchResult):
    """The soak report: one row per sample; ``<name>.png`` is memory over time, ``<name>_fps.png``
    frames per second over time."""

    def write(self, out_dir: str | Path, name: str | None = None) -> dict[str, Path]:
        from vidpipe.bench.report import line_chart_png, write_json, write_markdown

        name = name or self.name
        out = Path(out_dir)
        notes = [f"input: {i['name']}" for i in self.inputs]
        notes += [f"{k}: {v}" for k, v in {**self.machine, **self.targets}.items()]
        md = write_markdown(out / f"{name}.md", self.rows, title=self.title, columns=self.columns,
                            headers=self.headers, formats=self.formats, notes=notes)
        js = write_json(out / f"{name}.json", {"title": self.title, "meta": {"inputs": self.inputs,
                        "machine": self.machine, "targets": self.targets}, "rows": self.rows})
        series = [k for k in MEMORY_KEYS if any(isinstance(r.get(k), (int, float)) for r in self.rows)]
        mem = line_chart_png(out / f"{name}.png", self.rows, x="minutes", series=series,
                             title="Memory over time", x_label="minutes", y_label="MiB")
        fps = line_chart_png(out / f"{name}_fps.png", self.rows, x="minutes", series=["fps"],
                             title="Frames per second over time", x_label="minutes", y_label="frames/s")
        return {"markdown": md, "json": js, "png": mem, "fps_png": fps}

    @classmethod
    def from_samples(cls, path: str | os.PathLike, *, settle: float | None = None) -> "SoakResult":
        """The report of the samples in a ``bench_soak.jsonl`` (a finished run's, or what a run
        that was killed had written); ``settle``: minutes (default: the run's)."""
        meta, rows = load_samples(path)
        settle = meta.get("settle", 1.0) if settle is None else settle
        machine = dict(meta.get("machine", {}))
        if rows and rows[-1]["minutes"] < machine.get("minutes", 0):
            machine["ended"] = f"after {rows[-1]['minutes']:.2f} of {machine['minutes']:g} minutes (interrupted)"
        return _result(rows, meta.get("inputs", []), machine, judge(rows, settle_min=settle,
                       cuda=bool(meta.get("cuda"))))


def load_samples(path: str | os.PathLike) -> tuple[dict, list[dict]]:
    """``(meta, rows)`` of a ``bench_soak.jsonl``; a last line cut short (the run was killed
    while writing it) is skipped."""
    meta: dict = {}
    rows: list[dict] = []
    with open(path) as f:
        for line in f:
            try:
                item = json.loads(line)
            except ValueError:
                continue
            if "meta" in item:
                meta = item["meta"]
            elif "row" in item:
                rows.append(item["row"])
    return meta, rows


def drift(rows: Sequence[dict], key: str, *, settle_min: float) -> float | None:
    """Relative change of ``key`` from the first sample at or after ``settle_min`` minutes to the
    last sample (``None`` with fewer than two such samples or a zero base)."""
    later = _after(rows, key, settle_min)
    if len(later) < 2 or not later[0]:
        return None
    return (later[-1] - later[0]) / later[0]


def _after(rows: Sequence[dict], key: str, settle_min: float) -> list[float]:
    return [r[key] for r in rows if r["minutes"] >= settle_min and isinstance(r.get(key), (int, float))]


def judge(rows: Sequence[dict], *, settle_min: float, cuda: bool) -> dict[str, Any]:
    """The report's targets: each memory number's base (the first sample after ``settle_min``
    minutes), its change at the end and its range over every later sample; the verdict on host
    RSS and GPU memory (see the module's text); whether the counts changed."""
    targets: dict[str, Any] = {}
    ranges: dict[str, float] = {}
    for key in MEMORY_KEYS:
        vals = _after(rows, key, settle_min)
        if len(vals) < 2 or not vals[0]:
            continue
        base = vals[0]
        lo, hi = (min(vals) - base) / base, (max(vals) - base) / base
        ranges[key] = max(-lo, hi)
        targets[LABELS[key]] = (f"{base:,.1f} MiB after {settle_min:g} min; at the end {100 * (vals[-1] - base) / base:+.2f}%,"
                                f" in between {100 * lo:+.2f}% .. {100 * hi:+.2f}%")
    judged = ["rss_mib"]
    if cuda:
        gpu = "gpu_process_mib" if "gpu_process_mib" in ranges else "gpu_device_used_mib"
        judged.append(gpu)
        targets["GPU memory judged"] = (LABELS[gpu] + ("" if gpu == "gpu_process_mib" else
                                        " (NVML could not see this process; other processes on the GPU count too)"))
    later = [r for r in rows if r["minutes"] >= settle_min]
    key = f"host RSS and GPU memory within 2% of their value after {settle_min:g} min (every sample)"
    if any(k not in ranges for k in judged):
        targets[key] = "not enough samples after the warm-up"
    else:
        over = [f"{LABELS[k]} {100 * ranges[k]:.2f}%" for k in judged if ranges[k] > DRIFT_LIMIT]
        targets[key] = "yes" if not over else "no: " + ", ".join(over)
    if len(later) >= 2:
        changed = [k for k in ("threads", "tasks", "fds", "children") if later[-1].get(k) != later[0].get(k)]
        targets["counts unchanged after settle"] = "yes" if not changed else "no: " + ", ".join(changed)
    return targets


class _SampleLog:
    """``bench_soak.jsonl``: one JSON object a line (``{"meta": ...}``, then ``{"row": ...}`` per
    sample), flushed and synced as written."""

    def __init__(self, out_dir: str | os.PathLike | None) -> None:
        self.path = None if out_dir is None else Path(out_dir) / SAMPLES_FILE
        self._f = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._f = open(self.path, "w")

    def write(self, item: dict) -> None:
        if self._f is not None:
            self._f.write(json.dumps(item) + "\n")
            self._f.flush()
            os.fsync(self._f.fileno())

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


def _sample(t0: float, frames: int, last: tuple[float, int], runs: int, cuda: bool, device: Any,
            run: Any = None, segments: "dict[int, tuple[float, int]] | None" = None) -> dict:
    """One sample's row. ``segments``: the caching allocator's segments at the previous sample
    (updated in place): the row gets ``cuda_new_segments``, ``[MiB, stream]`` of each segment
    since then, and the allocator's counts (``cuda_segments``, ``cuda_inactive_split_mib``,
    ``cuda_alloc_retries``)."""
    from vidpipe.bench.procstats import snapshot

    now = time.monotonic()
    snap = snapshot(False)
    dt = now - last[0]
    row: dict[str, Any] = {
        "minutes": round((now - t0) / 60, 3), "runs": runs, "frames": frames,
        "fps": (frames - last[1]) / dt if dt > 0 else None,
        "rss_mib": round(snap.rss_mib, 1), "anon_mib": round(snap.anon_mib, 1),
        "threads": snap.threads, "tasks": snap.tasks, "fds": snap.fds, "children": len(snap.children),
    }  # fmt: skip
    if cuda:
        from vidpipe.bench.gpumem import gpu_memory

        gm = gpu_memory(device, [os.getpid(), *snap.children])
        for key, value in (("gpu_process_mib", gm.process_mib), ("gpu_device_used_mib", gm.device_used_mib),
                           ("cuda_allocated_mib", gm.allocated_mib), ("cuda_reserved_mib", gm.reserved_mib)):
            row[key] = None if value is None else round(value, 1)
        row["gpu_process_source"] = gm.process_source
        if segments is not None:
            from vidpipe.bench.gpumem import allocator_state

            counts, now_segments = allocator_state(device)
            row.update({f"cuda_{k}": v for k, v in counts.items()})
            if segments:  # a reserve that grew: which segments are new (size, stream)
                row["cuda_new_segments"] = sorted(v for k, v in now_segments.items() if k not in segments)
            segments.clear()
            segments.update(now_segments)
    if run is not None:
        try:
            streams = run.status()["streams"]
            row["drops"] = sum(s.get("drops", 0) for s in streams)
            row["reconnects"] = sum(s.get("reconnects", 0) for s in streams)
        except Exception:  # noqa: BLE001 - a count, not worth failing the soak for
            logger.debug("no stream status", exc_info=True)
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
    streams: int = 0,
    stream_size: tuple[int, int] = (1920, 1080),
    stream_fps: int = 30,
    nginx_root: str | os.PathLike | None = None,
    work_dir: str | os.PathLike | None = None,
    out_dir: str | os.PathLike | None = None,
    options: Mapping[str, Any] | None = None,
    stop: threading.Event | None = None,
    on_sample: Callable[[dict], None] | None = None,
) -> SoakResult:
    """Run ``inputs`` (default: the bundled street clip) for ``minutes`` and sample the process.

    ``settle``: minutes of warm-up before the baseline sample. ``streams``: soak that many live
    streams of ``inputs[0]`` (default: the street clip), re-encoded to ``stream_size`` at
    ``stream_fps`` like a camera, through a local nginx-rtmp server. ``out_dir``: append each
    sample to ``out_dir/bench_soak.jsonl`` as it is taken. ``options``: more keyword arguments of
    :func:`vidpipe.detect` (``decoder_processes``, ``max_gpu_memory``, ...). ``stop``: set it to end
    early (the report covers what ran). ``on_sample``: called with each sample's row.
    """
    import contextlib

    from vidpipe.bench.realclip import bundled_street_clip

    _check_options(options or {})

    sources = [os.fspath(s) for s in inputs] if inputs else [str(bundled_street_clip())]
    with contextlib.ExitStack() as stack:
        described = sources
        if streams:
            from vidpipe.bench.publishers import local_streams
            from vidpipe.bench.realclip import build_real_clip
            from vidpipe.bench.workdir import media_folder

            folder = stack.enter_context(media_folder(work_dir))
            w, h = stream_size
            clip = build_real_clip(folder, source=sources[0], width=w, height=h, fps=stream_fps,
                                   frames=10 * stream_fps, gop=stream_fps)
            described = [f"{streams} live RTMP streams of {Path(sources[0]).name} ({w}x{h} {stream_fps} fps, "
                         "paced, looped) from a local nginx-rtmp server"]
            sources = stack.enter_context(local_streams(clip, streams, nginx_root=nginx_root))
        return _soak(sources, described, minutes=minutes, interval=interval, settle=settle, device=device,
                     model=model, batch_size=batch_size, out_dir=out_dir, options=dict(options or {}),
                     stop=stop or threading.Event(), on_sample=on_sample)


def _check_options(options: Mapping[str, Any]) -> None:
    """``options`` are arguments of :func:`vidpipe.detect` (its own or the pipeline's)."""
    import dataclasses
    import inspect

    import vidpipe
    from vidpipe.errors import ConfigError
    from vidpipe.pipeline_config import PipelineConfig

    known = set(inspect.signature(vidpipe.detect).parameters) | {f.name for f in dataclasses.fields(PipelineConfig)}
    known -= {"source", "model", "batch_size", "device", "pipeline_options"}  # set by the soak
    bad = sorted(set(options) - known)
    if bad:
        raise ConfigError(f"options: {', '.join(bad)} not an argument of vidpipe.detect the soak can pass "
                          f"(known: {', '.join(sorted(known))})")


def _soak(sources: list[str], described: list[str], *, minutes: float, interval: float, settle: float,
          device: str, model: str, batch_size: int, out_dir: Any, options: dict, stop: threading.Event,
          on_sample: Callable[[dict], None] | None) -> SoakResult:
    import platform

    import vidpipe
    from vidpipe.api import build_detector
    from vidpipe.sources.redact import redact_url
    from vidpipe.sources.spec import is_live_url

    live = any(is_live_url(s) for s in sources)
    detector = build_detector(model, device=device)
    cuda = detector.device.type == "cuda"
    machine: dict[str, Any] = {
        "device": str(detector.device), "cpu_cores": os.cpu_count(), "python": platform.python_version(),
        "mode": "one live run" if live else "repeated file runs", "minutes": minutes,
        "options": ", ".join(f"{k}={v}" for k, v in options.items()) or "none",
    }  # fmt: skip
    if cuda:
        import torch

        machine["gpu"] = torch.cuda.get_device_name(detector.device)
    inputs = [{"name": redact_url(s), "path": redact_url(s), "describe": ""} for s in described]
    log = _SampleLog(out_dir)
    log.write({"meta": {"inputs": inputs, "machine": machine, "settle": settle, "interval": interval, "cuda": cuda}})
    rows: list[dict] = []
    t0 = time.monotonic()
    end = t0 + minutes * 60
    frames = runs = 0
    last = (t0, 0)
    next_sample = t0 + interval
    segments: dict[int, tuple[float, int]] = {}

    def sample(run: Any = None) -> None:
        nonlocal last, next_sample
        row = _sample(t0, frames, last, runs, cuda, detector.device, run, segments)
        rows.append(row)
        log.write({"row": row})
        if on_sample is not None:
            on_sample(row)
        last, next_sample = (time.monotonic(), frames), time.monotonic() + interval

    try:
        if live:
            run = vidpipe.detect(sources, model=detector, batch_size=batch_size, **options)
            runs = 1
            try:
                for _ in run:
                    frames += 1
                    now = time.monotonic()
                    if now >= next_sample or now >= end or stop.is_set():
                        sample(run)
                    if now >= end or stop.is_set():
                        break
            finally:
                run.close()
        else:
            while time.monotonic() < end and not stop.is_set():
                run = vidpipe.detect(sources, model=detector, batch_size=batch_size, **options)
                with run:
                    for _ in run:
                        frames += 1
                        if stop.is_set():
                            break  # leaving the block closes the run
                _check_run(run)
                runs += 1
                now = time.monotonic()
                if now >= next_sample or now >= end or stop.is_set():
                    sample()
    finally:
        log.close()
    if stop.is_set() and rows and rows[-1]["minutes"] < minutes:
        machine["ended"] = f"after {rows[-1]['minutes']:.2f} of {minutes:g} minutes (stopped)"
    return _result(rows, inputs, machine, judge(rows, settle_min=settle, cuda=cuda))


def _check_run(run: Any) -> None:
    """A soak repeats runs that work: an input that failed (missing, unreadable) ends it.

    Raises:
        SourceError: an input of the run failed (its error, credentials masked, in the message).
    """
    from vidpipe.errors import SourceError

    failed = [s for s in run.summary().sources if s.status == "failed"]
    if failed:
        raise SourceError("soak: " + "; ".join(f"{s.source}: {s.error or 'failed'}" for s in failed))


def _result(rows: list[dict], inputs: list[dict], machine: dict, targets: dict) -> SoakResult:
    present = [c for c in COLUMNS if any(r.get(c) is not None for r in rows)] or COLUMNS[:4]
    return SoakResult(
        rows=rows, inputs=inputs, machine=machine, targets=targets, title="Soak: memory and fps over time",
        columns=present,
        headers={"gpu_process_mib": "GPU process MiB", "gpu_device_used_mib": "GPU device used MiB",
                 "cuda_allocated_mib": "CUDA allocated MiB", "cuda_reserved_mib": "CUDA reserved MiB",
                 "rss_mib": "RSS MiB", "anon_mib": "anon MiB", "cuda_segments": "CUDA segments",
                 "cuda_inactive_split_mib": "CUDA split free MiB"},
        formats={"minutes": ".2f", "fps": ".0f", "cuda_segments": ".0f", **{k: ".1f" for k in MEMORY_KEYS}},
        name="bench_soak",
    )
