"""``vidpipe bench streams``: how many paced live camera streams one machine detects in real time.

A real RTMP server (nginx with its RTMP module, :mod:`vidpipe.bench.rtmp_server`) on loopback;
publisher processes (:mod:`vidpipe.bench.publish`) push N copies of a real 1080p30 H.264 street
clip (:func:`vidpipe.bench.realclip.build_real_clip`), paced at 30 fps like cameras; vidpipe
reads the N ``rtmp://`` URLs through the same API call a user makes (:func:`vidpipe.detect`) and
for each N reports, over a measured window that opens after a warm-up and once every stream has
delivered results for :data:`SETTLE_S` (a stream's start-up, when nginx hands it the frames it
buffered and the decoder catches up, is not steady state: its ``late`` and ``startup`` drops come
before the window):

- per-stream results per second (min and median) and whether every stream kept the source's rate
  with no drop (*real time*),
- capture-to-result latency p50 / p99 / max over all results (capture = receipt of the frame's
  data in vidpipe, see :class:`~vidpipe.types.FrameMeta`),
- decoded frames dropped (latest wins) in the window, by cause, and before it (start-up: the
  frames a server buffered, older than real time), reconnects,
- packets the publishers sent more than 33 / 100 ms after their time in the window (a late
  publisher delivers frames in bursts: drops then say little about vidpipe),
- with ``annotate`` (``--annotate``): every stream's frames drawn and encoded to a file of its own
  (:class:`~vidpipe.stages.annotate.AnnotateStage`, libx264 in a child process per stream, as
  ``vidpipe detect --annotate DIR/`` does), with the encoders' ms per frame and how often the run
  waited for them; the results then count only once drawn and handed to their encoder, and a
  stream is real time only if its encoder kept up (no drops),
- CPU cores used by vidpipe (its process, its decoder processes and its encoder processes;
  publishers and server excluded), CPU cores busy on the whole machine (publishers and server
  included), GPU and NVDEC utilisation (NVML, sampled twice a second), and the decoder processes
  of the live streams.

The most streams held in real time is the largest N whose row is real time.
"""

from __future__ import annotations

import logging
import math
import os
import statistics
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vidpipe.bench.report import VideoBenchResult

__all__ = ["run_streams_bench", "StreamsBenchResult"]

logger = logging.getLogger(__name__)

_REALTIME_SHARE = 0.95  # a stream is real time when it delivers >= 95% of its frame rate
#: seconds every stream has delivered results before the measured window opens (its start-up's
#: catch-up burst is over: seen on an H100 at 64 streams, the last stream to connect was still
#: delivering its buffered frames, 16 in 55 ms, when a window opened at its first result)
SETTLE_S = 2.0


class StreamsBenchResult(VideoBenchResult):
    """The streams report: the usual table, JSON and bar chart (results/s per stream count), plus
    ``<name>_latency.png``: p50 and p99 capture-to-result latency against the stream count."""

    def write(self, out_dir: str | Path, name: str | None = None) -> dict[str, Path]:
        from vidpipe.bench.report import line_chart_png

        paths = super().write(out_dir, name)
        name = name or self.name
        paths["latency_png"] = line_chart_png(
            Path(out_dir) / f"{name}_latency.png", self.rows, x="streams", series=["p50_ms", "p99_ms", "max_ms"],
            title="Capture-to-result latency vs live streams", x_label="streams", y_label="ms",
        )
        return paths


class _UtilSampler:
    """NVML GPU/NVDEC utilisation sampled on a thread; means over the sampling period."""

    def __init__(self, device: Any, period: float = 0.5) -> None:
        self.device, self.period = device, period
        self.samples: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-nvml", daemon=True)

    def _run(self) -> None:
        from vidpipe.stats import nvml_utilisation

        while not self._stop.wait(self.period):
            self.samples.append(nvml_utilisation(self.device))

    def __enter__(self) -> "_UtilSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def mean(self, key: str) -> float | None:
        vals = [s[key] for s in self.samples if s.get(key) is not None]
        return sum(vals) / len(vals) if vals else None


def _percentile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    k = min(len(s) - 1, max(0, math.ceil(q / 100 * len(s)) - 1))
    return s[k]


def _machine_busy_s() -> float:
    """CPU seconds the whole machine has been busy (all processes: publishers and server
    included; Linux ``/proc/stat``, else 0)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)


def _measure(urls: Sequence[str], *, detector: Any, fps: float, seconds: float, warmup: float,
             batch_size: int, batch_timeout: float | None, decoder: str = "auto",
             live_processes: int | None = None, decode_latency: str = "auto",
             queue_frames: int | None = None, publishers: Any = None,
             annotate: Mapping[str, str] | None = None, out_dir: str | os.PathLike | None = None,
             in_flight: int | None = None) -> dict:
    """One step: detect on ``urls`` until ``warmup`` passed and every stream has delivered for
    :data:`SETTLE_S`, then count ``seconds`` of results. ``publishers``
    (:class:`~vidpipe.bench.publishers.PublisherProcesses`): their packets sent late in the window
    are counted too. ``annotate``: encoder options of an annotate stage writing one video per
    stream under ``out_dir``."""
    import vidpipe
    from vidpipe.sources.options import LiveOptions

    n = len(urls)
    queue = {} if queue_frames is None else {"queue_frames": queue_frames}
    live = LiveOptions(batch_timeout=batch_timeout, processes=live_processes, decode_latency=decode_latency,  # type: ignore[arg-type]
                       **queue)  # fmt: skip
    stages = _annotate_stages(annotate, out_dir, n) if annotate is not None else ()
    more = {} if in_flight is None else {"batches_in_flight": in_flight}
    run = vidpipe.detect(list(urls), model=detector, batch_size=batch_size, live=live, decoder=decoder, stages=stages,
                         **more)  # fmt: skip
    # the loop below waits for results: a run that delivers none is closed from here instead
    watchdog = threading.Timer(warmup + 60 + seconds + 30, run.close)
    watchdog.daemon = True
    watchdog.start()
    counts = [0] * n
    seen = [False] * n
    unseen, all_seen_at = n, 0.0  # streams without a result yet; when the last one's first came
    latencies: list[float] = []
    t_start = time.monotonic()
    window_start = window_end = measured_end = None
    before = after = None
    sent0: dict[str, int] = {}
    sent1: dict[str, int] = {}
    cpu0 = cpu_s = machine_s = busy0 = 0.0
    procs = 0
    sampler = _UtilSampler(detector.device)
    try:
        for r in run:
            now = time.monotonic()
            sid = r.meta.stream_id
            if window_start is None:
                if not seen[sid]:
                    seen[sid], unseen = True, unseen - 1
                    all_seen_at = now
                ready = not unseen and now - all_seen_at >= SETTLE_S and now - t_start >= warmup
                if ready or now - t_start > warmup + 60:
                    window_start, window_end = now, now + seconds
                    before, cpu0 = run.status(), time.process_time() + run.live_processes_cpu_s() + _children_cpu_s()
                    busy0 = _machine_busy_s()
                    sent0 = publishers.lateness() if publishers is not None else {}
                    sampler.__enter__()
                continue
            if now >= window_end:  # read before the loop ends: leaving it closes the run
                measured_end = now
                procs = run.live_processes
                cpu_s = time.process_time() + run.live_processes_cpu_s() + _children_cpu_s() - cpu0
                machine_s = _machine_busy_s() - busy0
                sent1 = publishers.lateness() if publishers is not None else {}
                break
            counts[sid] += 1
            if r.meta.captured_mono is not None:
                latencies.append(now - r.meta.captured_mono)
        after = run.status()
    finally:
        watchdog.cancel()
        if window_start is not None:
            sampler.__exit__()
        run.close()
    if window_start is None or before is None:
        return {"streams": n, "note": "failed: the run ended before the measurement window"}
    encoders = {}
    if annotate is not None:
        encoders = _encoder_columns(run.summary().stages.get("annotate"))
        encoders["annotate_ms"] = (run.get_stats().get("stages_ms_per_frame") or {}).get("annotate")
    wall = (measured_end or time.monotonic()) - window_start  # not the run's close
    per_stream = [c / wall for c in counts]
    drops = sum(a["drops"] - b["drops"] for a, b in zip(after["streams"], before["streams"]))
    reconnects = sum(a["reconnects"] - b["reconnects"] for a, b in zip(after["streams"], before["streams"]))
    causes: dict[str, int] = {}
    for a, b in zip(after["streams"], before["streams"]):
        for cause, k in (a.get("drop_causes") or {}).items():
            causes[cause] = causes.get(cause, 0) + k - (b.get("drop_causes") or {}).get(cause, 0)
    decoders = sorted({s["decoder"] for s in after["streams"] if s.get("decoder")})
    held = min(per_stream) >= _REALTIME_SHARE * fps and drops == 0
    lat_ms = [x * 1e3 for x in latencies]
    return {
        "streams": n,
        "realtime": held,
        "fps_total": sum(counts) / wall,
        "fps_min": min(per_stream),
        "fps_median": statistics.median(per_stream),
        "p50_ms": _percentile(lat_ms, 50),
        "p99_ms": _percentile(lat_ms, 99),
        "max_ms": max(lat_ms) if lat_ms else None,
        "drops": drops,
        "drops_before": sum(b["drops"] for b in before["streams"]),
        **{f"publisher_{k}": sent1[k] - sent0.get(k, 0) for k in ("late_33ms", "late_100ms") if k in sent1},
        "drop_causes": ", ".join(f"{c} {k}" for c, k in sorted(causes.items()) if k) or None,
        "reconnects": reconnects,
        "cpu_cores": cpu_s / wall,
        "machine_cores": machine_s / wall,
        "gpu_util": sampler.mean("gpu_util_percent"),
        "nvdec_util": sampler.mean("nvdec_util_percent"),
        "decoder": ",".join(decoders) or None,
        "live_processes": procs,
        "window_s": wall,
        **encoders,
    }


def _annotate_stages(options: Mapping[str, str], out_dir: str | os.PathLike | None, streams: int) -> list:
    """The annotate stage of ``--annotate``: one libx264 video per stream under ``out_dir``, each
    encoded in a child process on CUDA, the CPU shared among ``streams`` encoders (as ``vidpipe
    detect URL... --annotate DIR/`` does)."""
    from vidpipe.draw import Annotator
    from vidpipe.stages.annotate import AnnotateStage

    if out_dir is None:
        raise ValueError("annotate needs out_dir")
    folder = Path(out_dir)
    return [AnnotateStage(lambda meta: str(folder / f"cam{meta.stream_id}.mp4"), render=Annotator(),
                          options=dict(options) or None, audio=False, release_frames=True, streams=streams)]


def _encoder_columns(report: dict | None) -> dict:
    """The annotate stage's report, summed over streams: frames encoded, mean encode ms a frame,
    the run's waits for a full encoder queue, streams whose video failed."""
    streams = list(((report or {}).get("streams") or {}).values())
    encode = [s["encode_ms_per_frame"] for s in streams if s.get("encode_ms_per_frame") is not None]
    return {
        "encoded_frames": sum(s.get("frames") or 0 for s in streams),
        "encode_ms": statistics.mean(encode) if encode else None,
        "encoder_threads": ",".join(sorted({str(s.get("encoder_threads") or "-") for s in streams})) or None,
        "encoder_waits": sum(s.get("blocked_writes") or 0 for s in streams),
        "encoder_errors": sum(1 for s in streams if s.get("error")) or None,
    }


def _children_cpu_s() -> float:
    """CPU seconds used so far by this process's running encoder processes
    (``python -m vidpipe.encode.child``; Linux ``/proc``, else 0). Read before the run closes
    them, like the decoder processes' (:meth:`~vidpipe.pipeline.Pipeline.live_processes_cpu_s`)."""
    from vidpipe.decode.procpool import cpu_seconds

    me = str(os.getpid()).encode()
    pids = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return 0.0
    for pid in filter(str.isdigit, entries):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                parent = f.read().rsplit(b")", 1)[1].split()[1]
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read()
        except (OSError, IndexError):
            continue
        if parent == me and b"vidpipe.encode.child" in command:
            pids.append(int(pid))
    return cpu_seconds(pids)


def run_streams_bench(
    *,
    streams: Sequence[int] = (8, 16, 32, 64),
    seconds: float = 20.0,
    warmup: float = 8.0,
    device: str = "auto",
    model: str = "yolov3-tiny",
    batch_size: int | None = None,
    batch_timeout: float | None = None,
    decoder: str = "auto",
    live_processes: int | None = None,
    decode_latency: str = "auto",
    queue_frames: int | None = None,
    clip: str | os.PathLike | None = None,
    size: tuple[int, int] = (1920, 1080),
    fps: int = 30,
    nginx_root: str | os.PathLike | None = None,
    per_process: int = 8,
    work_dir: str | os.PathLike | None = None,
    repeat: int = 1,
    annotate: Mapping[str, str] | None = None,
    in_flight: int | None = None,
) -> StreamsBenchResult:
    """Measure each stream count in ``streams`` (ascending), ``repeat`` times each (a new run
    every time: drops and tails vary from run to run), and return the report rows.
    ``annotate``: also draw and encode every stream (libx264 with these options over vidpipe's
    defaults, e.g. ``{"preset": "ultrafast"}``; ``{}`` for the defaults) to a video per stream in
    a temporary folder (removed after each run). ``in_flight``: the run's
    ``batches_in_flight`` (``None``: :class:`~vidpipe.pipeline_config.PipelineConfig`'s default)."""
    import tempfile

    from vidpipe.api import build_detector
    from vidpipe.bench.publishers import PublisherProcesses
    from vidpipe.bench.realclip import build_real_clip
    from vidpipe.bench.rtmp_server import RtmpServer
    from vidpipe.bench.workdir import media_folder
    from vidpipe.pipeline_config import PipelineConfig

    counts = sorted({int(s) for s in streams})
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"repeat must be a positive int, got {repeat!r}")
    width, height = size
    with media_folder(work_dir) as folder:
        path = Path(clip) if clip else build_real_clip(folder, width=width, height=height, fps=fps,
                                                       frames=10 * fps, gop=fps)
        detector = build_detector(model, device=device)
        rows: list[dict] = []
        with RtmpServer(root=nginx_root) as server:
            urls = [server.url(f"cam{i}") for i in range(counts[-1])]
            pubs = PublisherProcesses(path, urls, per_process=per_process).start()
            try:
                time.sleep(2.0)  # publishers connect and send their first keyframe
                for n in counts:
                    bs = batch_size or max(1, min(n, PipelineConfig().batch_size))  # what vidpipe.detect uses
                    for k in range(1, repeat + 1):
                        logger.info("bench streams: %d streams, batch %d, run %d of %d", n, bs, k, repeat)
                        with tempfile.TemporaryDirectory(prefix="annotated-", dir=folder) as out_dir:
                            row = _measure(urls[:n], detector=detector, fps=fps, seconds=seconds, warmup=warmup,
                                           batch_size=bs, batch_timeout=batch_timeout, decoder=decoder,
                                           live_processes=live_processes, decode_latency=decode_latency,
                                           queue_frames=queue_frames, publishers=pubs, annotate=annotate,
                                           out_dir=out_dir, in_flight=in_flight)
                        row["batch_size"], row["run"] = bs, k
                        row["in_flight"] = in_flight or PipelineConfig().batches_in_flight
                        rows.append(row)
                        logger.info("bench streams: %s", row)
                        if pubs.exited():
                            raise RuntimeError("a publisher process exited; see its messages above")
            finally:
                pubs.stop()
        held = [n for n in counts if all(r.get("realtime") for r in rows if r["streams"] == n)]
        inputs = [{"name": path.name, "path": str(path),
                   "describe": f"{width}x{height} {fps} fps H.264 (real street footage, looped), published to "
                               f"nginx-rtmp on loopback by {math.ceil(counts[-1] / per_process)} PyAV processes"}]
    import platform

    machine = {"device": str(detector.device), "cpu_cores": os.cpu_count(), "python": platform.python_version()}
    if detector.device.type == "cuda":
        import torch

        machine["gpu"] = torch.cuda.get_device_name(detector.device)
    for r in rows:
        r["input"] = f"{r['streams']} streams" + (f", run {r['run']}" if repeat > 1 else "")
        r["peer"] = "vidpipe" if annotate is None else "vidpipe+annotate"
        r["fps"] = r.get("fps_total")
    return StreamsBenchResult(
        rows=rows, inputs=inputs, machine=machine,
        targets={"most streams in real time" + (f" (in all {repeat} runs)" if repeat > 1 else ""): max(held) if held else 0,
                 "target": (">= 64 streams, p99 <= 100 ms, no drops" if annotate is None else
                            ">= 16 streams annotated (1080p30, CPU encoding), no drops")},
        title="Live streams: capture-to-result latency and rate per stream count"
              + ("" if annotate is None else ", each stream drawn and encoded (libx264: "
                 + (", ".join(f"{k}={v}" for k, v in annotate.items()) or "vidpipe's defaults") + ")"),
        columns=["streams", *(["run"] if repeat > 1 else []), "realtime", "fps_total", "fps_min", "fps_median", "p50_ms", "p99_ms", "max_ms",
                 "drops", "drop_causes", "drops_before", "publisher_late_33ms", "publisher_late_100ms", "reconnects", "cpu_cores", "machine_cores", "gpu_util", "nvdec_util", "batch_size", "in_flight", "decoder", "live_processes",
                 *(["annotate_ms", "encoded_frames", "encode_ms", "encoder_threads", "encoder_waits", "encoder_errors"]
                   if annotate is not None else [])],
        headers={"fps_total": "results/s", "fps_min": "min fps/stream", "fps_median": "median fps/stream",
                 "p50_ms": "p50 ms", "p99_ms": "p99 ms", "max_ms": "max ms", "cpu_cores": "CPU cores", "machine_cores": "machine cores",
                 "live_processes": "decoder procs", "drop_causes": "drops by cause", "in_flight": "batches in flight",
                 "drops_before": "drops before the window",
                 "publisher_late_33ms": "packets published > 33 ms late", "publisher_late_100ms": "> 100 ms late",
                 "gpu_util": "GPU %", "nvdec_util": "NVDEC %", "realtime": "real time",
                 "annotate_ms": "draw + hand-off ms/frame (run's thread)",
                 "encoded_frames": "frames encoded (whole run)", "encode_ms": "encode ms/frame",
                 "encoder_threads": "x264 threads",
                 "encoder_waits": "waits for an encoder", "encoder_errors": "videos failed"},
        formats={"fps_min": ".1f", "fps_median": ".1f", "p50_ms": ".1f", "p99_ms": ".1f", "max_ms": ".1f",
                 "cpu_cores": ".2f", "machine_cores": ".2f", "gpu_util": ".0f", "nvdec_util": ".0f",
                 "encode_ms": ".1f", "annotate_ms": ".2f"},
        name="bench_streams",
    )
