"""One bound on a run's GPU memory (``max_gpu_memory``): what each part gets, and why.

What a detection run allocates on the GPU through PyTorch's caching allocator, and how it scales:

- **held at start**: what is allocated when the run is planned (the model's weights, anything
  the caller holds);
- **model**: the forward's activations, about linear in the batch (measured: one eager forward
  at batch 1 and at batch 2), twice over with a CUDA graph (the graph's private pool, plus the
  eager warm-up's blocks while it is captured);
- **inputs**: letterboxed model inputs (``3 x H x W`` at the model's size and dtype) queued per
  open source (``queue_depth`` chunks, one being made, one being joined) plus the joined batch
  and the one in flight;
- **kept frames** (``keep_frames``): the same number of source-sized RGB frames;
- **preprocess**: the fused NV12 letterbox's float32 work buffer for one batch (source height x
  resized width; 164.5 MiB for 32 1080p frames), one for the whole run
  (:class:`~vidpipe.ops.scratch.ScratchArena`, the detector's);
- **decode**: what is left, shared among the open sources: each NVDEC decoder's frame window
  (batch buffers of NV12 frames decoded ahead of the consumer, :mod:`vidpipe.decode.parallel`;
  with decoder processes the shared ring, :mod:`vidpipe.decode.procring`: the CUDA driver's
  allocations, not PyTorch's, each checked against the allocator's cap when it is made,
  :mod:`vidpipe.decode.ipc_memory`), at most the default window
  (:func:`vidpipe.decode.nvdec.default_buffer_bytes`);
- **margin**: 10% (at least 128 MiB) for the allocator's rounding and post-processing.

:func:`plan_gpu_memory` is pure arithmetic (tested on the CPU); :func:`measure_model` and
:func:`cap_allocator` touch the GPU. The plan lowers the batch when the requested one does not
fit and raises :class:`~vidpipe.errors.GpuMemoryError` (naming the minimum) when batch 1 does not.
The allocator is capped to the budget (``torch.cuda.set_per_process_memory_fraction``), so its
reserve cannot grow past it: an allocation beyond it is an out-of-memory error, which the model
(:class:`~vidpipe.models.backends.batching.OomBackoff`) and the decoders (fewer buffers, smaller
batches) answer by backing off. Not counted, because PyTorch does not allocate them: the CUDA
context and NVDEC's own decoder surfaces (driver memory, about 20-170 MB per session).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vidpipe.errors import ConfigError, GpuMemoryError

if TYPE_CHECKING:
    import torch

__all__ = [
    "GpuMemoryPlan", "parse_gpu_memory", "resolve_budget", "plan_gpu_memory", "measure_model", "cap_allocator",
    "mib", "NOMINAL_FRAME",
]  # fmt: skip

logger = logging.getLogger(__name__)

MiB = 1 << 20
#: frame size assumed for inputs whose size is not known when the run is planned (live, images)
NOMINAL_FRAME = (1080, 1920)
#: decode buffers a decoder needs at the least: a window of two batches plus the batch being
#: handed over and the one being recycled (:mod:`vidpipe.decode.parallel`), at batch 1
MIN_DECODE_BUFFERS = 4

_UNITS = {
    "": 1, "b": 1,
    "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tib": 1 << 40,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
}  # fmt: skip
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([a-z]*)\s*$", re.IGNORECASE)


def mib(n: float) -> int:
    """Bytes as whole MiB (rounded)."""
    return int(round(n / MiB))


def parse_gpu_memory(value: Any, *, name: str = "max_gpu_memory") -> "int | float | None":
    """``max_gpu_memory`` as bytes (``int``) or a fraction of the card (``float`` in (0, 1]).

    Accepts ``None``; an int of bytes; a float or string fraction ``0.5``; a string with a unit:
    ``"4GiB"``, ``"512MiB"``, ``"1.5G"`` (``K/M/G/T`` and ``KiB..TiB`` are powers of 1024,
    ``KB..TB`` powers of 1000). Raises :class:`~vidpipe.errors.ConfigError` naming ``name``.
    """
    if value is None:
        return None
    hint = "expected bytes (e.g. 4GiB, 512MiB, 2000000000) or a fraction of the GPU's memory (e.g. 0.5)"
    if isinstance(value, bool):
        raise ConfigError(f"{name}={value!r}; {hint}")
    if isinstance(value, int):
        if value < 1:
            raise ConfigError(f"{name}={value!r}; {hint}")
        return int(value)
    if isinstance(value, float):
        if not 0 < value <= 1:
            raise ConfigError(f"{name}={value!r}: a fraction must be in (0, 1]; {hint}")
        return float(value)
    if not isinstance(value, str):
        raise ConfigError(f"{name}={value!r}; {hint}")
    m = _SIZE.match(value)
    unit = m.group(2).lower() if m else ""
    if m is None or unit not in _UNITS:
        raise ConfigError(f"{name}={value!r}; {hint}")
    number = float(m.group(1))
    if not unit:
        if "." in m.group(1) or number <= 1:
            return parse_gpu_memory(number, name=name)  # a fraction
        if number < MiB:  # "4" is surely not 4 bytes
            raise ConfigError(f"{name}={value!r} would be {int(number)} bytes; give a unit (e.g. {value.strip()}GiB) "
                              "or a fraction of the GPU's memory (e.g. 0.5)")  # fmt: skip
        return parse_gpu_memory(int(number), name=name)
    n = int(number * _UNITS[unit])
    if n < 1:
        raise ConfigError(f"{name}={value!r}; {hint}")
    return n


def resolve_budget(limit: "int | float", total: int, *, name: str = "max_gpu_memory") -> int:
    """The budget in bytes on a card of ``total`` bytes (a fraction of it, or bytes at most it)."""
    if isinstance(limit, float):
        return int(limit * total)
    if limit > total:
        raise ConfigError(
            f"{name}={mib(limit)} MiB is more than the GPU has ({mib(total)} MiB); give at most that, or a fraction"
        )
    return int(limit)


@dataclass(frozen=True)
class GpuMemoryPlan:
    """What each part of a run may hold on the GPU (bytes), and the batch that fits.

    ``parts``: ``(name, bytes, why)`` in the order they were reserved; ``decode_bytes`` is each
    open source's decode window (``decode`` part / ``open_sources``); ``minimum``: the smallest
    budget that runs at batch 1.
    """

    budget: int
    total: int
    requested_batch: int
    batch_size: int
    open_sources: int
    decode_bytes: int
    minimum: int
    parts: tuple[tuple[str, int, str], ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly (MiB)."""
        return {
            "budget_mib": mib(self.budget),
            "gpu_total_mib": mib(self.total),
            "batch_size": self.batch_size,
            "requested_batch_size": self.requested_batch,
            "open_sources": self.open_sources,
            "decode_window_mib_per_source": mib(self.decode_bytes),
            "minimum_mib": mib(self.minimum),
            "parts": {name: {"mib": mib(n), "why": why} for name, n, why in self.parts},
        }

    def describe(self) -> str:
        """One line: ``budget 1024 MiB: held 34, model 210, ...``."""
        parts = ", ".join(f"{name} {mib(n)}" for name, n, _ in self.parts)
        batch = f"; batch {self.batch_size}" + (
            f" (lowered from {self.requested_batch} to fit)" if self.batch_size < self.requested_batch else ""
        )
        return f"budget {mib(self.budget)} MiB: {parts} MiB{batch}"


def _parts(
    batch: int, *, held: int, act_fixed: int, act_per_frame: int, cuda_graph: bool, input_frame_bytes: int,
    source_frame_bytes: int, keep_frames: bool, queue_depth: int, open_sources: int, in_flight: int = 1,
    scratch_frame_bytes: int = 0,
) -> list[tuple[str, int, str]]:  # fmt: skip
    graph = 2 if cuda_graph else 1
    chunks = (queue_depth + 2) * open_sources + 1 + in_flight
    out = [
        ("held", held, "allocated when the run started: model weights and anything else already on the GPU"),
        ("model", graph * (act_fixed + batch * act_per_frame),
         f"activations at batch {batch} ({mib(act_per_frame * 10) / 10:g} MiB a frame, measured)"
         + (" x2: the CUDA graph's pool and the eager warm-up" if cuda_graph else "")),
        ("inputs", chunks * batch * input_frame_bytes,
         f"{chunks} model-input chunks of {batch} frames ({queue_depth} queued + 2 per open source, joined + "
         f"{in_flight} in flight)"),
    ]  # fmt: skip
    if keep_frames:
        kept = (queue_depth + 2) * open_sources * batch * source_frame_bytes
        out.append(("kept frames", kept, f"keep_frames: {(queue_depth + 2) * batch} RGB frames per open source"))
    if scratch_frame_bytes:
        out.append(("preprocess", batch * scratch_frame_bytes,
                    f"the NV12 letterbox's float32 work buffer for {batch} frames (one, shared by the sources)"))
    return out


def plan_gpu_memory(
    budget: int,
    *,
    total: int,
    batch_size: int,
    held: int,
    act_fixed: int,
    act_per_frame: int,
    cuda_graph: bool,
    input_frame_bytes: int,
    decode_frame_bytes: int,
    source_frame_bytes: int,
    open_sources: int,
    queue_depth: int,
    keep_frames: bool,
    decode_cap: int,
    in_flight: int = 1,
    scratch_frame_bytes: int = 0,
) -> GpuMemoryPlan:
    """Split ``budget`` bytes among the parts of a run (see the module docstring).

    ``decode_frame_bytes``: one decoded frame (NV12 of the largest input); ``source_frame_bytes``:
    one kept RGB frame; ``decode_cap``: the most a decoder's window gets (the default window);
    ``in_flight``: batches launched and not yet post-processed (``batches_in_flight``);
    ``scratch_frame_bytes``: the NV12 letterbox's work buffer per frame (0: none, RGB inputs).
    The batch is the largest at most ``batch_size`` that leaves every open source at least
    :data:`MIN_DECODE_BUFFERS` decoded frames. Raises :class:`GpuMemoryError` when batch 1 does
    not fit, naming the minimum budget.
    """
    margin = max(128 * MiB, budget // 10)
    open_sources = max(1, open_sources)

    def decode_min(b: int) -> int:  # the fewest buffers of b frames for every open source
        return open_sources * MIN_DECODE_BUFFERS * b * decode_frame_bytes

    kw = dict(held=held, act_fixed=act_fixed, act_per_frame=act_per_frame, cuda_graph=cuda_graph,
              input_frame_bytes=input_frame_bytes, source_frame_bytes=source_frame_bytes,
              keep_frames=keep_frames, queue_depth=queue_depth, open_sources=open_sources,
              in_flight=in_flight, scratch_frame_bytes=scratch_frame_bytes)  # fmt: skip

    def need(b: int) -> int:
        return sum(n for _, n, _ in _parts(b, **kw)) + margin + decode_min(b)

    base = sum(n for _, n, _ in _parts(1, **kw)) + decode_min(1)
    minimum = max(base + 128 * MiB, -(-base * 10 // 9))  # base + the margin of that budget
    if budget < minimum or need(1) > budget:
        raise GpuMemoryError(
            f"max_gpu_memory={mib(budget)} MiB is too small for this run even at batch 1 "
            f"({', '.join(f'{k} {mib(v)}' for k, v, _ in _parts(1, **kw))}, decode {mib(decode_min(1))} MiB "
            f"and a margin); give at least {-(-minimum // MiB)} MiB"
        )
    lo, hi = 1, max(1, batch_size)  # largest batch that fits (need() grows with the batch)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if need(mid) <= budget:
            lo = mid
        else:
            hi = mid - 1
    batch = lo
    parts = _parts(batch, **kw)
    left = budget - sum(n for _, n, _ in parts) - margin
    per_source = max(MIN_DECODE_BUFFERS * batch * decode_frame_bytes, min(decode_cap, left // open_sources))
    frames = per_source // max(1, decode_frame_bytes)
    parts.append((
        "decode", per_source * open_sources,
        f"{open_sources} open source(s) x {mib(per_source)} MiB: a window of about {frames} decoded frames each",
    ))  # fmt: skip
    parts.append(("margin", margin, "allocator rounding, head and NMS"))
    if batch < batch_size:
        logger.warning(
            "max_gpu_memory=%d MiB: batch %d does not fit; running at batch %d", mib(budget), batch_size, batch
        )
    return GpuMemoryPlan(
        budget=budget, total=total, requested_batch=batch_size, batch_size=batch, open_sources=open_sources,
        decode_bytes=per_source, minimum=minimum, parts=tuple(parts),
    )  # fmt: skip


def measure_model(detector: Any, device: "torch.device") -> tuple[int, int, int]:
    """``(held, act_fixed, act_per_frame)`` bytes on ``device``: memory allocated now, and the
    peak of an eager forward at batch 1 and 2 above it, each the second of two calls (per frame:
    the difference, at least the input's size; fixed: the rest of batch 1's peak)."""
    import torch

    torch.cuda.synchronize(device)
    held = torch.cuda.memory_allocated(device)
    h, w = detector.input_size
    peaks = []
    with torch.inference_mode():
        for b in (1, 1, 2, 2):  # the second call of each is the one kept: first-call workspaces are gone
            x = torch.full((b, 3, h, w), 0.5, dtype=detector.dtype, device=device)
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
            base = torch.cuda.memory_allocated(device)
            try:
                raw = detector.forward(x)
            except Exception:  # noqa: BLE001 - e.g. a model exported for batch 1 only: use batch 1's peak
                if b == 1:
                    raise
                break
            torch.cuda.synchronize(device)
            peak = torch.cuda.max_memory_allocated(device) - base + x.numel() * x.element_size()
            del raw, x
            if len(peaks) < b:
                peaks.append(peak)
            else:
                peaks[b - 1] = peak
    if len(peaks) < 2:
        return held, 0, max(3 * h * w * detector.dtype.itemsize, peaks[0])
    per_frame = max(3 * h * w * detector.dtype.itemsize, peaks[1] - peaks[0])
    fixed = max(0, peaks[0] - per_frame)
    return held, fixed, per_frame


def cap_allocator(budget: int, device: "torch.device") -> "float | None":
    """Cap PyTorch's caching allocator on ``device`` at ``budget`` bytes; returns the fraction
    that was set before (to give back with :func:`restore_allocator`)."""
    import torch

    index = device.index if device.index is not None else torch.cuda.current_device()
    total = torch.cuda.get_device_properties(index).total_memory
    getter = getattr(torch.cuda, "get_per_process_memory_fraction", None)
    before = float(getter(index)) if getter is not None else None
    torch.cuda.set_per_process_memory_fraction(min(1.0, budget / total), index)
    return before


def restore_allocator(before: "float | None", device: "torch.device") -> None:
    """Undo :func:`cap_allocator` (``before``: what it returned; ``None``: no cap)."""
    import torch

    index = device.index if device.index is not None else torch.cuda.current_device()
    torch.cuda.set_per_process_memory_fraction(1.0 if before is None else before, index)
