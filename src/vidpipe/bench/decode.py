"""``vidpipe bench decode``: video decoding throughput of vidpipe against its peers, in one run.

Peers, one after another on the same file(s), each measured with
:class:`~vidpipe.bench.sysstats.measure` (frames/s, process CPU %, GPU memory):

- ``pyav-rgb24``: plain PyAV, FFmpeg frame+slice threads, ``to_ndarray(format="rgb24")``;
- ``pyav``: vidpipe's CPU backend :class:`~vidpipe.decode.pyav.PyAVDecoder` to RGB uint8 batches;
- ``pyav-parallel``: :class:`~vidpipe.decode.parallel.PyAVParallelDecoder` (segments on several
  FFmpeg decoders) to RGB uint8 (CPU);
- ``opencv``: ``cv2.VideoCapture`` to BGR uint8 (if OpenCV is installed);
- ``nvdec-1``: :class:`~vidpipe.decode.nvdec.NvdecDecoder` with one session, then the fused
  NV12 -> letterboxed FP16 preprocessing (:func:`vidpipe.ops.preprocess.preprocess`);
  like the CPU peers, on the first ``reference_frames`` frames only;
- ``nvdec``: the same with the default segment-parallel sessions: what ``vidpipe detect`` feeds
  its model;
- ``nvdec-decode``: segment-parallel NVDEC to NV12 batches, without preprocessing;
- ``nvdec-ceiling``: ``ceiling_sessions`` independent sessions (default 28) decoding the file at
  once, frames left in the decoders: what the GPU's NVDEC engines can do, measured in this run
  (sessions initialized before the clock starts, as the ``nvdec`` peers' pooled sessions are);
- ``dali``: :class:`~vidpipe.decode.dali.DaliDecoder` (if nvidia-dali is installed).

NVDEC sessions are created once (the driver serializes their creation, ~50 ms each) and pooled:
the warm-up before the timed peers initializes the default number of them, as a long-running
``vidpipe detect`` has after its first file. The issue's targets are checked per input on these
numbers (see :func:`targets`).
"""

from __future__ import annotations

import itertools
import logging
import os
import platform
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vidpipe.bench.report import VideoBenchResult, describe_row
from vidpipe.bench.sysstats import measure

__all__ = ["run_decode_bench", "nvdec_ceiling", "targets", "PEERS"]

logger = logging.getLogger(__name__)

PEERS = ("pyav-rgb24", "pyav", "pyav-parallel", "opencv", "nvdec-1", "nvdec", "nvdec-threads", "nvdec-decode",
         "nvdec-ceiling", "dali")  # fmt: skip
COLUMNS = ["input", "peer", "output", "fps", "cpu_percent", "cores_per_kfps", "gpu_peak_mib", "gpu_used_peak_mib",
           "frames", "wall_s", "sessions", "note"]  # fmt: skip
HEADERS = {"fps": "frames/s", "cpu_percent": "CPU %", "cores_per_kfps": "cores per 1000 fps",
           "gpu_peak_mib": "torch peak MiB", "gpu_used_peak_mib": "device peak MiB", "wall_s": "seconds"}  # fmt: skip
FORMATS = {"wall_s": ".2f", "cores_per_kfps": ".2f"}


@dataclass
class _Ctx:
    path: str
    info: Any
    device: Any
    batch_size: int
    size: tuple[int, int]
    workers: int | None
    ceiling_sessions: int
    ceiling_frames: int | None
    reference_frames: int | None = None
    memory: dict = field(default_factory=dict)


def run_decode_bench(
    inputs: Sequence[str] | str | None = None,
    *,
    generate: str | Sequence[str] | None = None,
    device: str = "auto",
    batch_size: int = 32,
    size: tuple[int, int] = (640, 640),
    peers: Sequence[str] = PEERS,
    repeat: int = 1,
    workers: int | None = None,
    ceiling_sessions: int = 28,
    ceiling_frames: int | None = 600,
    reference_frames: int | None = 1200,
    frames: int | None = None,
    work_dir: str | Path | None = None,
) -> VideoBenchResult:
    """Run the decode peers on each input in this process and return their numbers.

    Args:
        inputs: video files; or ``None`` with ``generate``.
        generate: presets of :data:`vidpipe.bench.generate.VIDEO_PRESETS` (``"1080p-h264,1080p-hevc"``
            or a list), encoded with PyAV into ``work_dir`` (kept there and reused by later runs;
            default: a temporary folder removed at the end, see :mod:`vidpipe.bench.workdir`).
        device: the GPU for the NVDEC peers (``"auto"``: CUDA if present; without one the GPU
            peers are listed with the reason).
        batch_size, size: batches of the decoders, letterbox size of the preprocessed peers.
        peers: which of :data:`PEERS` to run.
        repeat: timed passes per peer (the fastest is kept).
        workers: NVDEC sessions of the ``nvdec`` peers (``None``: the default, three per engine).
        ceiling_sessions, ceiling_frames: the independent-sessions ceiling (frames per session,
            ``None``: the whole file).
        reference_frames: the peers other than ``nvdec``/``nvdec-decode`` (PyAV, OpenCV, one
            NVDEC session) decode only the first this many frames: their rate is steady from the
            start, and a long clip at 200 frames/s would take minutes. ``None``: the whole file.
        frames: frames of generated clips (``None``: the preset's).
    """
    from contextlib import ExitStack

    from vidpipe.bench.generate import generate_video, parse_presets
    from vidpipe.bench.workdir import media_folder
    from vidpipe.decode.probe import probe
    from vidpipe.device import resolve_device

    dev = resolve_device(device)
    with ExitStack() as cleanup:  # generated media are removed at the end unless work_dir keeps them
        paths: list[tuple[str, str]] = []
        if inputs is not None:
            for p in [inputs] if isinstance(inputs, (str, os.PathLike)) else inputs:
                paths.append((Path(p).name, os.fspath(p)))
        if generate:
            work = cleanup.enter_context(media_folder(work_dir))
            names = parse_presets(generate) if isinstance(generate, str) else list(generate)
            for name in names:
                paths.append((name, str(generate_video(name, work, frames=frames))))
        if not paths:
            from vidpipe.errors import ConfigError

            raise ConfigError("bench decode needs input files or --generate presets")
        for name in peers:
            if name not in PEERS:
                raise ValueError(f"unknown peer {name!r}; expected some of {', '.join(PEERS)}")
        rows, in_rows, all_targets = [], [], {}
        for label, path in paths:
            info = probe(path)
            describe = (f"{info.codec} {info.width}x{info.height} {info.pix_fmt}, {info.frame_count} frames, "
                        f"{(info.bit_rate or 0) / 1e6:.1f} Mbit/s")  # fmt: skip
            in_rows.append({"name": label, "path": path, "describe": describe})
            ctx = _Ctx(path, info, dev, batch_size, size, workers, ceiling_sessions, ceiling_frames, reference_frames)
            logger.info("bench decode: %s (%s)", label, describe)
            _warm_up(ctx, peers)
            for name in peers:
                row = {"input": label, **_run_peer(name, ctx, repeat)}
                rows.append(row)
                logger.info("bench decode: %s", describe_row(row, name=f"{label} {name}"))
            all_targets[label] = targets([r for r in rows if r["input"] == label])
            if ctx.device.type == "cuda" and _unavailable("nvdec", ctx) is None:
                from vidpipe.decode.nvdec_pool import clear

                clear()  # the next input has its own sessions
        return VideoBenchResult(rows, in_rows, _machine(dev), all_targets, title="Video decoding", columns=COLUMNS,
                                headers=HEADERS, formats=FORMATS, highlight=("nvdec", "nvdec-ceiling"), name="bench_decode")  # fmt: skip


# -- peers ---------------------------------------------------------------------------------

_OUTPUT = {
    "pyav-rgb24": "RGB uint8 (CPU)",
    "pyav": "RGB uint8 (CPU)",
    "pyav-parallel": "RGB uint8 (CPU)",
    "opencv": "BGR uint8 (CPU)",
    "nvdec-1": "letterboxed FP16 (GPU)",
    "nvdec": "letterboxed FP16 (GPU)",
    "nvdec-threads": "letterboxed FP16 (GPU)",
    "nvdec-decode": "NV12 (GPU)",
    "nvdec-ceiling": "decoder surfaces (GPU)",
    "dali": "RGB uint8 (GPU)",
}


def _unavailable(name: str, ctx: _Ctx) -> str | None:
    gpu = name.startswith("nvdec") or name == "dali"
    if gpu and ctx.device.type != "cuda":
        return "no CUDA device"
    if name.startswith("nvdec") or name == "dali":
        import importlib

        try:
            module = importlib.import_module("vidpipe.decode.nvdec" if name != "dali" else "vidpipe.decode.dali")
        except Exception as exc:  # noqa: BLE001 - BackendUnavailableError: the package is missing
            return str(exc)
        return module.check(ctx.info, ctx.device)
    if name == "opencv":
        try:
            __import__("cv2")
        except Exception as exc:  # noqa: BLE001
            return f"cv2 not importable ({type(exc).__name__})"
    return None


def _run_peer(name: str, ctx: _Ctx, repeat: int) -> dict:
    row: dict[str, Any] = {"peer": name, "output": _OUTPUT[name], "fps": None, "sessions": None, "note": ""}
    why = _unavailable(name, ctx)
    if why:
        row["note"] = why
        return row
    fn = _RUNNERS[name]
    best = None
    for _ in range(max(1, repeat)):
        ctx.memory = {}
        try:
            with measure(ctx.device if ctx.device.type == "cuda" else None) as m:
                n, extra = fn(ctx)
        except Exception as exc:  # noqa: BLE001 - a failing peer is a row, not a crash
            logger.warning("bench decode: %s failed: %s", name, exc, exc_info=logger.isEnabledFor(logging.DEBUG))
            row["note"] = f"failed: {type(exc).__name__}: {exc}"[:300]
            return row
        u = m.usage
        fps = n / u.wall_s if u.wall_s > 0 else 0.0
        cand = {"fps": round(fps, 1), "frames": n, "wall_s": u.wall_s, "cpu_percent": round(u.cpu_percent, 1),
                "cores_per_kfps": round(u.cpu_percent / 100 / (fps / 1000), 3) if fps else None,
                "gpu_peak_mib": None if u.gpu_peak_mib is None else round(u.gpu_peak_mib, 1),
                "gpu_used_peak_mib": None if u.gpu_used_peak_mib is None else round(u.gpu_used_peak_mib, 1),
                **extra, **ctx.memory}  # fmt: skip
        if best is None or (cand["fps"] or 0) > (best["fps"] or 0):
            best = cand
    row.update(best or {})
    return row


def _pyav_rgb24(ctx: _Ctx) -> tuple[int, dict]:
    import av

    n, limit = 0, ctx.reference_frames
    with av.open(ctx.path) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        stream.thread_count = 0
        for frame in container.decode(stream):
            frame.to_ndarray(format="rgb24")
            n += 1
            if limit is not None and n >= limit:
                break
    return n, {"sessions": 1}


def _options(ctx: _Ctx) -> Any:
    from vidpipe.decode.base import DecodeOptions

    # The bench only counts each batch before asking for the next: buffers may be recycled, as
    # in the pipeline.
    return DecodeOptions(max_frames=ctx.reference_frames, reuse_buffers=True)


def _pyav(ctx: _Ctx) -> tuple[int, dict]:
    from vidpipe.decode.pyav import PyAVDecoder

    dec = PyAVDecoder(ctx.info, device="cpu", threads=0, options=_options(ctx))
    return sum(len(b) for b in dec.batches(ctx.batch_size)), {"sessions": 1}


def _pyav_parallel(ctx: _Ctx) -> tuple[int, dict]:
    from vidpipe.decode.parallel import PyAVParallelDecoder

    dec = PyAVParallelDecoder(ctx.info, device="cpu", options=_options(ctx))
    return sum(len(b) for b in dec.batches(ctx.batch_size)), {"sessions": dec.workers}


def _opencv(ctx: _Ctx) -> tuple[int, dict]:
    import cv2

    cap = cv2.VideoCapture(ctx.path)
    n, limit = 0, ctx.reference_frames
    try:
        while limit is None or n < limit:
            ok, _ = cap.read()
            if not ok:
                break
            n += 1
    finally:
        cap.release()
    return n, {"sessions": 1}


def _nvdec(
    ctx: _Ctx, *, workers: int | None, preprocess: bool, reference: bool = False, processes: int | None = None
) -> tuple[int, dict]:
    import torch

    from vidpipe.decode.nvdec import NvdecDecoder
    from vidpipe.ops.preprocess import preprocess as prep

    options = _options(ctx) if reference else None
    dec = NvdecDecoder(ctx.info, device=ctx.device, workers=workers, options=options, processes=processes)
    stream = torch.cuda.Stream(ctx.device)
    n, samples, out = 0, [], None
    with torch.cuda.stream(stream):  # the consumer stream of the decoder's contract
        for batch in dec.batches(ctx.batch_size):
            if preprocess:
                out = prep(batch, size=ctx.size, dtype=torch.float16, device=ctx.device).tensor
            n += len(batch)
            samples.append(torch.cuda.memory_allocated(ctx.device))
    stream.synchronize()
    del out
    st = dec.stats()
    if samples:  # torch memory after the first fifth of the run vs at the end: flat means no growth
        ctx.memory = {"gpu_alloc_early_mib": round(samples[len(samples) // 5] / 2**20, 1),
                      "gpu_alloc_end_mib": round(samples[-1] / 2**20, 1),
                      "buffer_peak_mib": round(st["buffer_peak_bytes"] / 2**20, 1)}  # fmt: skip
    extra = {"sessions": st["workers"], "processes": st["processes"], "segments": st["segments"],
             "bytes_device_to_host": st["bytes_device_to_host"]}  # fmt: skip
    if dec.error is not None:
        extra["note"] = f"partial: {dec.error}"[:300]
    return n, extra


def nvdec_ceiling(
    path: str, *, sessions: int = 28, frames: int | None = None, device: Any = "cuda"
) -> tuple[int, float]:
    """Decode ``path`` with ``sessions`` independent NVDEC sessions at once (each its own thread,
    demuxer and decoder; frames are counted, not copied). Returns ``(frames, seconds)`` from the
    moment all sessions are ready (packets demuxed, decoder initialized with the first keyframe)
    to the last one finishing. Sessions come from and return to the pool."""
    import torch

    from vidpipe.decode.demux import ANNEXB_FILTERS, Demuxer
    from vidpipe.decode.nvdec import NvdecSession
    from vidpipe.decode.nvdec_caps import canonical_codec
    from vidpipe.decode.probe import probe
    from vidpipe.device import resolve_device

    dev = resolve_device(device)
    info = probe(path)
    annexb = canonical_codec(info.codec) in ANNEXB_FILTERS
    barrier = threading.Barrier(sessions + 1)
    counts = [0] * sessions
    ends = [0.0] * sessions
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            sess = NvdecSession.acquire(info, dev)
            with Demuxer(path, annexb=annexb) as dmx:
                packets = list(itertools.islice(dmx.packets(), frames))  # frames=None: all
            sess.start(None)  # the driver creates decoders one at a time: do it before the clock
            sess.feed(packets[0])
            sess.finish()
            barrier.wait()
            n = 0
            for pkt in packets:
                n += len(sess.feed(pkt))
            n += len(sess.finish())
            sess.stream.synchronize()
            counts[i], ends[i] = n, time.perf_counter()
            sess.close()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(sessions)]
    for t in threads:
        t.start()
    try:
        barrier.wait()
    except threading.BrokenBarrierError:
        pass
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    torch.cuda.synchronize(dev)
    return sum(counts), max(ends) - t0


def _ceiling(ctx: _Ctx) -> tuple[int, dict]:
    n, seconds = nvdec_ceiling(ctx.path, sessions=ctx.ceiling_sessions, frames=ctx.ceiling_frames, device=ctx.device)
    # the rate from "all sessions ready" to "last one done": demux and decoder setup excluded
    return n, {"sessions": ctx.ceiling_sessions, "fps": round(n / seconds, 1) if seconds > 0 else None,
               "note": "independent sessions; rate excludes demux and setup"}  # fmt: skip


def _dali(ctx: _Ctx) -> tuple[int, dict]:
    from vidpipe.decode.dali import DaliDecoder

    dec = DaliDecoder(ctx.info, device=ctx.device, options=_options(ctx))
    return sum(len(b) for b in dec.batches(ctx.batch_size)), {"sessions": 1}


_RUNNERS: dict[str, Callable[[_Ctx], tuple[int, dict]]] = {
    "pyav-rgb24": _pyav_rgb24,
    "pyav": _pyav,
    "pyav-parallel": _pyav_parallel,
    "opencv": _opencv,
    "nvdec-1": lambda c: _nvdec(c, workers=1, preprocess=True, reference=True),
    "nvdec": lambda c: _nvdec(c, workers=c.workers, preprocess=True),
    "nvdec-threads": lambda c: _nvdec(c, workers=c.workers, preprocess=True, processes=0),
    "nvdec-decode": lambda c: _nvdec(c, workers=c.workers, preprocess=False),
    "nvdec-ceiling": _ceiling,
    "dali": _dali,
}


#: frames of the warm-up pass of the NVDEC peers' configuration (fills the default frame window)
WARMUP_FRAMES = 1600


def _warm_up(ctx: _Ctx, peers: Sequence[str]) -> None:
    """CUDA context, NVDEC sessions (pooled), the fused kernel's compilation and the frame
    window's memory (PyTorch's caching allocator keeps it), outside the timings: the state a
    long-running ``vidpipe detect`` is in after its first file. Without it the first timed peer
    pays for up to 4 GiB of ``cudaMalloc`` and for sessions the driver creates one at a time."""
    if ctx.device.type != "cuda" or not any(p.startswith("nvdec") for p in peers) or _unavailable("nvdec", ctx):
        return
    import torch

    from vidpipe.decode.base import DecodeOptions
    from vidpipe.decode.nvdec import DEFAULT_PROCESSES, NvdecDecoder, default_workers, warm_sessions
    from vidpipe.ops.preprocess import preprocess

    count = ctx.workers or default_workers(ctx.device, ctx.info.codec)
    warm_sessions(ctx.info, ctx.device, count=count, processes=DEFAULT_PROCESSES)
    for processes in (None, 0):  # the decoder processes' and this process's sessions and buffers
        dec = NvdecDecoder(ctx.info, device=ctx.device, workers=ctx.workers, processes=processes,
                           options=DecodeOptions(max_frames=WARMUP_FRAMES))  # fmt: skip
        stream = torch.cuda.Stream(ctx.device)
        with torch.cuda.stream(stream):
            for batch in dec.batches(ctx.batch_size):
                preprocess(batch, size=ctx.size, dtype=torch.float16, device=ctx.device)
        torch.cuda.synchronize(ctx.device)


# -- helpers -------------------------------------------------------------------------------


def _machine(dev: Any) -> dict:
    import av
    import torch

    info = {"python": platform.python_version(), "torch": torch.__version__, "av": av.__version__,
            "cpu_count": os.cpu_count()}  # fmt: skip
    if dev.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(dev)
        try:
            from vidpipe.decode.nvdec_caps import num_engines, nvdec_module

            info["PyNvVideoCodec"] = getattr(nvdec_module(), "__version__", "?")
            info["nvdec_engines"] = num_engines(dev.index or 0)
        except Exception:  # noqa: BLE001
            pass
        procpool = sys.modules.get("vidpipe.decode.procpool")
        if procpool is not None and procpool.describe():
            info["decoder_processes"] = procpool.describe()
    for mod in ("cv2", "nvidia.dali"):
        try:
            info[mod] = getattr(__import__(mod, fromlist=["_"]), "__version__", "?")
        except Exception:  # noqa: BLE001
            pass
    return info


def targets(rows: list[dict]) -> dict:
    """The issue's targets for one input: ``nvdec`` (decode -> FP16 batch) >= 0.85x the NVDEC
    ceiling and >= 2x the fastest PyAV peer; CPU time <= 1 core per 1,000 frames/s."""
    by = {r["peer"]: r for r in rows}
    fps = {k: (v.get("fps") or None) for k, v in by.items()}
    out: dict[str, Any] = {}
    gpu, ceiling = fps.get("nvdec"), fps.get("nvdec-ceiling")
    cpu = max((fps.get(p) or 0 for p in ("pyav-rgb24", "pyav", "pyav-parallel")), default=0) or None
    if gpu and ceiling:
        out["nvdec_over_ceiling"] = round(gpu / ceiling, 3)
        out["target_0.85x_ceiling"] = gpu / ceiling >= 0.85
    if gpu and cpu:
        out["nvdec_over_pyav"] = round(gpu / cpu, 2)
        out["target_2x_pyav"] = gpu / cpu >= 2
    if gpu and by["nvdec"].get("cores_per_kfps") is not None:
        out["nvdec_cores_per_kfps"] = by["nvdec"]["cores_per_kfps"]
        out["target_1_core_per_kfps"] = by["nvdec"]["cores_per_kfps"] <= 1
    return out
