"""Model backends behind one interface (:class:`vidpipe.models.base.Model`).

=============  ==================================  ============================================
suffix         loader                              runs with
=============  ==================================  ============================================
.torchscript   :func:`load_torchscript`            torch.jit (TorchScript archive)
.pt / .pth     :func:`load_pt`                     TorchScript or torch.export archive (by zip
                                                   contents; pickled checkpoints are refused)
.pt2           :func:`load_exported`               torch.export.load
.onnx          :func:`load_onnx`                   onnxruntime (CUDA EP + I/O binding, else CPU)
.engine/.plan  :func:`load_tensorrt`               TensorRT 10 (optional, unverified)
=============  ==================================  ============================================

Every loader has the signature ``load_xxx(path, *, device="auto", dtype=None, input_size=None,
names=None, head=None) -> Model``; :func:`from_module` wraps an ``nn.Module`` built in Python.
Each runs the model once on a grey image to check it and to detect its output head (see
``vidpipe.models.heads.detect``). ``MODEL_LOADERS`` maps suffixes to loaders; ``ZOO_LOADERS`` the
same adapted to ``vidpipe.models.zoo``'s ``(path, LoadRequest)`` signature.

Importing this package imports neither torch nor any optional package.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vidpipe.models.backends.accel import accelerate
from vidpipe.models.backends.availability import BackendStatus, backend_status
from vidpipe.models.backends.batching import OomBackoff
from vidpipe.models.backends.common import check_finite, finite_flag
from vidpipe.models.backends.exported import load_exported
from vidpipe.models.backends.onnx import load_onnx
from vidpipe.models.backends.tensorrt import load_tensorrt
from vidpipe.models.backends.torch_module import TorchModel, from_module
from vidpipe.models.backends.torchscript import load_pt, load_torchscript

if TYPE_CHECKING:
    from vidpipe.models.base import Model

__all__ = [
    "MODEL_LOADERS",
    "ZOO_LOADERS",
    "BackendStatus",
    "OomBackoff",
    "TorchModel",
    "accelerate",
    "backend_status",
    "check_finite",
    "finite_flag",
    "from_module",
    "load_exported",
    "load_onnx",
    "load_pt",
    "load_tensorrt",
    "load_torchscript",
]

#: File suffix (lower case, with the dot) -> ``loader(path, *, device, dtype, input_size, names, head)``.
MODEL_LOADERS: dict[str, Callable[..., "Model"]] = {
    ".torchscript": load_torchscript,
    ".pt": load_pt,
    ".pth": load_pt,
    ".pt2": load_exported,
    ".onnx": load_onnx,
    ".engine": load_tensorrt,
    ".plan": load_tensorrt,
}


def _for_zoo(loader: Callable[..., "Model"]) -> Callable[[Path, Any], "Model"]:
    """Adapt a loader to ``zoo.LOADERS``' ``(path, LoadRequest)`` (``names``/``head`` if it has them)."""

    def load(path: Path, req: Any) -> "Model":
        return loader(
            path,
            device=req.device,
            dtype=req.dtype,
            input_size=req.input_size,
            names=getattr(req, "names", None),
            head=getattr(req, "head", None),
        )

    load.__name__ = f"zoo_{loader.__name__}"
    load.__doc__ = loader.__doc__
    return load


#: The same loaders with ``vidpipe.models.zoo``'s ``(path, LoadRequest) -> Model`` signature.
ZOO_LOADERS: dict[str, Callable[[Path, Any], "Model"]] = {s: _for_zoo(f) for s, f in MODEL_LOADERS.items()}
