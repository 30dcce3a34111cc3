"""ONNX models through onnxruntime, with I/O binding so tensors are not copied.

- Provider: on a CUDA device the CUDA execution provider (``providers="auto"``/``"cuda"``), or
  TensorRT's (``"tensorrt"``, builds an engine at load: slow start); input and output are bound
  to torch CUDA tensors by ``data_ptr`` (``IOBinding``), so frames never visit the host. When
  onnxruntime has no CUDA provider (the CPU-only ``onnxruntime`` wheel, or CUDA libraries
  missing), the model runs on the CPU provider with one host copy each way and a warning;
  ``model.provider`` says which ran. On the CPU device, torch CPU tensors are bound the same way.
- Input: exactly one ``(B, 3, H, W)`` float16/float32 image input; its element type fixes
  ``model.dtype`` (export with ``half=True`` for FP16). Static ``H``/``W`` fix the input size,
  symbolic ones make ``info.dynamic_shape`` True (any multiple of the stride runs); a
  static batch ``b`` means exactly ``b`` rows per call (``info.dynamic_batch`` False,
  ``info.max_batch == b``): other batch sizes are padded/split here.
- Output: one output -> that tensor; several -> ``{output name: tensor}``. Output shapes are
  learnt per input shape on the first call (onnxruntime allocates), then torch tensors are
  preallocated and bound. Models whose output size depends on the data (embedded NMS) are not
  supported.
- Metadata (``metadata_props``, as Ultralytics writes them): ``names`` (a Python dict literal),
  ``imgsz``, ``stride``.

The CUDA paths need ``onnxruntime-gpu`` and are exercised only on a GPU host; the CPU path
(the same binding code with ``device_type="cpu"``) is tested in CI.
"""

from __future__ import annotations

import ast
import logging
import os
from typing import TYPE_CHECKING, Any, Literal

from vidpipe._lazy import optional_import
from vidpipe._validate import check_choice
from vidpipe.errors import ModelError
from vidpipe.models.backends.batching import run_batched, run_fixed_batch
from vidpipe.models.backends.build import ModelMetadata, choose_input_size, describe
from vidpipe.models.backends.common import (
    check_batch,
    check_file,
    check_image_shape,
    load_error,
    resolve_dtype,
)
from vidpipe.models.base import Model, ModelInfo

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

Providers = Literal["auto", "cuda", "tensorrt", "cpu"]
PROVIDERS = ("auto", "cuda", "tensorrt", "cpu")
INSTALL = "pip install onnxruntime-gpu (CUDA) or onnxruntime (CPU only)"

_ONNX_TYPES = {
    "tensor(float)": "float32",
    "tensor(float16)": "float16",
    "tensor(double)": "float64",
    "tensor(bfloat16)": "bfloat16",
    "tensor(int64)": "int64",
    "tensor(int32)": "int32",
    "tensor(int8)": "int8",
    "tensor(uint8)": "uint8",
    "tensor(bool)": "bool",
}


def import_onnxruntime() -> Any:
    return optional_import("onnxruntime", purpose="Running ONNX models", install=INSTALL)


def _torch_dtype(onnx_type: str, what: str) -> "torch.dtype":
    import torch

    name = _ONNX_TYPES.get(onnx_type)
    if name is None:
        raise ModelError(f"{what}: unsupported ONNX tensor type {onnx_type}")
    return getattr(torch, name)


def _numpy_dtype(dtype: "torch.dtype") -> Any:
    """The numpy element type onnxruntime's binding expects for a torch dtype."""
    import numpy as np

    name = str(dtype).removeprefix("torch.")
    if name == "bfloat16":
        raise ModelError("bfloat16 ONNX inputs/outputs cannot be bound; export the model in float16 or float32")
    return np.dtype(name)


class OrtRunner:
    """Runs an onnxruntime session on torch tensors through I/O binding (see module doc)."""

    _MAX_SHAPES = 64

    def __init__(self, session: Any, *, io_device: "torch.device", out_device: "torch.device", what: str) -> None:
        self.session = session
        self.io_device = io_device  # where onnxruntime reads and writes (cuda or cpu)
        self.out_device = out_device  # where the caller's tensors live
        self.what = what
        self.input_name = session.get_inputs()[0].name
        self.outputs = [(o.name, _torch_dtype(o.type, what)) for o in session.get_outputs()]
        self._np_out = [_numpy_dtype(dt) for _, dt in self.outputs]
        self._shapes: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
        self._kind = "cuda" if io_device.type == "cuda" else "cpu"
        self._index = io_device.index or 0

    def _bind_input(self, binding: Any, x: "torch.Tensor") -> None:
        binding.bind_input(
            self.input_name, self._kind, self._index, _numpy_dtype(x.dtype), tuple(x.shape), x.data_ptr()
        )

    def _learn_shapes(self, x: "torch.Tensor") -> list[tuple[int, ...]]:
        binding = self.session.io_binding()
        self._bind_input(binding, x)
        for name, _ in self.outputs:
            binding.bind_output(name, self._kind, self._index)
        self.session.run_with_iobinding(binding)
        shapes = [tuple(v.shape()) for v in binding.get_outputs()]
        if len(self._shapes) >= self._MAX_SHAPES:
            self._shapes.clear()
        self._shapes[tuple(x.shape)] = shapes
        return shapes

    def __call__(self, x: "torch.Tensor") -> Any:
        import torch

        x = x.to(self.io_device).contiguous()
        if self._kind == "cuda":
            torch.cuda.current_stream(self.io_device).synchronize()  # x is complete before ORT reads it
        shapes = self._shapes.get(tuple(x.shape)) or self._learn_shapes(x)
        outs = [torch.empty(s, dtype=dt, device=self.io_device) for s, (_, dt) in zip(shapes, self.outputs)]
        binding = self.session.io_binding()
        self._bind_input(binding, x)
        for (name, _), np_dtype, t in zip(self.outputs, self._np_out, outs):
            binding.bind_output(name, self._kind, self._index, np_dtype, tuple(t.shape), t.data_ptr())
        self.session.run_with_iobinding(binding)  # synchronous: outputs are ready on return
        if self.out_device != self.io_device:
            outs = [t.to(self.out_device, non_blocking=False) for t in outs]
        if len(outs) == 1:
            return outs[0]
        return {name: t for (name, _), t in zip(self.outputs, outs)}


class OnnxModel(Model):
    """An ONNX network run by onnxruntime.

    ``forward(x)``: ``x`` is ``(B, 3, H, W)`` in [0, 1] on ``self.device`` (converted to
    ``self.dtype``, the model's input type); returns the output tensor, or a dict of them by
    output name, on ``self.device``. ``provider`` names the execution provider that runs it.
    """

    def __init__(self, runner: OrtRunner, *, info: ModelInfo, device: "torch.device", dtype: "torch.dtype") -> None:
        self.runner = runner
        self.session = runner.session
        self.provider: str = runner.session.get_providers()[0]
        self.info = info
        self.device = device
        self.dtype = dtype

    def forward(self, x: "torch.Tensor") -> Any:
        check_batch(x, self)
        if x.dtype != self.dtype:
            x = x.to(self.dtype)
        return run_batched(self.runner, x, self.info)

    def __repr__(self) -> str:
        i = self.info
        return (
            f"OnnxModel(name={i.name!r}, head={i.head!r}, classes={i.num_classes}, input={i.input_size}, "
            f"device={self.device}, dtype={str(self.dtype).removeprefix('torch.')}, provider={self.provider})"
        )


def _provider_list(ort: Any, device: "torch.device", providers: str) -> list[Any]:
    if device.type != "cuda" or providers == "cpu":
        return ["CPUExecutionProvider"]
    available = ort.get_available_providers()
    cuda = ("CUDAExecutionProvider", {"device_id": device.index or 0})
    chosen: list[Any] = []
    if providers == "tensorrt":
        if "TensorrtExecutionProvider" in available:
            chosen.append(("TensorrtExecutionProvider", {"device_id": device.index or 0, "trt_fp16_enable": True}))
        else:
            logger.warning("onnxruntime has no TensorRT provider here; using CUDA")
    if "CUDAExecutionProvider" in available:
        chosen.append(cuda)
    return chosen + ["CPUExecutionProvider"]


def _metadata(session: Any, path: str) -> ModelMetadata:
    inp = session.get_inputs()[0]
    shape = list(inp.shape)
    check_image_shape([d if isinstance(d, int) else None for d in shape], path=path, fmt="ONNX")
    props = session.get_modelmeta().custom_metadata_map or {}
    size = None
    if "imgsz" in props:
        try:
            v = ast.literal_eval(props["imgsz"])
            size = (int(v), int(v)) if isinstance(v, int) else (int(v[0]), int(v[1]))
        except (ValueError, SyntaxError, TypeError, IndexError):
            logger.warning("%s: ignoring unreadable imgsz metadata %r", path, props["imgsz"])
    b, h, w = shape[0], shape[2], shape[3]
    fixed = isinstance(h, int) and isinstance(w, int) and h > 0 and w > 0
    try:
        stride = int(props["stride"]) if "stride" in props else None
    except ValueError:
        stride = None
    return ModelMetadata(
        names=props.get("names"),
        input_size=(h, w) if fixed else size,
        fixed_size=fixed,
        dynamic_shape=not isinstance(h, int) and not isinstance(w, int),
        batch=b if isinstance(b, int) and b > 0 else None,
        stride=stride,
    )


def load_onnx(
    path: str | os.PathLike,
    *,
    device: Any = "auto",
    dtype: Any = None,
    input_size: Any = None,
    names: Any = None,
    head: str | None = None,
    providers: Providers = "auto",
) -> OnnxModel:
    """Load an ONNX model with onnxruntime and describe it (see the module docstring)."""
    from vidpipe.device import resolve_device

    check_choice("providers", providers, PROVIDERS)
    p = check_file(path, "ONNX")
    ort = import_onnxruntime()
    dev = resolve_device(device)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    try:
        session = ort.InferenceSession(p, sess_options=options, providers=_provider_list(ort, dev, providers))
    except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own exception types
        raise load_error(p, "ONNX", exc, "is it an ONNX model file?") from exc
    inputs = session.get_inputs()
    if len(inputs) != 1:
        listed = ", ".join(f"{i.name}{list(i.shape)}" for i in inputs)
        raise ModelError(f"{p}: the ONNX model has {len(inputs)} inputs ({listed}); vidpipe feeds one image batch")
    model_dtype = _torch_dtype(inputs[0].type, p)
    if not model_dtype.is_floating_point:
        raise ModelError(f"{p}: the ONNX model takes {inputs[0].type} input; vidpipe feeds float images in [0, 1]")
    if dtype is not None and resolve_dtype(dtype, dev) != model_dtype:
        logger.info("%s: the model takes %s input; dtype=%r ignored (re-export to change it)", p, model_dtype, dtype)
    meta = _metadata(session, p)
    running = session.get_providers()[0]
    io_device = dev
    if dev.type == "cuda" and running not in ("CUDAExecutionProvider", "TensorrtExecutionProvider"):
        import torch

        io_device = torch.device("cpu")
        logger.warning(
            "%s: onnxruntime cannot run on %s here (providers: %s); running on the CPU with host copies. "
            "Install onnxruntime-gpu for GPU inference",
            p, dev, ", ".join(ort.get_available_providers()),
        )
    runner = OrtRunner(session, io_device=io_device, out_device=dev, what=p)
    fixed = meta.batch

    def run(x: "torch.Tensor") -> Any:
        return runner(x) if fixed is None else run_fixed_batch(runner, x, fixed)

    info, _ = describe(
        run,
        name=os.path.splitext(os.path.basename(p))[0],
        fmt="onnx",
        what=p,
        device=dev,
        dtype=model_dtype,
        input_size=choose_input_size(input_size, meta, what=p),
        names=names,
        head=head,
        meta=meta,
    )
    model = OnnxModel(runner, info=info, device=dev, dtype=model_dtype)
    logger.info("loaded %r", model)
    return model
