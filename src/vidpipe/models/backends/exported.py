"""torch.export programs (``.pt2``, saved with ``torch.export.save``).

The program's input placeholder fixes what sizes it takes: a static batch dimension becomes a
fixed batch (``info.dynamic_batch`` False; other batch sizes are padded/split), static height and
width become the input size (a different ``input_size=`` is an error). A ``config.txt`` extra file
(JSON ``names``/``imgsz``/``stride``, as for TorchScript) is read when present.

The program's input dtype is part of the program (torch.export guards it): it decides
``model.dtype`` and a different ``dtype=`` is ignored (logged). Export the model in float16 (``.half()``
before ``torch.export.export``, with a float16 example input) to run it in FP16.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

from vidpipe.errors import ModelError
from vidpipe.models.backends.build import ModelMetadata
from vidpipe.models.backends.common import check_file, check_image_shape, load_error
from vidpipe.models.backends.torch_module import TorchModel, wrap_module
from vidpipe.models.backends.torchscript import parse_config

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)


def _input_value(program: "torch.export.ExportedProgram") -> Any:
    """The user input's example value (a FakeTensor: shape with SymInts for dynamic dims, dtype)."""
    user = list(program.graph_signature.user_inputs)
    if not user:
        return None
    for node in program.graph.nodes:
        if node.op == "placeholder" and node.name == user[0]:
            return node.meta.get("val")
    return None


def _upper_bound(program: "torch.export.ExportedProgram", dim: Any) -> int | None:
    try:
        bound = program.range_constraints[dim.node.expr].upper
        return int(bound) if bound is not None and bound < 2**31 else None
    except (AttributeError, KeyError, TypeError, ValueError):
        return None


def _metadata(program: "torch.export.ExportedProgram", config: ModelMetadata, path: str) -> ModelMetadata:
    val = _input_value(program)
    if val is None or not hasattr(val, "shape"):
        return config
    shape = list(val.shape)
    check_image_shape([d if isinstance(d, int) else None for d in shape], path=path, fmt="torch.export")
    b, _, h, w = shape
    fixed_size = isinstance(h, int) and isinstance(w, int)
    return ModelMetadata(
        names=config.names,
        input_size=(h, w) if fixed_size else config.input_size,
        fixed_size=fixed_size,
        dynamic_shape=not isinstance(h, int) and not isinstance(w, int),
        batch=b if isinstance(b, int) else None,
        max_batch=None if isinstance(b, int) else _upper_bound(program, b),
        stride=config.stride,
    )


def _on_device(program: Any, device: Any) -> Any:
    """The program with its parameters, buffers and constants moved to ``device`` (an exported
    program keeps the device it was exported on; ``module().to()`` misses its constants).

    Devices written into the graph itself (a ``torch.full(..., device="cpu")`` in ``forward``)
    cannot always be moved: export such a program on the device it will run on."""
    import torch

    from vidpipe.device import resolve_device

    dev = resolve_device(device)
    move = getattr(getattr(torch.export, "passes", None), "move_to_device_pass", None)
    if move is None:  # torch < 2.6: best effort
        return program
    return move(program, dev)


def load_exported(
    path: str | os.PathLike,
    *,
    device: Any = "auto",
    dtype: Any = None,
    input_size: Any = None,
    names: Any = None,
    head: str | None = None,
) -> TorchModel:
    """Load a ``torch.export`` program onto ``device`` (float16 on CUDA by default) and describe it."""
    import torch

    p = check_file(path, "torch.export")
    extra = {"config.txt": ""}
    try:
        program = torch.export.load(p, extra_files=extra)
        program = _on_device(program, device)
        module = program.module()
    except Exception as exc:  # noqa: BLE001 - torch raises many kinds on a bad archive
        raise load_error(p, "torch.export (.pt2)", exc, "was it saved with torch.export.save?") from exc
    meta = _metadata(program, parse_config(extra.get("config.txt")), p)
    val = _input_value(program)
    file_dtype = getattr(val, "dtype", None)
    if file_dtype is not None and file_dtype.is_floating_point:
        if dtype is not None:
            from vidpipe.models.backends.common import resolve_dtype

            if resolve_dtype(dtype, torch.device("cpu")) != file_dtype:
                logger.info("%s: the program was exported for %s input; dtype=%r ignored", p, file_dtype, dtype)
        dtype = file_dtype
    stem = os.path.splitext(os.path.basename(p))[0]
    try:
        return wrap_module(
            module,
            fmt="export",
            name=stem,
            what=p,
            device=device,
            dtype=dtype,
            input_size=input_size,
            names=names,
            head=head,
            meta=meta,
        )
    except ModelError as exc:
        if "device mismatch" in str(exc).lower():
            raise ModelError(
                f"{exc}; the program has a device written into its graph: export it on the device it "
                f"will run on ({device}), or load it with device='cpu'"
            ) from exc
        raise
