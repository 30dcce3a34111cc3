"""GPU memory as three different observers see it, for ``vidpipe bench soak`` and the leak tests.

- **allocated** (``torch.cuda.memory_allocated``): the tensors PyTorch's caching allocator has
  handed out in this process. Blind to the allocator's cached blocks, to the CUDA context, and to
  what NVDEC and the driver allocate for the decoders (surfaces, bitstream buffers).
- **reserved** (``torch.cuda.memory_reserved``): what the caching allocator holds from the driver
  (allocated + cached). Still blind to the context and to NVDEC's own allocations.
- **process** (NVML's per-process ``usedGpuMemory``, as ``nvidia-smi`` lists it; this process and
  its children, the decoder processes): everything the driver has given these processes on the
  GPU: contexts, the allocator's pools, NVDEC's surfaces. This is the memory an operator sees and
  the one that runs out, so ``bench soak`` judges it. NVML answers only where it can see the
  processes (in a container with its own pid namespace it may list none): then ``None``.
- **device used** (``torch.cuda.mem_get_info``: total - free): the whole device, other processes
  included; the fallback judge when the per-process number is not available (on a GPU used by
  this run alone it is the process number plus a constant).

NVML is read through ``pynvml`` (``nvidia-ml-py``) when installed, else through the
``nvidia-smi`` tool (one short call per sample; it dies with this process).
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["GpuMemory", "allocator_state", "gpu_memory", "process_gpu_mib"]

logger = logging.getLogger(__name__)

_MIB = 1 << 20


@dataclass(frozen=True)
class GpuMemory:
    """MiB of GPU memory by observer (``None``: not available); ``process_source``: ``"nvml"``,
    ``"nvidia-smi"`` or ``None``."""

    allocated_mib: float | None
    reserved_mib: float | None
    process_mib: float | None
    device_used_mib: float | None
    process_source: str | None


def gpu_memory(device: Any, pids: Iterable[int]) -> GpuMemory:
    """The four numbers for the CUDA ``device`` (a ``torch.device``) and the processes ``pids``
    (this one and its children)."""
    import torch

    torch.cuda.synchronize(device)
    free, total = torch.cuda.mem_get_info(device)
    process, source = process_gpu_mib(pids)
    return GpuMemory(
        allocated_mib=torch.cuda.memory_allocated(device) / _MIB,
        reserved_mib=torch.cuda.memory_reserved(device) / _MIB,
        process_mib=process, device_used_mib=(total - free) / _MIB, process_source=source,
    )  # fmt: skip


def process_gpu_mib(pids: Iterable[int]) -> tuple[float | None, str | None]:
    """MiB of GPU memory used by the processes ``pids`` on all GPUs, from NVML, and how it was
    read; ``(None, None)`` when NVML lists none of them (no NVML, another pid namespace)."""
    wanted = {int(p) for p in pids}
    used = _from_pynvml(wanted)
    if used is not None:
        return used, "nvml"
    used = _from_nvidia_smi(wanted)
    if used is not None:
        return used, "nvidia-smi"
    return None, None


def _from_pynvml(pids: set[int]) -> float | None:
    try:
        import pynvml
    except Exception:  # noqa: BLE001 - optional
        return None
    try:
        pynvml.nvmlInit()
        try:
            found, total = False, 0
            for i in range(pynvml.nvmlDeviceGetCount()):
                handle = pynvml.nvmlDeviceGetHandleByIndex(i)
                for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                    if p.pid in pids and p.usedGpuMemory is not None:
                        found, total = True, total + int(p.usedGpuMemory)
            return total / _MIB if found else None
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:  # noqa: BLE001 - NVML errors must not break a run
        logger.debug("NVML per-process query failed: %s", exc)
        return None


def _from_nvidia_smi(pids: set[int]) -> float | None:
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return None
    from vidpipe.lifetime.keeper import with_parent_death

    argv, preexec = with_parent_death([tool, "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"])
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=True,
                             preexec_fn=preexec).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        logger.debug("nvidia-smi failed: %s", exc)
        return None
    found, total = False, 0.0
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit() and int(parts[0]) in pids:
            try:
                total += float(parts[1])  # MiB
                found = True
            except ValueError:
                pass
    return total if found else None


def allocator_state(device: Any) -> tuple[dict[str, float], dict[int, tuple[float, int]]]:
    """The caching allocator's shape on the CUDA ``device``: ``({"segments": count,
    "inactive_split_mib": cached free space inside split blocks (fragmentation), "alloc_retries":
    allocations that had to free the cache and retry}, {segment address: (MiB, CUDA stream)})``.

    ``bench soak`` keeps the second to say which segments are new when the reserve grows (their
    size and stream point at who allocated them: the default stream ``0`` or a run's stream)."""
    import torch

    stats = torch.cuda.memory_stats(device)
    counts = {
        "segments": float(stats.get("segment.all.current", 0)),
        "inactive_split_mib": round(stats.get("inactive_split_bytes.all.current", 0) / _MIB, 1),
        "alloc_retries": float(stats.get("num_alloc_retries", 0)),
    }
    index = device.index if device.index is not None else torch.cuda.current_device()
    segments = {
        int(seg["address"]): (round(seg["total_size"] / _MIB, 2), int(seg["stream"]))
        for seg in torch.cuda.memory_snapshot()
        if seg.get("device", index) == index
    }
    return counts, segments
