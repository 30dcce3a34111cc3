"""Helpers shared by the model backends: dtype choice, input checks, output checks, probing.

Every backend's ``forward`` takes ``(B, 3, H, W)`` RGB in [0, 1] (``model.dtype`` on
``model.device``) and returns the network's raw output: a tensor, a tuple/list of tensors, a dict
of tensors, or (torchvision) a list of dicts of tensors, all on ``model.device``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from vidpipe._validate import check_choice
from vidpipe.errors import ModelError

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

DTYPE_NAMES = ("float16", "fp16", "half", "float32", "fp32", "float", "bfloat16", "bf16")
DEFAULT_INPUT_SIZE = (640, 640)


def resolve_dtype(dtype: "str | torch.dtype | None", device: "torch.device") -> "torch.dtype":
    """``None`` -> float16 on CUDA, float32 on the CPU; names like ``"fp16"`` or a torch dtype."""
    import torch

    if dtype is None:
        return torch.float16 if device.type == "cuda" else torch.float32
    if isinstance(dtype, torch.dtype):
        if not dtype.is_floating_point:
            raise ModelError(f"model dtype must be a float type, got {dtype}")
        return dtype
    check_choice("dtype", str(dtype).lower(), DTYPE_NAMES)
    key = str(dtype).lower()
    if key in ("float16", "fp16", "half"):
        return torch.float16
    if key in ("bfloat16", "bf16"):
        return torch.bfloat16
    return torch.float32


def check_input_size(input_size: Any, *, source: str = "input_size") -> tuple[int, int] | None:
    """``None``, an int (square) or ``(H, W)`` -> ``(H, W)`` of positive ints, else ModelError."""
    if input_size is None:
        return None
    if isinstance(input_size, int) and not isinstance(input_size, bool):
        input_size = (input_size, input_size)
    try:
        h, w = (int(v) for v in input_size)
    except (TypeError, ValueError):
        raise ModelError(f"{source}={input_size!r} is not (H, W) or one int") from None
    if h <= 0 or w <= 0:
        raise ModelError(f"{source}={input_size!r} must be positive")
    return (h, w)


def check_image_shape(shape: Sequence[Any], *, path: str, fmt: str) -> None:
    """Raise ModelError unless ``shape`` is ``(B, 3, H, W)`` (dims may be symbolic: str/None/-1)."""
    if len(shape) != 4 or (isinstance(shape[1], int) and shape[1] > 0 and shape[1] != 3):
        raise ModelError(
            f"{path}: the {fmt} model's input has shape {list(shape)}, but vidpipe feeds images as "
            "(batch, 3, height, width) RGB; export the model with an NCHW 3-channel image input"
        )


def check_batch(x: "torch.Tensor", model: Any) -> None:
    """Raise ModelError unless ``x`` is ``(B, 3, H, W)`` on the model's device (cheap, no sync)."""
    if x.ndim != 4 or x.shape[1] != 3:
        raise ModelError(
            f"model {model.info.name!r} takes (B, 3, H, W) images, got a tensor of shape {tuple(x.shape)}"
        )
    if x.device != model.device:
        raise ModelError(f"model {model.info.name!r} runs on {model.device} but the input is on {x.device}")


def iter_tensors(raw: Any) -> Iterator["torch.Tensor"]:
    """Every tensor in a raw output (tensor, sequences, mappings, objects with ``__dict__`` fields)."""
    import torch

    if isinstance(raw, torch.Tensor):
        yield raw
    elif isinstance(raw, Mapping):
        for v in raw.values():
            yield from iter_tensors(v)
    elif isinstance(raw, (list, tuple)):
        for v in raw:
            yield from iter_tensors(v)


def finite_flag(raw: Any) -> "torch.Tensor | None":
    """A 0-dim bool tensor on the output's device: all floating values of ``raw`` finite.

    No host synchronisation: one ``isfinite().all()`` reduction per float tensor, combined on the
    device. ``None`` when ``raw`` holds no float tensor.
    """
    import torch

    flags = [torch.isfinite(t).all() for t in iter_tensors(raw) if t.is_floating_point() and t.numel()]
    if not flags:
        return None
    if len(flags) == 1:
        return flags[0]
    return torch.stack([f.to(flags[0].device) for f in flags]).all()


def check_finite(raw: Any, *, model_name: str = "model", dtype: "torch.dtype | None" = None) -> None:
    """Raise ModelError if any float in ``raw`` is NaN or infinite (one device->host sync).

    Use :func:`finite_flag` to defer the sync (e.g. until results go to the host anyway).
    """
    flag = finite_flag(raw)
    if flag is None or bool(flag):
        return
    hint = ""
    if dtype is not None and str(dtype) in ("torch.float16", "torch.bfloat16"):
        hint = f"; it ran in {str(dtype).removeprefix('torch.')}, which can overflow: try dtype='float32'"
    raise ModelError(f"{model_name} produced NaN or infinite outputs{hint}")


def describe_raw(raw: Any, depth: int = 0) -> str:
    """Short structural description of a raw output, for error messages: ``tensor(1, 84, 8400)``."""
    import torch

    if depth > 3:
        return "..."
    if isinstance(raw, torch.Tensor):
        return f"tensor{tuple(raw.shape)}"
    if isinstance(raw, Mapping):
        items = list(raw.items())[:6]
        return "{" + ", ".join(f"{k!r}: {describe_raw(v, depth + 1)}" for k, v in items) + "}"
    if isinstance(raw, (list, tuple)):
        inner = ", ".join(describe_raw(v, depth + 1) for v in list(raw)[:4])
        more = ", ..." if len(raw) > 4 else ""
        return ("[" if isinstance(raw, list) else "(") + inner + more + ("]" if isinstance(raw, list) else ")")
    return type(raw).__name__


def load_error(path: str | os.PathLike, fmt: str, exc: BaseException, hint: str = "") -> ModelError:
    """A ModelError naming the file, the format tried and the underlying error."""
    msg = f"{os.fspath(path)}: cannot load it as a {fmt} model ({type(exc).__name__}: {_first_line(exc)})"
    return ModelError(msg + (f"; {hint}" if hint else ""))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    line = text[0] if text else ""
    return line[:300]


def check_file(path: str | os.PathLike, fmt: str) -> str:
    """Return ``path`` as str if it is a non-empty regular file, else ModelError."""
    p = os.fspath(path)
    if not os.path.exists(p):
        raise ModelError(f"{p}: no such model file")
    if not os.path.isfile(p):
        raise ModelError(f"{p}: not a file (expected a {fmt} model)")
    if os.path.getsize(p) == 0:
        raise ModelError(f"{p}: the file is empty (expected a {fmt} model)")
    return p


def probe_input(
    batch: int, input_size: tuple[int, int], device: "torch.device", dtype: "torch.dtype"
) -> "torch.Tensor":
    """A grey ``(batch, 3, H, W)`` image (0.5 everywhere), the letterbox padding colour."""
    import torch

    return torch.full((batch, 3, *input_size), 0.5, device=device, dtype=dtype)


def run_probe(
    fn: Callable[["torch.Tensor"], Any],
    *,
    batch: int,
    input_size: tuple[int, int],
    device: "torch.device",
    dtype: "torch.dtype",
    what: str,
) -> Any:
    """Run ``fn`` once on a grey batch; wrap failures in a ModelError that says what to try."""
    import torch

    x = probe_input(batch, input_size, device, dtype)
    try:
        with torch.inference_mode():
            raw = fn(x)
    except ModelError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure of a foreign network is reported
        raise ModelError(
            f"{what}: a test run on a {tuple(x.shape)} {str(dtype).removeprefix('torch.')} input "
            f"failed ({type(exc).__name__}: {_first_line(exc)}); check input_size (the model may need "
            "another size) and dtype"
        ) from exc
    return raw


def is_oom(exc: BaseException) -> bool:
    """Whether ``exc`` is an out-of-memory error from PyTorch, onnxruntime or TensorRT."""
    import torch

    if isinstance(exc, torch.cuda.OutOfMemoryError):
        return True
    text = str(exc).lower()
    return isinstance(exc, (RuntimeError, MemoryError)) and (
        "out of memory" in text or "failed to allocate" in text or "cudaerrormemoryallocation" in text
    )
