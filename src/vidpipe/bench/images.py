"""``vidpipe bench images``: JPEG loading throughput of vidpipe against its peers, in one process.

Peers, all on the same files, one after another: PIL and OpenCV (if installed) with N threads,
torchvision's batched nvJPEG, the hardware JPEG engines driven directly (vidpipe's
``nvjpeg-hw`` decoder), nvImageCodec and DALI's mixed decoder (if installed), and vidpipe's CPU
and GPU paths (read + decode + letterbox into one batch; the GPU path with its default decoder
and with torchvision's ``nvjpeg`` decoder), plus the GPU-cached ``ImageDataset`` epoch. vidpipe's peers run with
its own default thread counts unless ``threads`` is given. Each peer runs a warm-up, then ``repeat`` timed passes (best kept) under
:class:`~vidpipe.bench.sysstats.measure`: images/s, CPU % (process CPU time / wall), GPU memory.
"""

from __future__ import annotations

import logging
import os
import platform
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vidpipe.bench.report import describe_row, markdown_table, write_report
from vidpipe.bench.sysstats import measure

__all__ = ["PEERS", "PRESETS", "ImageBenchResult", "bench_images", "generate_jpegs"]

logger = logging.getLogger(__name__)

#: ``--generate`` presets: (width, height, JPEG quality).
PRESETS = {"1080p-jpeg": (1920, 1080, 90), "720p-jpeg": (1280, 720, 90), "4k-jpeg": (3840, 2160, 90)}
PEERS = ("pil", "opencv", "nvjpeg", "nvjpeg-hw", "nvimgcodec", "dali", "vidpipe-cpu", "vidpipe-gpu",
         "vidpipe-gpu-nvjpeg", "vidpipe-gpu-nvimgcodec", "vidpipe-cached")  # fmt: skip
COLUMNS = [
    "peer",
    "output",
    "img_per_s",
    "cpu_percent",
    "gpu_peak_mib",
    "gpu_used_peak_mib",
    "images",
    "wall_s",
    "note",
]
HEADERS = {"img_per_s": "img/s", "cpu_percent": "CPU %", "gpu_peak_mib": "torch peak MiB",
           "gpu_used_peak_mib": "device peak MiB", "wall_s": "seconds"}  # fmt: skip


@dataclass
class ImageBenchResult:
    """Rows (one per peer: ``peer``, ``output``, ``img_per_s``, ``cpu_percent``, GPU MiB, ...),
    the input set, the machine, and the issue's targets checked on these numbers."""

    rows: list[dict]
    inputs: dict
    machine: dict
    targets: dict = field(default_factory=dict)

    def markdown(self) -> str:
        return markdown_table(self.rows, COLUMNS, headers=HEADERS, formats={"wall_s": ".2f"})

    def write(self, out_dir: str | Path, name: str = "bench_images") -> dict[str, Path]:
        """``name.md``/``.json``/``.png`` (img/s per peer) in ``out_dir``."""
        notes = [f"{k}: {v}" for k, v in {**self.inputs, **self.machine, **self.targets}.items()]
        return write_report(
            out_dir, name, self.rows, title=f"JPEG loading, {self.inputs.get('describe', '')}", label="peer",
            value="img_per_s", unit="img/s", columns=COLUMNS, headers=HEADERS, formats={"wall_s": ".2f"},
            notes=notes, meta={"inputs": self.inputs, "machine": self.machine, "targets": self.targets},
            highlight=[r["peer"] for r in self.rows if r["peer"].startswith("vidpipe")],
        )  # fmt: skip


def generate_jpegs(out_dir: str | Path, preset: str = "1080p-jpeg", count: int = 2000, *,
                   threads: int | None = None, seed: int = 0) -> list[str]:  # fmt: skip
    """Write ``count`` JPEGs of realistic content (smooth colour fields, gradients, shapes, sensor
    noise; not flat colour, which would compress to nothing) into ``out_dir/<preset>-<count>/``.
    An existing complete set is reused. Returns the paths in order."""
    import numpy as np
    from PIL import Image, ImageDraw

    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; expected one of {', '.join(PRESETS)}")
    w, h, quality = PRESETS[preset]
    folder = Path(out_dir) / f"{preset}-{count}"
    paths = [str(folder / f"{i:06d}.jpg") for i in range(count)]
    done = folder / "COMPLETE"
    if done.exists() and all(os.path.exists(p) for p in paths):
        logger.info("reusing %d generated JPEGs in %s", count, folder)
        return paths
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    m = 160  # margin: each image takes a randomly shifted window of the shared fields
    yy, xx = np.mgrid[0 : h + m, 0 : w + m].astype(np.float32)
    fields = []  # a few smooth colour fields with waves, shared by all images (fast to make many)
    for _ in range(4):
        blobs = Image.fromarray(rng.integers(0, 256, size=(10, 18, 3), dtype=np.uint8)).resize(
            (w + m, h + m), Image.BICUBIC
        )
        waves = 40 * np.sin(xx / rng.uniform(40, 200) + yy / rng.uniform(60, 300))
        fields.append(np.asarray(blobs, dtype=np.int16) + waves[..., None].astype(np.int16))
    grain = rng.normal(0, 7, size=(h + m, w + m, 3)).astype(np.int16)  # sensor noise
    del yy, xx

    def make(i: int) -> None:
        r = np.random.default_rng((seed, i))
        (fy, fx), (gy, gx) = r.integers(0, m, 2), r.integers(0, m, 2)
        a = fields[i % len(fields)][fy : fy + h, fx : fx + w] + grain[gy : gy + h, gx : gx + w]
        im = Image.fromarray(np.clip(a, 0, 255).astype(np.uint8))
        d = ImageDraw.Draw(im)
        for _ in range(int(r.integers(8, 20))):
            x0, y0 = int(r.integers(0, w)), int(r.integers(0, h))
            x1, y1 = x0 + int(r.integers(20, w // 3)), y0 + int(r.integers(20, h // 3))
            colour = tuple(int(c) for c in r.integers(0, 256, 3))
            [d.ellipse, d.rectangle, d.line][int(r.integers(0, 3))]([x0, y0, x1, y1], fill=colour, width=5)
        im.save(paths[i], format="JPEG", quality=quality)

    t0, step = time.perf_counter(), max(1, count // 10)
    with ThreadPoolExecutor(max_workers=threads or min(16, os.cpu_count() or 4)) as pool:
        for k, _ in enumerate(pool.map(make, range(count)), 1):
            if k % step == 0 or k == count:
                logger.info("generating %s: %d/%d (%.1f s)", preset, k, count, time.perf_counter() - t0)
    done.write_text(f"{count}\n")
    return paths


def bench_images(
    inputs: Sequence[str] | str | None = None,
    *,
    generate: str = "1080p-jpeg",
    count: int = 2000,
    device: str = "auto",
    batch_size: int = 64,
    threads: int | None = None,
    size: tuple[int, int] = (416, 416),
    peers: Sequence[str] = PEERS,
    repeat: int = 2,
    work_dir: str | Path | None = None,
) -> ImageBenchResult:
    """Run the peers on the same JPEGs in this process and return their numbers.

    Args:
        inputs: image files/folder/glob; ``None`` generates ``count`` JPEGs of preset ``generate``
            into ``work_dir`` (kept and reused; default: a temporary folder removed at the end).
        device: the GPU for the GPU peers (``"auto"``: CUDA if present; without one the GPU
            peers are listed with the reason).
        threads: CPU threads for PIL/OpenCV/DALI (default: CPU count, at most 16) and for
            vidpipe (default: vidpipe's own, see :func:`vidpipe.images.load`).
        size: letterbox size of vidpipe's output batches.
        peers: which of :data:`PEERS` to run.
        repeat: timed passes per peer; the fastest is reported.
    """
    from contextlib import ExitStack

    import vidpipe.images as vi
    from vidpipe.bench.workdir import media_folder
    from vidpipe.device import resolve_device

    dev = resolve_device(device)
    vidpipe_threads = threads
    threads = threads or min(16, os.cpu_count() or 4)
    with ExitStack() as cleanup:  # generated JPEGs are removed at the end unless work_dir keeps them
        if inputs is None:
            work = cleanup.enter_context(media_folder(work_dir))
            paths = generate_jpegs(work, generate, count, threads=threads)
            describe = f"{count} generated {generate} (quality {PRESETS[generate][2]})"
        else:
            paths = vi.list_images(inputs)
            describe = f"{len(paths)} files from {inputs if isinstance(inputs, str) else 'a list'}"
        mb = sum(os.path.getsize(p) for p in paths) / 1e6
        in_info = {"describe": describe, "files": len(paths), "total_mb": round(mb, 1), "batch_size": batch_size,
                   "threads": threads, "letterbox": list(size)}  # fmt: skip
        machine = _machine(dev, threads)
        logger.info("bench images: %s (%.0f MB), %s", describe, mb, machine.get("gpu", "no GPU"))
        ctx = _Ctx(paths, dev, batch_size, threads, size, vidpipe_threads)
        rows = []
        for name in peers:
            if name not in PEERS:
                raise ValueError(f"unknown peer {name!r}; expected some of {', '.join(PEERS)}")
            rows.append(_run_peer(name, ctx, repeat))
            logger.info("bench images: %s", describe_row(rows[-1], name=rows[-1]["peer"], value="img_per_s",
                                                         unit="images/s", count="images"))  # fmt: skip
        return ImageBenchResult(rows, in_info, machine, _targets(rows))


# -- peers ---------------------------------------------------------------------------------


@dataclass
class _Ctx:
    paths: list[str]
    device: Any
    batch_size: int
    threads: int
    size: tuple[int, int]
    vidpipe_threads: int | None = None  # None: vidpipe's defaults
    blobs: list | None = None  # encoded files in RAM, for the decode-only peers
    dataset: Any = None  # the preloaded ImageDataset of the "vidpipe-cached" peer
    hw: Any = None  # the "nvjpeg-hw" peer's decoder and the parsed headers of the files
    infos: list | None = None

    def encoded(self) -> list:
        import torch

        if self.blobs is None:
            self.blobs = [torch.frombuffer(bytearray(Path(p).read_bytes()), dtype=torch.uint8) for p in self.paths]
        return self.blobs


def _peer(name: str, ctx: _Ctx) -> tuple[str, str, Callable[[_Ctx, list[int]], int] | None, str]:
    """``(label, output, run, note)`` of a peer; ``run`` is ``None`` (with the reason in
    ``note``) when it cannot run here. ``run(ctx, indices)`` returns the images it produced."""
    t, bs = ctx.threads, ctx.batch_size
    box = f"letterbox {ctx.size[0]}x{ctx.size[1]}"
    vt_cpu, vt_gpu = _vidpipe_threads(ctx, "cpu"), _vidpipe_threads(ctx, "cuda")
    specs: dict[str, tuple[str, str, Callable, tuple[str, ...]]] = {
        "pil": (f"PIL, {t} threads", "RGB HWC uint8, CPU (read+decode)", _run_pil, ()),
        "opencv": (f"OpenCV, {t} threads", "BGR HWC uint8, CPU (read+decode)", _run_cv2, ("cv2",)),
        "nvjpeg": (f"torchvision nvJPEG, batch {bs}", "RGB CHW uint8, GPU (decode only, bytes in RAM)",
                   _run_nvjpeg, ("cuda",)),
        "nvjpeg-hw": (f"nvJPEG hardware engines direct, batch {bs}", "RGB CHW uint8, GPU (decode only, bytes in RAM)",
                      _run_nvjpeg_hw, ("cuda",)),
        "nvimgcodec": (f"nvImageCodec, batch {bs}", "RGB HWC uint8, GPU (decode only, bytes in RAM)",
                       _run_nvimgcodec, ("cuda", "nvidia.nvimgcodec")),
        "dali": (f"DALI mixed decoder, batch {bs}", "RGB HWC uint8, GPU (read+decode)", _run_dali,
                 ("cuda", "nvidia.dali")),
        "vidpipe-cpu": (f"vidpipe CPU, {vt_cpu} threads", f"{box} FP32 batch, CPU (read+decode+resize)",
                        _run_vidpipe_cpu, ()),
        "vidpipe-gpu": (f"vidpipe GPU (default decoder), {vt_gpu} threads", f"{box} FP16 batch, GPU (read+decode+resize)",
                        _run_vidpipe_gpu, ("cuda",)),
        "vidpipe-gpu-nvjpeg": (f"vidpipe GPU (torchvision nvjpeg decoder), {vt_gpu} threads",
                               f"{box} FP16 batch, GPU (read+decode+resize)", _run_vidpipe_gpu_nvjpeg, ("cuda",)),
        "vidpipe-gpu-nvimgcodec": ("vidpipe GPU (nvImageCodec)", f"{box} FP16 batch, GPU (read+decode+resize)",
                                   _run_vidpipe_gpu_nvimgcodec, ("cuda", "nvidia.nvimgcodec")),
        "vidpipe-cached": ("vidpipe ImageDataset, cached epoch", f"{box} FP16 batch, GPU (from the GPU cache)",
                           _run_cached, ("cuda",)),
    }  # fmt: skip
    label, output, run, needs = specs[name]
    for need in needs:
        if need == "cuda" and ctx.device.type != "cuda":
            return label, output, None, "needs a CUDA device"
        if need != "cuda" and not _importable(need):
            return label, output, None, f"{need} not installed"
    return label, output, run, ""


def _run_peer(name: str, ctx: _Ctx, repeat: int) -> dict:
    label, output, run, note = _peer(name, ctx)
    row = {"peer": label, "key": name, "output": output, "img_per_s": None, "cpu_percent": None, "gpu_peak_mib": None,
           "gpu_used_peak_mib": None, "images": 0, "wall_s": None, "note": note}  # fmt: skip
    if run is None:
        return row
    all_idx = list(range(len(ctx.paths)))
    try:
        run(ctx, all_idx[: min(len(all_idx), 2 * ctx.batch_size)])  # warm-up: libraries, pools, allocator
        best = None
        for _ in range(max(1, repeat)):
            with measure(ctx.device if ctx.device.type == "cuda" else None) as m:
                n = run(ctx, all_idx)
            if best is None or m.usage.wall_s < best[1].wall_s:
                best = (n, m.usage)
        n, u = best
        row.update(images=n, wall_s=u.wall_s, img_per_s=n / u.wall_s, cpu_percent=u.cpu_percent,
                   gpu_peak_mib=u.gpu_peak_mib, gpu_used_peak_mib=u.gpu_used_peak_mib)  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - one failing peer must not hide the others
        logger.warning("bench images: %s failed: %s: %s", label, type(exc).__name__, exc)
        row["note"] = f"failed: {type(exc).__name__}: {str(exc)[:200]}"
    return row


def _run_pil(ctx: _Ctx, idx: list[int]) -> int:
    import numpy as np
    from PIL import Image

    def one(i: int) -> int:
        with Image.open(ctx.paths[i]) as im:
            return np.asarray(im.convert("RGB")).shape[0]

    with ThreadPoolExecutor(ctx.threads) as pool:
        return sum(1 for _ in pool.map(one, idx))


def _run_cv2(ctx: _Ctx, idx: list[int]) -> int:
    import cv2

    cv2.setNumThreads(1)  # parallelism comes from the pool, as in a typical loader
    with ThreadPoolExecutor(ctx.threads) as pool:
        return sum(1 for img in pool.map(lambda i: cv2.imread(ctx.paths[i], cv2.IMREAD_COLOR), idx) if img is not None)


def _run_nvjpeg(ctx: _Ctx, idx: list[int]) -> int:
    from torchvision.io import ImageReadMode, decode_jpeg

    from vidpipe.images.decode_cpu import quiet_torchvision_deprecation

    quiet_torchvision_deprecation()
    blobs, n = ctx.encoded(), 0
    for k in range(0, len(idx), ctx.batch_size):
        n += len(
            decode_jpeg([blobs[i] for i in idx[k : k + ctx.batch_size]], mode=ImageReadMode.RGB, device=ctx.device)
        )
    return n


def _run_nvjpeg_hw(ctx: _Ctx, idx: list[int]) -> int:
    """vidpipe's direct hardware decoder on bytes in RAM (headers parsed beforehand, like the
    loader does while reading); output ready on the current stream, synchronised at the end."""
    import torch

    from vidpipe.images.formats import parse_jpeg_header
    from vidpipe.images.nvjpeg_hw import shared_decoder

    if ctx.hw is None:
        ctx.hw = shared_decoder(ctx.device)
        ctx.infos = [parse_jpeg_header(memoryview(b.numpy())) for b in ctx.encoded()]
    blobs, n = ctx.encoded(), 0
    for k in range(0, len(idx), ctx.batch_size):
        part = idx[k : k + ctx.batch_size]
        n += sum(not isinstance(o, Exception) for o in ctx.hw.decode([blobs[i] for i in part], [ctx.infos[i] for i in part]))
    torch.cuda.synchronize(ctx.device)
    return n


def _run_nvimgcodec(ctx: _Ctx, idx: list[int]) -> int:
    from nvidia import nvimgcodec

    dec = nvimgcodec.Decoder(device_id=ctx.device.index or 0)
    blobs, n = ctx.encoded(), 0
    for k in range(0, len(idx), ctx.batch_size):
        n += sum(1 for im in dec.decode([blobs[i].numpy() for i in idx[k : k + ctx.batch_size]]) if im is not None)
    return n


def _run_dali(ctx: _Ctx, idx: list[int]) -> int:
    from nvidia.dali import fn, pipeline_def, types

    files = [ctx.paths[i] for i in idx]
    bs = min(ctx.batch_size, len(files))

    @pipeline_def(batch_size=bs, num_threads=ctx.threads, device_id=ctx.device.index or 0, prefetch_queue_depth=2)
    def pipe():
        jpegs, _ = fn.readers.file(files=files, name="reader")
        return fn.decoders.image(jpegs, device="mixed", output_type=types.RGB)

    p = pipe()
    p.build()
    n = 0
    for _ in range(-(-len(files) // bs)):  # whole batches: the last one wraps around, all counted
        (out,) = p.run()
        n += len(out)
    del p
    return n


def _run_vidpipe(ctx: _Ctx, idx: list[int], device: str, dtype: str, decoder: str = "auto") -> int:
    import vidpipe.images as vi

    loader = vi.load([ctx.paths[i] for i in idx], device=device, batch_size=ctx.batch_size, size=ctx.size,
                     dtype=dtype, num_threads=ctx.vidpipe_threads, decoder=decoder)  # fmt: skip
    n = sum(len(b) for b in loader)
    if loader.skipped:
        raise RuntimeError(f"{len(loader.skipped)} files skipped, first: {loader.skipped[0]}")
    return n


def _run_vidpipe_cpu(ctx: _Ctx, idx: list[int]) -> int:
    return _run_vidpipe(ctx, idx, "cpu", "fp32")


def _run_vidpipe_gpu(ctx: _Ctx, idx: list[int]) -> int:
    return _run_vidpipe(ctx, idx, str(ctx.device), "fp16")


def _run_vidpipe_gpu_nvjpeg(ctx: _Ctx, idx: list[int]) -> int:
    return _run_vidpipe(ctx, idx, str(ctx.device), "fp16", decoder="nvjpeg")


def _run_vidpipe_gpu_nvimgcodec(ctx: _Ctx, idx: list[int]) -> int:
    return _run_vidpipe(ctx, idx, str(ctx.device), "fp16", decoder="nvimgcodec")


def _run_cached(ctx: _Ctx, idx: list[int]) -> int:
    """One shuffled epoch of an ImageDataset over all the files, served from its GPU cache. The
    first (warm-up, untimed) call builds the dataset and preloads it."""
    import vidpipe.images as vi

    if ctx.dataset is None:
        ctx.dataset = vi.ImageDataset(ctx.paths, size=ctx.size, device=ctx.device, dtype="fp16",
                                      num_threads=ctx.vidpipe_threads).preload(batch_size=ctx.batch_size)  # fmt: skip
    return sum(len(b) for b in ctx.dataset.batches(ctx.batch_size, shuffle=True, seed=0))


# -- helpers -------------------------------------------------------------------------------


def _vidpipe_threads(ctx: _Ctx, device_type: str) -> int:
    """The reader threads vidpipe uses for ``device_type`` with ``ctx``'s setting (for labels)."""
    from vidpipe.images.config import GPU_ROUTE_THREADS

    if ctx.vidpipe_threads:
        return ctx.vidpipe_threads
    return min(GPU_ROUTE_THREADS if device_type == "cuda" else 16, os.cpu_count() or 4)


def _importable(module: str) -> bool:
    try:
        __import__(module)
        return True
    except Exception:  # noqa: BLE001 - any import failure means "not available"
        return False


def _machine(dev, threads: int) -> dict:
    import PIL
    import torch
    import torchvision

    info = {"python": platform.python_version(), "torch": torch.__version__, "torchvision": torchvision.__version__,
            "pillow": PIL.__version__, "cpu_count": os.cpu_count(), "threads": threads}  # fmt: skip
    if dev.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(dev)
    for mod in ("cv2", "nvidia.dali", "nvidia.nvimgcodec"):
        if _importable(mod):
            import importlib

            info[mod] = getattr(importlib.import_module(mod), "__version__", "?")
    return info


def _targets(rows: list[dict]) -> dict:
    """The issue's targets on these numbers: >= 4,000 img/s on the GPU, >= 4x the CPU path."""
    by = {r["key"]: r.get("img_per_s") for r in rows}
    gpu, cpu = by.get("vidpipe-gpu"), by.get("vidpipe-cpu")
    out: dict[str, Any] = {}
    if gpu:
        out["vidpipe_gpu_img_per_s"] = round(gpu, 1)
        out["target_4000_img_per_s"] = gpu >= 4000
    if gpu and cpu:
        out["gpu_over_cpu"] = round(gpu / cpu, 2)
        out["target_4x_cpu_path"] = gpu / cpu >= 4
    return out
