"""Finishing a loaded network into a described model: probe it once, pick its head and names.

Every loader runs the network once on a grey ``(b, 3, H, W)`` batch (``b`` = the fixed batch or 1)
to check that it accepts images of the chosen size, that its outputs are finite, which head
decodes them (unless ``head=`` says), how many classes it predicts, and that the head decodes the
probe's output. A failure at any step is a :class:`ModelError` that says what to change.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vidpipe.errors import ModelError
from vidpipe.models.backends.common import (
    DEFAULT_INPUT_SIZE,
    check_input_size,
    describe_raw,
    finite_flag,
    run_probe,
)
from vidpipe.models.base import ModelFormat, ModelInfo

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelMetadata:
    """What a model file says about itself (all optional).

    ``names``: a JSON/Python-literal string, list or mapping; ``input_size``: ``(H, W)`` the file
    fixes (``fixed_size=True``) or suggests; ``batch``: a fixed batch size; ``max_batch``: the
    largest batch a dynamic-batch model accepts (TensorRT profiles, torch.export ``Dim`` bounds);
    ``dynamic_shape``: any ``H``/``W`` (multiples of the stride) runs, as declared by the file.
    """

    names: Any = None
    input_size: tuple[int, int] | None = None
    fixed_size: bool = False
    dynamic_shape: bool = False
    batch: int | None = None
    max_batch: int | None = None
    stride: int | None = None


def choose_input_size(requested: Any, meta: ModelMetadata, *, what: str) -> tuple[int, int]:
    """The input size: a fixed size from the file (a different request is an error), else the request,
    else the file's suggestion, else 640x640."""
    req = check_input_size(requested)
    if meta.fixed_size and meta.input_size is not None:
        if req is not None and req != meta.input_size:
            raise ModelError(
                f"{what} takes a fixed input of {meta.input_size[0]}x{meta.input_size[1]} (HxW), "
                f"but input_size={req[0]}x{req[1]} was requested; omit input_size or re-export the model"
            )
        return meta.input_size
    if req is not None:
        return req
    if meta.input_size is not None:
        return meta.input_size
    logger.info("%s: input size unknown, using %dx%d (pass input_size= to change)", what, *DEFAULT_INPUT_SIZE)
    return DEFAULT_INPUT_SIZE


def _given_names(names: Any) -> tuple[str, ...] | None:
    if names is None:
        return None
    from vidpipe.models.names import resolve_names

    return resolve_names(names)


def _metadata_names(value: Any, what: str) -> tuple[str, ...] | None:
    """Names from file metadata for the head-detection hint (unreadable metadata: no hint)."""
    if value is None:
        return None
    from vidpipe.models.names import normalize_names, parse_names_text

    try:
        return parse_names_text(value, source=what) if isinstance(value, str) else normalize_names(value, source=what)
    except ModelError:
        return None


def _head_instance(name: str) -> Any:
    from vidpipe.models.heads import get_head

    return get_head(name)


def describe(
    run: Callable[["torch.Tensor"], Any],
    *,
    name: str,
    fmt: ModelFormat,
    what: str,
    device: "torch.device",
    dtype: "torch.dtype",
    input_size: tuple[int, int],
    names: Any,
    head: str | None,
    meta: ModelMetadata,
    to_float32: Callable[[], None] | None = None,
) -> "tuple[ModelInfo, torch.dtype]":
    """Probe ``run`` and build the :class:`ModelInfo`; returns it and the dtype that worked.

    ``to_float32``: for backends that can change precision, switches the network to float32; it
    is used (with a warning) when the probe fails or gives NaN/Inf at reduced precision.
    """
    import torch

    batch = meta.batch or 1

    def attempt(dt: "torch.dtype") -> Any:
        raw = run_probe(run, batch=batch, input_size=input_size, device=device, dtype=dt, what=what)
        flag = finite_flag(raw)
        if flag is not None and not bool(flag):
            raise ModelError(
                f"{what} produced NaN or infinite outputs on a grey {input_size[0]}x{input_size[1]} "
                f"test image in {str(dt).removeprefix('torch.')}"
            )
        return raw

    try:
        raw = attempt(dtype)
    except ModelError as exc:
        if to_float32 is None or dtype == torch.float32:
            raise
        logger.warning("%s; retrying in float32", exc)
        to_float32()
        dtype = torch.float32
        raw = attempt(dtype)

    given = _given_names(names)
    hint_names = given if given is not None else _metadata_names(meta.names, what)
    if head is None:
        from vidpipe.models.heads.detect import detect_head

        head = detect_head(raw, num_classes_hint=None if hint_names is None else len(hint_names))
        logger.info("%s: output %s -> head %r", what, describe_raw(raw), head)
    decoder = _head_instance(head)
    try:
        decoder(raw, input_size)
    except Exception as exc:  # noqa: BLE001 - any decoding failure means the head does not fit
        raise ModelError(
            f"{what}: the {head!r} head cannot decode the model's output {describe_raw(raw)} "
            f"({type(exc).__name__}: {exc}); pass another head="
        ) from exc

    from vidpipe.models.heads.detect import num_classes_of
    from vidpipe.models.names import resolve_names, torchvision_coco_names

    num_classes = num_classes_of(raw, head)
    if given is None and meta.names is None and head == "torchvision":
        table = torchvision_coco_names()
        logger.info("%s: no class names given, using torchvision's COCO categories", what)
    else:
        table = resolve_names(given, metadata=meta.names, num_classes=num_classes, model=what)
    info = ModelInfo(
        name=name,
        format=fmt,
        names=table,
        input_size=input_size,
        stride=meta.stride or 32,
        head=head,
        dynamic_batch=meta.batch is None,
        max_batch=meta.batch or meta.max_batch,
        dynamic_shape=meta.dynamic_shape,
    )
    return info, dtype
