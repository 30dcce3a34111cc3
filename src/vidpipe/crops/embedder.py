"""The model an :class:`~vidpipe.crops.stage.EmbedStage` runs on crops: :func:`load_embedder`.

Any of these plugs in:

- a ``torch.nn.Module`` (or any callable on tensors) taking ``(N, 3, h, w)`` float RGB crops in
  [0, 1] (normalise inside the model, or give the stage ``mean``/``std``) and returning
  ``(N, D)`` (``(N, D, 1, 1)`` is flattened);
- a TorchScript archive (``.pt``/``.torchscript``) or a torch.export archive (``.pt2``), loaded as
  vidpipe loads detectors (a pickled ``torch.save`` module is refused: it runs arbitrary code);
- an ONNX file, through onnxruntime with I/O binding (:class:`vidpipe.models.backends.onnx.OrtRunner`:
  CUDA tensors stay on the GPU where onnxruntime-gpu is installed); only when onnxruntime is
  installed (``pip install onnxruntime-gpu``).

:class:`ColorGridEmbedder` is the built-in default: the mean colour of each cell of a small grid
over the crop (4 x 2 cells: 24 numbers). It is a plain appearance descriptor, not a learned ReID
model: it tells a red jacket from a blue one, not two people in similar clothes.
"""

from __future__ import annotations

import logging
import os
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vidpipe.errors import ConfigError, ModelError

if TYPE_CHECKING:
    import torch

__all__ = ["ColorGridEmbedder", "Embedder", "load_embedder"]

logger = logging.getLogger(__name__)


def _module_base() -> type:
    import torch

    return torch.nn.Module


class ColorGridEmbedder(_module_base()):  # type: ignore[misc]
    """Mean RGB of each cell of a ``grid`` (rows, columns) over the crop: ``(N, 3, h, w)`` ->
    ``(N, 3 * rows * columns)`` float32 (channel-major). Deterministic, no weights."""

    def __init__(self, grid: tuple[int, int] = (4, 2)) -> None:
        super().__init__()
        if len(grid) != 2 or min(int(g) for g in grid) < 1:
            raise ConfigError(f"grid={grid!r}; expected (rows, columns) >= 1")
        self.grid = (int(grid[0]), int(grid[1]))

    def forward(self, x: "torch.Tensor") -> "torch.Tensor":
        import torch.nn.functional as F

        return F.adaptive_avg_pool2d(x.float(), self.grid).flatten(1)


@dataclass(frozen=True)
class Embedder:
    """A loaded embedding model: call it on ``(N, 3, h, w)`` crops of :attr:`dtype` on
    :attr:`device`; it returns ``(N, D)``."""

    run: Any
    name: str
    device: "torch.device"
    dtype: "torch.dtype"

    def __call__(self, x: "torch.Tensor") -> "torch.Tensor":
        import torch

        with torch.inference_mode():
            out = self.run(x.to(self.dtype))
        if isinstance(out, dict) and len(out) == 1:
            out = next(iter(out.values()))
        if isinstance(out, (tuple, list)) and len(out) == 1:
            out = out[0]
        if not isinstance(out, torch.Tensor):
            raise ModelError(f"embedding model {self.name}: returned {type(out).__name__}; expected one (N, D) tensor")
        if out.ndim > 2 and all(s == 1 for s in out.shape[2:]):
            out = out.flatten(1)
        if out.ndim != 2 or out.shape[0] != x.shape[0]:
            raise ModelError(
                f"embedding model {self.name}: returned shape {tuple(out.shape)} for {x.shape[0]} crops; "
                "expected (N, D)"
            )
        return out


def load_embedder(
    model: "str | os.PathLike | Any | None" = None, *, device: "str | torch.device" = "cpu", dtype: Any = None
) -> Embedder:
    """An :class:`Embedder` on ``device`` from a module, a callable or a model file (see the module doc).

    Args:
        model: ``None`` (the built-in :class:`ColorGridEmbedder`), an ``nn.Module`` / callable,
            or a path: ``.onnx``, ``.pt``/``.torchscript`` (TorchScript), ``.pt2`` (torch.export).
        device: where the crops are (the run's device).
        dtype: the crops' dtype for the model (default: the module's parameter dtype, float32
            without parameters; an ONNX model's input type).

    Raises:
        ModelError: a file that cannot be loaded; ConfigError: something that is not a model;
        BackendUnavailableError: an ONNX file without onnxruntime installed.
    """
    import torch

    from vidpipe.device import resolve_device

    dev = resolve_device(device)
    if model is None:
        model = ColorGridEmbedder()
    if isinstance(model, (str, os.PathLike)):
        return _load_file(os.fspath(model), dev, dtype)
    if isinstance(model, torch.nn.Module):
        model = model.eval().to(dev)
        return Embedder(model, type(model).__name__, dev, _dtype(model, dtype))
    if callable(model):
        return Embedder(model, getattr(model, "__name__", type(model).__name__), dev, _dtype(None, dtype))
    raise ConfigError(f"embedding model: {type(model).__name__} is not a torch module, a callable or a model path")


def _dtype(module: Any, dtype: Any) -> "torch.dtype":
    import torch

    if dtype is not None:
        if isinstance(dtype, torch.dtype):
            return dtype
        names = {"fp16": torch.float16, "fp32": torch.float32, "bf16": torch.bfloat16}
        if dtype not in names:
            raise ConfigError(f"dtype={dtype!r}; expected 'fp16', 'fp32', 'bf16' or a torch.dtype")
        return names[dtype]
    if module is not None:
        for p in module.parameters():
            if p.dtype.is_floating_point:
                return p.dtype
    return torch.float32


def _load_file(path: str, dev: "torch.device", dtype: Any) -> Embedder:
    import torch

    from vidpipe.models.backends.common import check_file, load_error

    name = os.path.basename(path)
    ext = os.path.splitext(path)[1].lower()
    if ext == ".onnx":
        return _load_onnx(path, dev, dtype)
    if ext not in (".pt", ".pth", ".torchscript", ".pt2", ".ts", ".jit"):
        raise ModelError(
            f"{path}: unknown embedding model format {ext or '(no extension)'}; use .onnx, "
            ".pt/.torchscript (TorchScript) or .pt2 (torch.export)"
        )
    from vidpipe.models.backends.torchscript import archive_kind

    p = check_file(path, "PyTorch")
    kind = archive_kind(p)
    try:
        if kind == "torchscript":
            with warnings.catch_warnings():  # torch >= 2.10 marks TorchScript deprecated
                warnings.simplefilter("ignore", FutureWarning)
                module = torch.jit.load(p, map_location=dev).eval()
        elif kind == "export":
            module = torch.export.load(p).module().to(dev)
        else:
            raise ModelError(
                f"{p}: not a TorchScript or torch.export archive ({kind}); vidpipe does not load pickled modules "
                "(they run arbitrary code): export it with torch.jit.script/trace or torch.export"
            )
    except ModelError:
        raise
    except Exception as exc:  # noqa: BLE001 - torch raises many types for bad files
        raise load_error(p, "PyTorch", exc, "is it a TorchScript or torch.export file?") from exc
    return Embedder(module, name, dev, _dtype(module, dtype))


def _load_onnx(path: str, dev: "torch.device", dtype: Any) -> Embedder:
    import torch

    from vidpipe.models.backends.common import check_file, load_error
    from vidpipe.models.backends.onnx import OrtRunner, _provider_list, _torch_dtype, import_onnxruntime

    p = check_file(path, "ONNX")
    ort = import_onnxruntime()
    options = ort.SessionOptions()
    options.log_severity_level = 3
    try:
        session = ort.InferenceSession(p, sess_options=options, providers=_provider_list(ort, dev, "auto"))
    except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own exception types
        raise load_error(p, "ONNX", exc, "is it an ONNX model file?") from exc
    inputs = session.get_inputs()
    if len(inputs) != 1:
        raise ModelError(f"{p}: the embedding model has {len(inputs)} inputs; vidpipe feeds one batch of crops")
    in_dtype = _torch_dtype(inputs[0].type, p)
    io_device = dev
    if dev.type == "cuda" and session.get_providers()[0] not in ("CUDAExecutionProvider", "TensorrtExecutionProvider"):
        io_device = torch.device("cpu")
        logger.warning("%s: onnxruntime cannot run on %s here; the embedder runs on the CPU with host copies", p, dev)
    runner = OrtRunner(session, io_device=io_device, out_device=dev, what=p)
    if dtype is not None and _dtype(None, dtype) != in_dtype:
        logger.info("%s: the model takes %s input; dtype=%r ignored", p, in_dtype, dtype)
    return Embedder(runner, os.path.basename(p), dev, in_dtype)
