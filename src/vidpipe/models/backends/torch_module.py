"""PyTorch backend: any callable ``nn.Module`` (eager, TorchScript or a torch.export graph).

:func:`from_module` wraps a module built in Python; the TorchScript and torch.export loaders
(``torchscript.py``, ``exported.py``) wrap what they load with the same :class:`TorchModel`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from vidpipe.models.backends.batching import run_batched, run_fixed_batch
from vidpipe.models.backends.build import ModelMetadata, choose_input_size, describe
from vidpipe.models.backends.common import check_batch, resolve_dtype
from vidpipe.models.base import Model, ModelFormat, ModelInfo

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)


class TorchModel(Model):
    """A PyTorch network on one device and dtype.

    ``forward(x)``: ``x`` is ``(B, 3, H, W)`` in [0, 1] on ``self.device`` (converted to
    ``self.dtype`` if needed); runs under ``torch.inference_mode``; returns the module's output
    as is (tensors on ``self.device``). A fixed-batch model (``info.dynamic_batch`` False) gets
    exactly ``info.max_batch`` rows per call, a dynamic one at most ``info.max_batch`` (when set):
    other batch sizes are padded or split here.
    """

    def __init__(self, module: Any, *, info: ModelInfo, device: "torch.device", dtype: "torch.dtype") -> None:
        self.module = module
        self.info = info
        self.device = device
        self.dtype = dtype

    def forward(self, x: "torch.Tensor") -> Any:
        import torch

        check_batch(x, self)
        if x.dtype != self.dtype:
            x = x.to(self.dtype)
        with torch.inference_mode():
            return run_batched(self.module, x, self.info)

    def __repr__(self) -> str:
        i = self.info
        return (
            f"TorchModel(name={i.name!r}, format={i.format!r}, head={i.head!r}, classes={i.num_classes}, "
            f"input={i.input_size}, device={self.device}, dtype={str(self.dtype).removeprefix('torch.')})"
        )


def _set_eval(module: Any) -> None:
    try:
        module.eval()
    except (NotImplementedError, RuntimeError, AttributeError):
        pass  # torch.export graph modules refuse eval(); they are traced in eval mode already


def wrap_module(
    module: Any,
    *,
    fmt: ModelFormat,
    name: str,
    what: str,
    device: Any = "auto",
    dtype: Any = None,
    input_size: Any = None,
    names: Any = None,
    head: str | None = None,
    meta: ModelMetadata | None = None,
    convert: bool = True,
) -> TorchModel:
    """Move ``module`` to the device and dtype, probe it and describe it (see ``build.describe``).

    ``convert=False`` leaves the module's dtype alone (it must already match ``dtype``).
    """
    import torch

    from vidpipe.device import resolve_device

    meta = meta or ModelMetadata()
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, dev)
    size = choose_input_size(input_size, meta, what=what)
    if convert:
        module.to(dev)
        module.to(dt)
    _set_eval(module)

    def to_float32() -> None:
        module.to(torch.float32)

    fixed = meta.batch

    def run(x: "torch.Tensor") -> Any:
        return module(x) if fixed is None else run_fixed_batch(module, x, fixed)

    info, dt = describe(
        run,
        name=name,
        fmt=fmt,
        what=what,
        device=dev,
        dtype=dt,
        input_size=size,
        names=names,
        head=head,
        meta=meta,
        to_float32=to_float32 if convert else None,
    )
    model = TorchModel(module, info=info, device=dev, dtype=dt)
    logger.info("loaded %r", model)
    return model


def from_module(
    module: "torch.nn.Module",
    *,
    names: Any = None,
    input_size: Any = None,
    head: str | None = None,
    device: Any = "auto",
    dtype: Any = None,
    name: str | None = None,
    stride: int = 32,
    fixed_batch: int | None = None,
    dynamic_shape: bool = False,
) -> TorchModel:
    """Wrap an ``nn.Module`` built in Python as a vidpipe :class:`Model`.

    The module is moved to ``device`` and ``dtype`` in place (``dtype=None``: float16 on CUDA,
    float32 on the CPU) and put in eval mode. It must take ``(B, 3, H, W)`` RGB in [0, 1] and
    return an output one of the heads understands (see ``vidpipe.models.heads.detect``).

    Args:
        names: class names (a list, an ``{id: name}`` dict or a names file); default: COCO-80 for
            80 classes, the ids as text otherwise.
        input_size: ``(H, W)`` or one int (default 640).
        head: the output head; ``None`` detects it from a test run's output shapes.
        fixed_batch: the only batch size the module accepts, if any (others are padded/split).
        dynamic_shape: the module runs at any ``H``/``W`` that is a multiple of ``stride`` (lets the
            pipeline trim letterbox padding); default False.
    """
    import torch

    if not isinstance(module, torch.nn.Module) and not callable(module):
        from vidpipe.errors import ModelError

        raise ModelError(f"from_module needs a torch.nn.Module, got {type(module).__name__}")
    label = name or type(module).__name__
    meta = ModelMetadata(stride=stride, batch=fixed_batch, dynamic_shape=dynamic_shape)
    return wrap_module(
        module,
        fmt="torch",
        name=label,
        what=f"module {label}",
        device=device,
        dtype=dtype,
        input_size=input_size,
        names=names,
        head=head,
        meta=meta,
        convert=isinstance(module, torch.nn.Module),
    )
