"""``vidpipe doctor``: what this machine can accelerate, and for every "no", why.

:func:`run_checks` probes Python, torch, CUDA and the GPUs, NVDEC (PyNvVideoCodec and
libnvcuvid), NVENC, nvJPEG, PyAV/FFmpeg codecs and the optional backends. Each probe is guarded:
an exception becomes a failed :class:`Check` with its message, never a crash of the doctor.
Nothing here needs a GPU; on a CPU machine it runs in about two seconds (mostly importing torch).
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import logging
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

__all__ = ["Check", "run_checks", "format_report"]


@dataclass(frozen=True)
class Check:
    """One line of the doctor's report.

    Attributes:
        name: what was checked (``"CUDA"``, ``"NVDEC PyNvVideoCodec"``, ``"decoder h264"``, ...).
        ok: ``True`` works, ``False`` does not (``detail`` says why), ``None`` an optional
            component that is not installed (``detail`` says how to get it).
        detail: version or details when ok, otherwise the reason.
        group: the report section (``"system"``, ``"gpu"``, ``"nvdec"``, ``"nvenc"``, ``"nvjpeg"``,
            ``"pyav"``, ``"optional"``).
    """

    name: str
    ok: bool | None
    detail: str
    group: str = "system"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail, "group": self.group}


def _err(exc: BaseException) -> str:
    text = str(exc).strip().replace("\n", " ")
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _import(module: str) -> tuple[Any | None, str | None, bool]:
    """``(module, error, installed)``: any exception at import time counts as unavailable."""
    try:
        installed = importlib.util.find_spec(module) is not None
    except Exception:  # noqa: BLE001 - a parent package failing to import
        installed = True
    if not installed:
        return None, "not installed", False
    try:
        return importlib.import_module(module), None, True
    except Exception as exc:  # noqa: BLE001 - PyNvVideoCodec raises RuntimeError without a driver
        return None, f"installed but import failed: {_err(exc)}", True


def _version(module: Any, dist: str | None = None) -> str:
    version = getattr(module, "__version__", None)
    if isinstance(version, str):
        return version
    if dist:
        try:
            from importlib.metadata import version as dist_version

            return dist_version(dist)
        except Exception:  # noqa: BLE001
            pass
    return "version unknown"


def _load_library(name: str) -> str | None:
    """``None`` if the shared library loads, else why not."""
    try:
        ctypes.CDLL(name)
        return None
    except OSError as exc:
        return str(exc).strip() or f"{name} cannot be loaded"


# -- system, torch, CUDA, GPUs ---------------------------------------------------------------


def _system() -> list[Check]:
    from vidpipe.summary import vidpipe_version

    checks = [
        Check("Python", True, f"{platform.python_version()} ({platform.python_implementation()}, {sys.executable})"),
        Check("vidpipe", True, vidpipe_version()),
    ]
    torch, error, _ = _import("torch")
    if torch is None:
        checks.append(Check("torch", False, f"{error}; install torch >= 2.4 (pip install torch)"))
    else:
        build = f"built with CUDA {torch.version.cuda}" if torch.version.cuda else "CPU-only build (no CUDA)"
        checks.append(Check("torch", True, f"{torch.__version__}, {build}"))
    return checks


def _cuda_reason(torch: Any) -> str:
    """Why PyTorch sees no CUDA device."""
    if torch is None:
        return "torch cannot be imported"
    if not torch.version.cuda:
        return f"torch {torch.__version__} is a CPU-only build; install a CUDA build of torch"
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return f"CUDA_VISIBLE_DEVICES={visible!r} hides every GPU"
    try:
        torch.cuda.init()
    except Exception as exc:  # noqa: BLE001 - the message is the reason
        return f"torch {torch.__version__} (CUDA {torch.version.cuda}) cannot initialise CUDA: {_err(exc)}"
    return f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA device"


def _driver_version() -> tuple[str | None, str]:
    """``(version, how)`` of the NVIDIA driver, or ``(None, why not)``."""
    pynvml, _, _ = _import("pynvml")
    if pynvml is not None:
        try:
            pynvml.nvmlInit()
            try:
                version = pynvml.nvmlSystemGetDriverVersion()
            finally:
                pynvml.nvmlShutdown()
            return (version.decode() if isinstance(version, bytes) else str(version)), "NVML"
        except Exception as exc:  # noqa: BLE001
            logger.debug("NVML driver query failed: %s", exc)
    if shutil.which("nvidia-smi"):
        from vidpipe.lifetime.keeper import with_parent_death

        argv, preexec = with_parent_death(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
        try:
            out = subprocess.run(
                argv, capture_output=True, text=True, timeout=5, check=True,
                preexec_fn=preexec,  # this thread waits for it: it dies with us
            ).stdout.split()
            if out:
                return out[0], "nvidia-smi"
        except Exception as exc:  # noqa: BLE001
            logger.debug("nvidia-smi failed: %s", exc)
    why = _load_library("libcuda.so.1")
    if why is not None:
        return None, f"no NVIDIA driver: {why}"
    try:
        value = ctypes.c_int()
        lib = ctypes.CDLL("libcuda.so.1")
        if lib.cuDriverGetVersion(ctypes.byref(value)) == 0:
            return f"CUDA {value.value // 1000}.{value.value % 1000 // 10} (driver API)", "libcuda"
    except Exception as exc:  # noqa: BLE001
        return None, f"libcuda.so.1 loads but cuDriverGetVersion failed: {_err(exc)}"
    return None, "libcuda.so.1 loads but reports no version"


def _gpu(state: dict[str, Any]) -> list[Check]:
    torch, _, _ = _import("torch")
    checks = []
    available = False
    if torch is not None:
        try:
            available = bool(torch.cuda.is_available())
        except Exception as exc:  # noqa: BLE001
            state["cuda_reason"] = _err(exc)
    if available:
        count = torch.cuda.device_count()
        checks.append(Check("CUDA", True, f"{count} device(s), CUDA runtime {torch.version.cuda}", "gpu"))
        for i in range(count):
            try:
                p = torch.cuda.get_device_properties(i)
                checks.append(Check(
                    f"GPU {i}", True,
                    f"{p.name}, {p.total_memory / 2**30:.1f} GiB, compute capability {p.major}.{p.minor}", "gpu",
                ))
            except Exception as exc:  # noqa: BLE001
                checks.append(Check(f"GPU {i}", False, f"cannot query: {_err(exc)}", "gpu"))
                continue
            checks.append(Check(f"GPU {i} memory", None, _memory_note(torch, i, p.total_memory), "gpu"))
    else:
        state.setdefault("cuda_reason", _cuda_reason(torch))
        checks.append(Check("CUDA", False, state["cuda_reason"], "gpu"))
    state["cuda"] = available
    version, how = _driver_version()
    checks.append(Check("NVIDIA driver", version is not None, f"{version} (via {how})" if version else how, "gpu"))
    return checks


def _memory_note(torch: Any, index: int, total: int) -> str:
    """What is free on GPU ``index`` and what a detection run holds there by default (the parts
    ``--max-gpu-memory`` bounds together, :mod:`vidpipe.gpu_memory`)."""
    try:
        free, _ = torch.cuda.mem_get_info(index)
        now = f"{free / 2**30:.1f} GiB free now"
    except Exception as exc:  # noqa: BLE001
        now = f"free memory unknown ({_err(exc)})"
    window = max(256 << 20, min(4 << 30, total // 16)) >> 20  # vidpipe.decode.nvdec.default_buffer_bytes
    return (
        f"{now}; a run holds by default up to {window} MiB of decoded frames per open video (NVDEC, at "
        "most the video's frames; 4 videos open at once), the model at its batch and a CUDA graph of it, "
        "and model inputs queued per video; --max-gpu-memory SIZE bounds them together and the summary "
        "says what each part got"
    )


# -- NVDEC, NVENC, nvJPEG --------------------------------------------------------------------


def _nvdec(state: dict[str, Any]) -> list[Check]:
    nvc, error, installed = _import("PyNvVideoCodec")
    state["nvc"] = nvc
    if nvc is not None:
        pynvc = Check("NVDEC PyNvVideoCodec", True, _version(nvc, "PyNvVideoCodec"), "nvdec")
    elif not installed:
        pynvc = Check("NVDEC PyNvVideoCodec", False, "not installed; pip install PyNvVideoCodec (or vidpipe[gpu])", "nvdec")
    else:
        pynvc = Check("NVDEC PyNvVideoCodec", False, error or "unavailable", "nvdec")
    why = _load_library("libnvcuvid.so.1")
    lib = Check(
        "NVDEC libnvcuvid.so.1", why is None,
        "loads" if why is None else f"{why} (part of the NVIDIA driver; no driver or a container without video capabilities)",
        "nvdec",
    )
    return [pynvc, lib]


def _nvenc(state: dict[str, Any]) -> list[Check]:
    why = _load_library("libnvidia-encode.so.1")
    if why is not None:
        return [Check("NVENC", False, f"libnvidia-encode.so.1 cannot be loaded: {why}", "nvenc")]
    nvc = state.get("nvc")
    if nvc is None or not state.get("cuda"):
        need = "PyNvVideoCodec" if nvc is None else "CUDA"
        return [Check("NVENC", None, f"libnvidia-encode.so.1 loads; encoder not tried (needs {need})", "nvenc")]
    from vidpipe.encode.nvenc import nvenc_unavailable

    why = nvenc_unavailable("cuda")
    if why is None:
        return [Check("NVENC", True, "h264 encoder session opened: --annotate-codec h264_nvenc / hevc_nvenc "
                      "(not verified by vidpipe's tests on NVENC hardware)", "nvenc")]
    return [Check("NVENC", False, f"library present, no session opens (H100, H200 and A100 have no NVENC): {why}",
                  "nvenc")]


def _nvjpeg(state: dict[str, Any]) -> list[Check]:
    if not state.get("cuda"):
        return [Check("nvJPEG", False, f"needs CUDA: {state.get('cuda_reason', 'unavailable')}", "nvjpeg")]
    try:
        import torch
        from torchvision.io import decode_jpeg, encode_jpeg

        image = torch.zeros((3, 16, 16), dtype=torch.uint8)
        image[0, :8] = 255
        data = encode_jpeg(image, quality=95)
        decoded = decode_jpeg(data, device="cuda")
        if tuple(decoded.shape) != (3, 16, 16) or decoded.device.type != "cuda":
            return [Check("nvJPEG", False, f"decode_jpeg returned {tuple(decoded.shape)} on {decoded.device}", "nvjpeg")]
        import torchvision

        return [Check("nvJPEG", True, f"torchvision {torchvision.__version__} decode_jpeg on {decoded.device}", "nvjpeg")]
    except Exception as exc:  # noqa: BLE001
        return [Check("nvJPEG", False, f"torchvision.io.decode_jpeg(device='cuda') failed: {_err(exc)}", "nvjpeg")]


# -- PyAV / FFmpeg ---------------------------------------------------------------------------

_DECODERS: dict[str, tuple[str, ...]] = {
    "h264": ("h264",),
    "hevc": ("hevc",),
    "vp9": ("vp9", "libvpx-vp9"),
    "av1": ("libdav1d", "libaom-av1"),  # FFmpeg's native "av1" decoder needs a hwaccel
    "mjpeg": ("mjpeg",),
}
_ENCODERS: tuple[str, ...] = ("libx264", "libx265", "libsvtav1")


def _codec(name: str, mode: str) -> str | None:
    from av.codec import Codec

    try:
        return Codec(name, mode).long_name
    except Exception:  # noqa: BLE001 - UnknownCodecError and friends
        return None


def _pyav(state: dict[str, Any]) -> list[Check]:
    av, error, _ = _import("av")
    if av is None:
        return [Check("PyAV", False, f"{error}; pip install av", "pyav")]
    ffmpeg = getattr(av, "ffmpeg_version_info", None) or ".".join(
        map(str, av.library_versions.get("libavcodec", ()))
    )
    checks = [Check("PyAV", True, f"PyAV {av.__version__}, FFmpeg {ffmpeg}", "pyav")]
    for codec, names in _DECODERS.items():
        found = [(n, _codec(n, "r")) for n in names]
        found = [(n, long) for n, long in found if long]
        if found:
            checks.append(Check(f"decoder {codec}", True, f"{found[0][0]} ({found[0][1]})", "pyav"))
        else:
            checks.append(Check(
                f"decoder {codec}", False,
                f"the FFmpeg inside PyAV {av.__version__} has no software decoder ({', '.join(names)})", "pyav",
            ))
    for name in _ENCODERS:
        long = _codec(name, "w")
        checks.append(Check(
            f"encoder {name}", long is not None,
            long or f"the FFmpeg inside PyAV {av.__version__} was built without {name}", "pyav",
        ))
    return checks


# -- optional backends -----------------------------------------------------------------------


def _onnxruntime(mod: Any) -> str:
    providers = mod.get_available_providers()
    return f"{_version(mod)}, providers: {', '.join(providers)}"


def _opencv(mod: Any) -> str:
    cuda = "unknown"
    try:
        match = re.search(r"NVIDIA CUDA:\s*(\w+)", mod.getBuildInformation())
        cuda = "yes" if match and match.group(1).upper() == "YES" else "no"
    except Exception:  # noqa: BLE001
        pass
    return f"{_version(mod)}, built with CUDA: {cuda}"


def _cupy(mod: Any) -> str:
    try:
        count = mod.cuda.runtime.getDeviceCount()
        return f"{_version(mod)}, {count} device(s)"
    except Exception as exc:  # noqa: BLE001
        return f"{_version(mod)}, no device: {_err(exc)}"


def _tensorrt(mod: Any) -> str:
    return f"{_version(mod)} (vidpipe's .engine backend is written for TensorRT 10 and not yet verified)"


_OPTIONAL: tuple[tuple[str, str, str, Callable[[Any], str] | None], ...] = (
    # (label, module, install hint, detail function)
    ("onnxruntime", "onnxruntime", "pip install onnxruntime-gpu", _onnxruntime),
    ("TensorRT", "tensorrt", "pip install tensorrt (vidpipe's .engine backend targets TensorRT 10; not yet verified)", _tensorrt),
    ("DALI", "nvidia.dali", "pip install nvidia-dali-cuda130 (or -cuda120, matching your CUDA)", None),
    ("OpenCV", "cv2", "pip install opencv-python-headless", _opencv),
    ("nvidia-ml-py", "pynvml", "pip install nvidia-ml-py", None),
    ("nvImageCodec", "nvidia.nvimgcodec", "pip install nvidia-nvimgcodec-cu12", None),
    ("Triton", "triton", "pip install triton", None),
    ("CuPy", "cupy", "pip install cupy-cuda12x", _cupy),
    ("numba", "numba", "pip install numba (the compiled tracker; without it --track runs the numpy one)", None),
)

_DISTS = {"pynvml": "nvidia-ml-py", "nvidia.nvimgcodec": "nvidia-nvimgcodec-cu12"}


def _optional(state: dict[str, Any]) -> list[Check]:
    checks = []
    for label, module, hint, describe in _OPTIONAL:
        mod, error, installed = _import(module)
        if mod is None:
            ok = None if not installed else False
            checks.append(Check(label, ok, f"{error}; {hint}" if not installed else str(error), "optional"))
            continue
        try:
            detail = describe(mod) if describe else _version(mod, _DISTS.get(module))
        except Exception as exc:  # noqa: BLE001
            detail = f"{_version(mod)}, but probing failed: {_err(exc)}"
        checks.append(Check(label, True, detail, "optional"))
    return checks


# -- driver ----------------------------------------------------------------------------------

_STEPS: tuple[tuple[str, Callable[[dict[str, Any]], list[Check]]], ...] = (
    ("system", lambda state: _system()),
    ("gpu", _gpu),
    ("nvdec", _nvdec),
    ("nvenc", _nvenc),
    ("nvjpeg", _nvjpeg),
    ("pyav", _pyav),
    ("optional", _optional),
)


def run_checks() -> list[Check]:
    """Probe this machine. Never raises: a probe that crashes becomes a failed check."""
    state: dict[str, Any] = {}
    checks: list[Check] = []
    for group, step in _STEPS:
        try:
            checks.extend(step(state))
        except Exception as exc:  # noqa: BLE001 - the doctor must always answer
            logger.debug("doctor step %s crashed", group, exc_info=True)
            checks.append(Check(group, False, f"check crashed: {_err(exc)}", group))
    return checks


def _find(checks: Iterable[Check], name: str) -> Check | None:
    return next((c for c in checks if c.name == name), None)


def _verdict(checks: list[Check]) -> list[str]:
    """Which path each stage takes here, naming the first failed check (its reason is above)."""

    def ok(name: str) -> bool:
        c = _find(checks, name)
        return bool(c and c.ok)

    def why(*names: str) -> str:
        failed = [n for n in names if not ok(n)]
        return f" (no {failed[0]}, see above)" if failed else ""

    nvdec = ("CUDA", "NVDEC PyNvVideoCodec", "NVDEC libnvcuvid.so.1")
    return [
        "video decode:  " + ("NVDEC (GPU)" if all(map(ok, nvdec)) else "PyAV on the CPU" + why(*nvdec)),
        "JPEG decode:   " + ("nvJPEG (GPU)" if ok("nvJPEG") else "CPU" + why("nvJPEG")),
        "model:         " + ("CUDA" if ok("CUDA") else "CPU" + why("CUDA")),
        "video encode:  " + ("NVENC (GPU)" if ok("NVENC") else
                             "libx264 on the CPU" + why("NVENC") if ok("encoder libx264") else
                             "unavailable" + why("encoder libx264")),
        "tracking:      " + ("compiled (numba)" if ok("numba") else "numpy" + why("numba")),
    ]


def format_report(checks: list[Check]) -> str:
    """A human-readable report: one line per check (``yes``/``no``/``--``) by section, then a
    verdict of which path each stage would take."""
    marks = {True: "yes", False: "no ", None: "-- "}
    titles = {
        "system": "System", "gpu": "CUDA and GPUs", "nvdec": "NVDEC (hardware video decode)",
        "nvenc": "NVENC (hardware video encode)", "nvjpeg": "nvJPEG (GPU JPEG decode)",
        "pyav": "PyAV / FFmpeg (CPU)", "optional": "Optional backends",
    }
    width = max((len(c.name) for c in checks), default=0)
    lines: list[str] = []
    group = None
    for c in checks:
        if c.group != group:
            group = c.group
            lines.append(("" if not lines else "\n") + titles.get(group, group))
        lines.append(f"  {marks[c.ok]}  {c.name:<{width}}  {c.detail}")
    lines.append("\nWhat vidpipe will use here")
    lines.extend("  " + line for line in _verdict(checks))
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover - `python -m vidpipe.doctor`
    print(format_report(run_checks()))  # noqa: T201 - command-line entry point
