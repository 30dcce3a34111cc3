"""TorchScript archives (``.torchscript``, or a ``.pt`` that holds one) and ``.pt`` dispatch.

A TorchScript archive is a zip with ``code/`` and ``constants.pkl``; a torch.export archive has
``archive_format``; anything else saved with ``torch.save`` is a pickle (a state dict or a whole
module), which needs the Python classes that made it and may run arbitrary code when loaded, so
vidpipe does not load it: export it (TorchScript, ONNX, torch.export) or wrap the module with
:func:`vidpipe.models.backends.from_module`.

Ultralytics TorchScript exports carry ``config.txt`` (JSON with ``names``, ``imgsz``, ``stride``);
it is read when present.
"""

from __future__ import annotations

import json
import logging
import os
import warnings
import zipfile
from typing import Any, Literal

from vidpipe.errors import ModelError
from vidpipe.models.backends.build import ModelMetadata
from vidpipe.models.backends.common import check_file, load_error
from vidpipe.models.backends.torch_module import TorchModel, wrap_module

logger = logging.getLogger(__name__)

ArchiveKind = Literal["torchscript", "export", "pickle", "unknown"]


def archive_kind(path: str | os.PathLike) -> ArchiveKind:
    """What kind of PyTorch file ``path`` is, from its zip entries (no code is run)."""
    p = os.fspath(path)
    if not zipfile.is_zipfile(p):
        return "unknown"
    try:
        with zipfile.ZipFile(p) as z:
            entries = z.namelist()
    except (zipfile.BadZipFile, OSError):
        return "unknown"
    tails = {e.split("/", 1)[1] if "/" in e else e for e in entries}
    if "constants.pkl" in tails or any(t.startswith("code/") for t in tails):
        return "torchscript"
    if "archive_format" in tails or any(t.startswith("models/") for t in tails):
        return "export"
    if "data.pkl" in tails:
        return "pickle"
    return "unknown"


def parse_config(text: str | bytes | None) -> ModelMetadata:
    """Metadata from an Ultralytics-style ``config.txt`` JSON (``names``, ``imgsz``, ``stride``)."""
    if not text:
        return ModelMetadata()
    try:
        cfg = json.loads(text)
    except (ValueError, UnicodeDecodeError):
        logger.warning("ignoring model config.txt: not JSON")
        return ModelMetadata()
    if not isinstance(cfg, dict):
        return ModelMetadata()
    size = cfg.get("imgsz")
    if isinstance(size, int):
        size = (size, size)
    elif isinstance(size, (list, tuple)) and len(size) == 2:
        size = (int(size[0]), int(size[1]))
    else:
        size = None
    stride = cfg.get("stride")
    return ModelMetadata(
        names=cfg.get("names"),
        input_size=size,
        stride=int(stride) if isinstance(stride, (int, float)) else None,
    )


def load_torchscript(
    path: str | os.PathLike,
    *,
    device: Any = "auto",
    dtype: Any = None,
    input_size: Any = None,
    names: Any = None,
    head: str | None = None,
) -> TorchModel:
    """Load a TorchScript archive onto ``device`` (float16 on CUDA by default) and describe it."""
    import torch

    from vidpipe.device import resolve_device

    p = check_file(path, "TorchScript")
    dev = resolve_device(device)
    extra = {"config.txt": ""}
    try:
        with warnings.catch_warnings():  # torch >= 2.10 marks TorchScript deprecated; it still runs
            warnings.simplefilter("ignore", FutureWarning)
            module = torch.jit.load(p, map_location=dev, _extra_files=extra)
    except Exception as exc:  # noqa: BLE001 - torch raises RuntimeError/ValueError/zip errors
        raise load_error(p, "TorchScript", exc, "is it a TorchScript archive (torch.jit.save)?") from exc
    meta = parse_config(extra.get("config.txt"))
    stem = os.path.splitext(os.path.basename(p))[0]
    return wrap_module(
        module,
        fmt="torchscript",
        name=stem,
        what=p,
        device=dev,
        dtype=dtype,
        input_size=input_size,
        names=names,
        head=head,
        meta=meta,
    )


def load_pt(
    path: str | os.PathLike,
    *,
    device: Any = "auto",
    dtype: Any = None,
    input_size: Any = None,
    names: Any = None,
    head: str | None = None,
) -> TorchModel:
    """Load a ``.pt``/``.pth`` file that is a TorchScript or torch.export archive (see module doc)."""
    p = check_file(path, "PyTorch")
    kind = archive_kind(p)
    kwargs = dict(device=device, dtype=dtype, input_size=input_size, names=names, head=head)
    if kind == "torchscript":
        return load_torchscript(p, **kwargs)
    if kind == "export":
        from vidpipe.models.backends.exported import load_exported

        return load_exported(p, **kwargs)
    if kind == "pickle":
        raise ModelError(
            f"{p}: this is a pickled PyTorch checkpoint (torch.save), not a TorchScript or torch.export "
            "archive; vidpipe does not unpickle checkpoints (they need their Python classes and can run "
            "code). Export it, e.g. `yolo export model=... format=torchscript` or format=onnx, or load the "
            "module yourself and pass it through vidpipe.models.backends.from_module(...)"
        )
    raise ModelError(f"{p}: not a PyTorch model archive (tried TorchScript, torch.export; the file is not a zip)")
