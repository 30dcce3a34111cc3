"""``load_model``: a bundled model by name, or a model file dispatched by its suffix.

Bundled models ship inside the package (``vidpipe/models/data``) and load offline. Loaders are
functions ``(path, LoadRequest) -> Model`` keyed by file suffix: the Darknet ones in
:data:`LOADERS` here, the other backends' (TorchScript, torch.export, ONNX, TensorRT) in
``vidpipe.models.backends.ZOO_LOADERS``, looked up on first use; :func:`register_loader` adds one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from vidpipe._validate import check_choice
from vidpipe.errors import ModelError

if TYPE_CHECKING:
    import torch

    from vidpipe.models.base import Model

__all__ = [
    "BUNDLED",
    "LOADERS",
    "LoadRequest",
    "all_loaders",
    "bundled_models",
    "bundled_path",
    "load_model",
    "register_loader",
]

logger = logging.getLogger(__name__)

DATA_DIR = Path(__file__).resolve().parent / "data"

#: Bundled model name -> file in ``vidpipe/models/data``.
BUNDLED: dict[str, str] = {"yolov3-tiny": "yolov3-tiny.safetensors"}

DType = Literal["auto", "fp16", "fp32"]


@dataclass(frozen=True)
class LoadRequest:
    """What the caller of :func:`load_model` asked for, resolved.

    Attributes:
        name: short name for the model (bundled name or file stem).
        device: where it runs. dtype: the dtype it runs in (``float16`` or ``float32``).
        input_size: ``(H, W)`` or an int, ``None`` for the model's own.
        weights: the weights file for formats that keep them apart (a Darknet cfg), else ``None``.
        names: class names given by the caller (a list or a names file), overriding the model's.
        head: output head name forced by the caller (``None``: detected from the outputs).
    """

    name: str
    device: "torch.device"
    dtype: "torch.dtype"
    input_size: int | tuple[int, int] | None = None
    weights: Path | None = None
    names: "Sequence[str] | str | Path | None" = None
    head: str | None = None


Loader = Callable[[Path, LoadRequest], "Model"]


def _names_beside(cfg_path: Path) -> tuple[str, ...] | None:
    """Class names from ``<stem>.names``, else the only ``*.names``, else ``coco.names`` beside."""
    candidates = [cfg_path.with_suffix(".names")]
    others = sorted(cfg_path.parent.glob("*.names"))
    if len(others) == 1:
        candidates.append(others[0])
    candidates.append(cfg_path.parent / "coco.names")
    for path in candidates:
        if path.is_file():
            names = tuple(line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
            logger.debug("class names for %s from %s", cfg_path, path)
            return names
    return None


def _load_darknet(cfg_path: Path, weights: Path, req: LoadRequest) -> "Model":
    from vidpipe.models.darknet import DarknetModel, DarknetNet, load_darknet_weights, read_cfg

    if not weights.is_file():
        raise ModelError(
            f"Darknet weights {str(weights)!r} not found for cfg {str(cfg_path)!r}; put the .weights file "
            "beside the cfg with the same name, or pass weights="
        )
    net = DarknetNet(read_cfg(cfg_path))
    load_darknet_weights(net, weights)
    _check_darknet_head(req)
    if req.names is not None:
        from vidpipe.models.names import resolve_names

        names = resolve_names(req.names, num_classes=net.num_classes, model=str(cfg_path))[: net.num_classes]
    else:
        names = _names_beside(cfg_path)
    if names is not None and len(names) != net.num_classes:
        raise ModelError(
            f"{cfg_path}: the class-name file beside it has {len(names)} names but the cfg has "
            f"{net.num_classes} classes"
        )
    return DarknetModel(net, name=req.name, names=names, device=req.device, dtype=req.dtype, input_size=req.input_size)


def _check_darknet_head(req: LoadRequest) -> None:
    if req.head not in (None, "yolov5"):
        raise ModelError(f"Darknet models use the 'yolov5' head (decoded YOLO layers), not head={req.head!r}")


def _load_cfg(path: Path, req: LoadRequest) -> "Model":
    return _load_darknet(path, req.weights or path.with_suffix(".weights"), req)


def _load_weights(path: Path, req: LoadRequest) -> "Model":
    cfg = path.with_suffix(".cfg")
    if not cfg.is_file():
        raise ModelError(f"Darknet cfg {str(cfg)!r} not found for weights {str(path)!r}; put it beside them")
    return _load_darknet(cfg, path, req)


def _load_bundle(path: Path, req: LoadRequest) -> "Model":
    from vidpipe.models.darknet import DarknetModel, build_net, read_bundle

    _check_darknet_head(req)
    bundle = read_bundle(path)
    name = bundle.name if req.name == path.stem else req.name
    names = bundle.names
    if req.names is not None:
        from vidpipe.models.names import resolve_names

        names = resolve_names(req.names, num_classes=len(bundle.names), model=name)[: len(bundle.names)]
    return DarknetModel(
        build_net(bundle),
        name=name,
        names=names,
        device=req.device,
        dtype=req.dtype,
        input_size=req.input_size,
    )


#: File suffix (lower case, with the dot) -> loader.
LOADERS: dict[str, Loader] = {
    ".cfg": _load_cfg,
    ".weights": _load_weights,
    ".safetensors": _load_bundle,
}


def register_loader(suffix: str, loader: Loader) -> None:
    """Make :func:`load_model` load files ending in ``suffix`` (e.g. ``".onnx"``) with ``loader``."""
    suffix = suffix.lower() if suffix.startswith(".") else f".{suffix.lower()}"
    LOADERS[suffix] = loader


def all_loaders() -> dict[str, Loader]:
    """Every suffix ``load_model`` understands: :data:`LOADERS` over the backends' loaders."""
    merged: dict[str, Loader] = {}
    try:
        from vidpipe.models.backends import ZOO_LOADERS
    except ImportError as exc:  # a broken optional layer must not hide the Darknet loaders
        logger.debug("model backends unavailable: %s", exc)
    else:
        merged.update(ZOO_LOADERS)
    merged.update(LOADERS)
    return merged


def bundled_models() -> tuple[str, ...]:
    return tuple(BUNDLED)


def bundled_path(name: str) -> Path:
    """The file of a bundled model (ModelError naming what is wrong if it is missing)."""
    path = DATA_DIR / BUNDLED[name]
    if not path.is_file():
        raise ModelError(f"the bundled model {name!r} is missing from this installation ({path}); reinstall vidpipe")
    return path


def _resolve_dtype(dtype: str, device: "torch.device") -> "torch.dtype":
    import torch

    check_choice("dtype", dtype, ("auto", "fp16", "fp32"))
    if dtype == "auto":
        return torch.float16 if device.type == "cuda" else torch.float32
    if dtype == "fp16" and device.type == "cpu":
        logger.warning("dtype='fp16' on the CPU is much slower than fp32 and no more accurate; consider 'auto'")
    return torch.float16 if dtype == "fp16" else torch.float32


def load_model(
    model: str | Path = "yolov3-tiny",
    *,
    device: "str | torch.device" = "auto",
    dtype: DType = "auto",
    input_size: int | Sequence[int] | None = None,
    weights: str | Path | None = None,
    names: "Sequence[str] | str | Path | None" = None,
    head: str | None = None,
) -> "Model":
    """Load a detection model, ready to run on ``device``.

    Args:
        model: a bundled name (``"yolov3-tiny"``, the default, loads offline from the package) or a
            path: ``.cfg`` (Darknet; the ``.weights`` of the same stem beside it, or ``weights=``),
            ``.weights`` (the ``.cfg`` beside it), ``.safetensors`` (made by
            ``tools/convert_darknet.py``), or any suffix of :func:`all_loaders` (``.onnx``,
            ``.pt``, ``.pt2``, ``.torchscript``, ``.engine``, ...). Class names of a Darknet cfg
            come from a ``.names`` file beside it (else ``class0``, ``class1``, ...).
        device: ``"auto" | "cpu" | "cuda" | "cuda:N"``.
        dtype: ``"auto"`` (fp16 on CUDA, fp32 on the CPU), ``"fp16"`` or ``"fp32"``.
        input_size: ``(H, W)`` (or one int) the model is fed; default the model's own (416x416 for
            yolov3-tiny). Must be a multiple of the model's stride.
        weights: the weights of a ``.cfg`` when they are not beside it.
        names: class names (a list, or a ``.names``/``.txt``/``.json``/``.yaml`` file) for models
            whose files carry none (ONNX, TorchScript, ...).
        head: force the output head (``"yolov5"``, ``"yolov8"``, ``"detr"``, ``"rfdetr"``,
            ``"torchvision"``) instead of detecting it from the output shapes.

    Raises:
        ModelError: unknown name or format, missing or inconsistent files.
        ConfigError: invalid ``device`` or ``dtype``.
        BackendUnavailableError: CUDA requested but not available.
    """
    from vidpipe.device import resolve_device

    dev = resolve_device(device)
    torch_dtype = _resolve_dtype(dtype, dev)
    size = tuple(input_size) if isinstance(input_size, Sequence) else input_size
    text = str(model)
    if text in BUNDLED:
        path, loader, name = bundled_path(text), _load_bundle, text
    else:
        path = Path(text).expanduser()
        loaders = all_loaders()
        loader = loaders.get(path.suffix.lower())
        name = path.stem
        if loader is None:
            raise ModelError(
                f"unknown model {text!r}: not a bundled model ({', '.join(bundled_models())}) and not a "
                f"file of a supported format ({', '.join(sorted(loaders))})"
            )
        if not path.is_file():
            raise ModelError(f"model file {text!r} not found")
    if weights is not None and path.suffix.lower() != ".cfg":
        raise ModelError(f"weights= is only used with a Darknet .cfg, not with {text!r}")
    req = LoadRequest(
        name=name,
        device=dev,
        dtype=torch_dtype,
        input_size=size,  # type: ignore[arg-type]
        weights=Path(weights).expanduser() if weights is not None else None,
        names=names,
        head=head,
    )
    return loader(path, req)
