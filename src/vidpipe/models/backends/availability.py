"""What the model backends can do on this machine, for ``vidpipe doctor``.

Each check imports the optional package (never required) and says why a backend is or is not
usable; nothing is loaded onto the GPU.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class BackendStatus:
    """One backend: ``available`` and a one-line ``detail`` (version, providers, or why not)."""

    name: str
    available: bool
    detail: str


def _try_import(module: str) -> tuple[object | None, str]:
    try:
        return importlib.import_module(module), ""
    except Exception as exc:  # noqa: BLE001 - any import failure means unavailable
        return None, f"{type(exc).__name__}: {exc}"


def onnxruntime_status() -> BackendStatus:
    ort, why = _try_import("onnxruntime")
    if ort is None:
        return BackendStatus("onnxruntime", False, f"not importable ({why}); pip install onnxruntime-gpu")
    providers = list(ort.get_available_providers())
    gpu = "CUDAExecutionProvider" in providers
    detail = f"onnxruntime {ort.__version__}; providers: {', '.join(providers)}"
    if not gpu:
        detail += " (CPU only: install onnxruntime-gpu for CUDA with I/O binding)"
    return BackendStatus("onnxruntime", True, detail)


def tensorrt_status() -> BackendStatus:
    trt, why = _try_import("tensorrt")
    if trt is None:
        return BackendStatus(
            "tensorrt",
            False,
            f"not importable ({why}); .engine/.plan files need `pip install tensorrt`. "
            "vidpipe's TensorRT backend is written for the TensorRT 10 API but unverified",
        )
    return BackendStatus(
        "tensorrt", True, f"tensorrt {trt.__version__} importable; vidpipe's TensorRT backend is unverified"
    )


def torch_accel_status() -> BackendStatus:
    import torch

    if not torch.cuda.is_available():
        return BackendStatus("cuda-graphs", False, "no CUDA GPU: accelerate() is a no-op on the CPU")
    triton, _ = _try_import("triton")
    compile_ok = "torch.compile available" if triton is not None else "torch.compile unavailable (no triton)"
    return BackendStatus("cuda-graphs", True, f"CUDA graphs available; {compile_ok}")


def backend_status() -> list[BackendStatus]:
    """Status of the optional model backends (onnxruntime, TensorRT, CUDA graphs/torch.compile)."""
    return [onnxruntime_status(), tensorrt_status(), torch_accel_status()]
