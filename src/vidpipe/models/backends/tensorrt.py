"""TensorRT engines (``.engine`` / ``.plan``) through the TensorRT 10 Python API.

UNVERIFIED: the ``tensorrt`` package cannot be installed on the machines vidpipe is developed and
tested on, so this backend has never run there. It is written against the documented TensorRT 10
API (``num_io_tensors``/``get_tensor_name``, ``set_input_shape``, ``set_tensor_address``,
``execute_async_v3``) and is imported only when a ``.engine``/``.plan`` file is loaded; without the
package the loader raises :class:`~vidpipe.errors.BackendUnavailableError` with an install hint
(``vidpipe doctor`` reports the same).

How it runs: one execution context; the input and every output are torch CUDA tensors whose
``data_ptr`` is given to ``set_tensor_address``; the engine is enqueued on torch's current CUDA
stream, so nothing is copied and nothing synchronises the host. Output shapes come from the
context after ``set_input_shape`` (engines whose output size depends on the data are rejected).
A fixed-batch engine gets exactly that batch (padded/split); a dynamic one is limited to the max
of its optimisation profile 0 (``info.max_batch``). Ultralytics engines, which prefix the engine
with ``<int32 length><JSON metadata>``, give their ``names``/``imgsz``/``stride``.

Engines are specific to the GPU model and the TensorRT version that built them.
"""

from __future__ import annotations

import json
import logging
import os
from typing import TYPE_CHECKING, Any

from vidpipe._lazy import optional_import
from vidpipe.errors import ModelError
from vidpipe.models.backends.batching import run_batched, run_fixed_batch
from vidpipe.models.backends.build import ModelMetadata, choose_input_size, describe
from vidpipe.models.backends.common import (
    check_batch,
    check_file,
    check_image_shape,
    load_error,
)
from vidpipe.models.base import Model, ModelInfo

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

INSTALL = "pip install tensorrt (NVIDIA; Linux or Windows with a CUDA GPU, matching the CUDA version)"
_TRT_TO_TORCH = {
    "FLOAT": "float32",
    "HALF": "float16",
    "BF16": "bfloat16",
    "INT32": "int32",
    "INT64": "int64",
    "INT8": "int8",
    "UINT8": "uint8",
    "BOOL": "bool",
}


def import_tensorrt() -> Any:
    return optional_import("tensorrt", purpose="Running TensorRT engines", install=INSTALL)


def split_ultralytics_header(data: bytes) -> tuple[dict, bytes]:
    """``(metadata, engine bytes)``: strips an Ultralytics ``<int32 len><JSON>`` prefix if present."""
    if len(data) > 8:
        n = int.from_bytes(data[:4], "little", signed=True)
        if 2 <= n <= min(len(data) - 4, 1 << 20) and data[4:5] == b"{":
            try:
                meta = json.loads(data[4 : 4 + n].decode("utf-8"))
                if isinstance(meta, dict):
                    return meta, data[4 + n :]
            except (UnicodeDecodeError, ValueError):
                pass
    return {}, data


def _torch_dtype(trt_dtype: Any, what: str) -> "torch.dtype":
    import torch

    name = _TRT_TO_TORCH.get(getattr(trt_dtype, "name", str(trt_dtype).rsplit(".", 1)[-1]))
    if name is None:
        raise ModelError(f"{what}: unsupported TensorRT tensor type {trt_dtype}")
    return getattr(torch, name)


class TrtRunner:
    """Enqueues one TensorRT execution context on torch's current CUDA stream."""

    def __init__(self, engine: Any, *, trt: Any, device: "torch.device", what: str) -> None:
        self.engine = engine
        self.context = engine.create_execution_context()
        if self.context is None:
            raise ModelError(f"{what}: TensorRT could not create an execution context (out of GPU memory?)")
        self.device = device
        self.what = what
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        inputs = [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        if len(inputs) != 1:
            raise ModelError(f"{what}: the engine has {len(inputs)} inputs ({', '.join(inputs)}); vidpipe feeds one")
        self.input_name = inputs[0]
        self.input_dtype = _torch_dtype(engine.get_tensor_dtype(self.input_name), what)
        self.outputs = [(n, _torch_dtype(engine.get_tensor_dtype(n), what)) for n in names if n not in inputs]

    def __call__(self, x: "torch.Tensor") -> Any:
        import torch

        x = x.contiguous()
        ctx = self.context
        if not ctx.set_input_shape(self.input_name, tuple(x.shape)):
            raise ModelError(f"{self.what}: the engine does not accept an input of shape {tuple(x.shape)}")
        ctx.set_tensor_address(self.input_name, x.data_ptr())
        outs = []
        for name, dtype in self.outputs:
            shape = tuple(ctx.get_tensor_shape(name))
            if any(d < 0 for d in shape):
                raise ModelError(f"{self.what}: output {name!r} has a data-dependent shape {shape}; not supported")
            t = torch.empty(shape, dtype=dtype, device=self.device)
            ctx.set_tensor_address(name, t.data_ptr())
            outs.append(t)
        stream = torch.cuda.current_stream(self.device)
        if not ctx.execute_async_v3(stream.cuda_stream):
            raise ModelError(f"{self.what}: TensorRT execute_async_v3 failed for input {tuple(x.shape)}")
        if len(outs) == 1:
            return outs[0]
        return {name: t for (name, _), t in zip(self.outputs, outs)}


class TensorRTModel(Model):
    """A deserialised TensorRT engine (unverified backend, see the module docstring).

    ``forward(x)``: ``x`` is ``(B, 3, H, W)`` on ``self.device`` (CUDA), converted to the engine's
    input type; returns the output tensor or a dict by output name, enqueued on the current stream.
    """

    def __init__(self, runner: TrtRunner, *, info: ModelInfo, device: "torch.device") -> None:
        self.runner = runner
        self.info = info
        self.device = device
        self.dtype = runner.input_dtype

    def forward(self, x: "torch.Tensor") -> Any:
        check_batch(x, self)
        if x.dtype != self.dtype:
            x = x.to(self.dtype)
        return run_batched(self.runner, x, self.info)


def _metadata(engine: Any, runner: TrtRunner, header: dict, path: str) -> ModelMetadata:
    shape = list(engine.get_tensor_shape(runner.input_name))
    check_image_shape([d if d >= 0 else None for d in shape], path=path, fmt="TensorRT")
    b, h, w = shape[0], shape[2], shape[3]
    max_batch = None
    if b < 0:
        try:
            max_batch = int(engine.get_tensor_profile_shape(runner.input_name, 0)[2][0])
        except Exception:  # noqa: BLE001 - no profile information: leave unbounded
            max_batch = None
    size = header.get("imgsz")
    if isinstance(size, int):
        size = (size, size)
    elif isinstance(size, (list, tuple)) and len(size) == 2:
        size = (int(size[0]), int(size[1]))
    else:
        size = None
    fixed = h > 0 and w > 0
    stride = header.get("stride")
    return ModelMetadata(
        names=header.get("names"),
        input_size=(h, w) if fixed else size,
        fixed_size=fixed,
        batch=b if b > 0 else None,
        max_batch=max_batch,
        stride=int(stride) if isinstance(stride, (int, float)) else None,
    )


def load_tensorrt(
    path: str | os.PathLike,
    *,
    device: Any = "auto",
    dtype: Any = None,
    input_size: Any = None,
    names: Any = None,
    head: str | None = None,
) -> TensorRTModel:
    """Deserialise a TensorRT engine onto a CUDA ``device`` and describe it (unverified, see module doc).

    ``dtype`` is ignored: the engine's input type decides (build the engine with FP16 enabled).
    """
    import torch

    from vidpipe.device import resolve_device

    p = check_file(path, "TensorRT")
    trt = import_tensorrt()
    dev = resolve_device(device)
    if dev.type != "cuda":
        raise ModelError(f"{p}: TensorRT engines run only on a CUDA device, not on {dev}")
    with open(p, "rb") as f:
        header, blob = split_ultralytics_header(f.read())
    trt_logger = trt.Logger(trt.Logger.WARNING)
    trt.init_libnvinfer_plugins(trt_logger, "")
    try:
        with torch.cuda.device(dev):
            engine = trt.Runtime(trt_logger).deserialize_cuda_engine(blob)
    except Exception as exc:  # noqa: BLE001
        raise load_error(p, "TensorRT", exc) from exc
    if engine is None:
        raise ModelError(
            f"{p}: TensorRT {trt.__version__} cannot deserialise this engine: not an engine, or built for "
            "another GPU or TensorRT version; rebuild it on this machine (e.g. trtexec --onnx=... --fp16)"
        )
    runner = TrtRunner(engine, trt=trt, device=dev, what=p)
    meta = _metadata(engine, runner, header, p)
    if dtype is not None:
        logger.info("%s: dtype=%r ignored; the engine takes %s input", p, dtype, runner.input_dtype)
    info, _ = describe(
        runner if meta.batch is None else (lambda x: run_fixed_batch(runner, x, meta.batch)),
        name=os.path.splitext(os.path.basename(p))[0],
        fmt="tensorrt",
        what=p,
        device=dev,
        dtype=runner.input_dtype,
        input_size=choose_input_size(input_size, meta, what=p),
        names=names,
        head=head,
        meta=meta,
    )
    model = TensorRTModel(runner, info=info, device=dev)
    logger.info("loaded TensorRT engine %s (head %s, %d classes)", p, info.head, info.num_classes)
    return model
