"""torchvision's compiled operators (NMS, JPEG decode) without importing the torchvision package.

``import torchvision`` runs ``torchvision/__init__``, which imports ``torchvision.models`` and
``torchvision.ops``; through ``torch._dynamo`` (``torchvision.ops.roi_align``) these pull sympy,
``torch._inductor``, ``torch.distributed.fsdp`` and ``torch._higher_order_ops.triton_kernel_wrap``:
about 1.4 s on a 2-core CPU host, ~5 s on a GPU host, none of it used at run time. The operators
themselves live in two shared libraries of the torchvision wheel (``_C_stable`` / ``_C`` for
``torch.ops.torchvision.*``, ``image_stable`` / ``image`` for ``torch.ops.image.*``); this module
finds them with :func:`importlib.util.find_spec` (which does not import the package) and loads them
with ``torch.ops.load_library``, as ``torchvision/extension.py`` does. When a library cannot be
found or does not register the operator, it falls back to importing torchvision, which loads it.

Only what torchvision's Python wrappers do around these operators is left out: its API-usage
logging, its deprecation warnings, and its autocast / fake-tensor registrations (vidpipe calls the
operators outside autocast and outside ``torch.compile``).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import logging
import os
import sys
import threading
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import torch

__all__ = ["decode_jpeg", "decode_jpegs_cuda", "load", "nms", "package_dir"]

logger = logging.getLogger(__name__)

_LIBS = {"ops": ("_C_stable", "_C"), "image": ("image_stable", "image")}
_PROBE = {"ops": ("torchvision", "nms"), "image": ("image", "decode_jpeg")}
_RGB = 3  # torchvision.io.ImageReadMode.RGB
_LOCK = threading.Lock()


def package_dir() -> str | None:
    """The torchvision package's folder, found without importing it; ``None`` when absent."""
    try:
        spec = importlib.util.find_spec("torchvision")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def _registered(which: Literal["ops", "image"]) -> bool:
    import torch

    namespace, op = _PROBE[which]
    try:
        getattr(getattr(torch.ops, namespace), op)
    except (AttributeError, RuntimeError):
        return False
    return True


def load(which: Literal["ops", "image"]) -> None:
    """Make ``torch.ops.torchvision.*`` (``"ops"``) or ``torch.ops.image.*`` (``"image"``) available.

    Loads torchvision's shared library for them (idempotent); imports the torchvision package only
    when that fails. Raises ``ImportError`` when torchvision is not installed.
    """
    if _registered(which):
        return
    with _LOCK:
        if _registered(which):
            return
        import torch

        folder = package_dir()
        if folder is not None and "torchvision" not in sys.modules:
            finder = importlib.machinery.FileFinder(
                folder, (importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES)
            )
            if os.name == "nt":
                os.add_dll_directory(folder)
            for name in _LIBS[which]:
                spec = finder.find_spec(name)
                if spec is None or spec.origin is None:
                    continue
                try:
                    torch.ops.load_library(spec.origin)
                except OSError as exc:
                    logger.debug("could not load torchvision's %s (%s)", spec.origin, exc)
                    continue
                if _registered(which):
                    return
        logger.debug("torchvision's %s operators: importing the torchvision package", which)
        if which == "image":
            import torchvision.io.image  # noqa: F401 - loads the image library
        else:
            import torchvision  # noqa: F401 - loads the ops library
        if not _registered(which):
            namespace, op = _PROBE[which]
            raise ImportError(f"torchvision is installed but torch.ops.{namespace}.{op} is not available")


def nms(boxes: torch.Tensor, scores: torch.Tensor, iou: float) -> torch.Tensor:
    """``torchvision.ops.nms``: ``(N, 4)`` ``x1, y1, x2, y2`` boxes and ``(N,)`` scores (same
    dtype, any device) -> ``(K,)`` int64 indices kept, by decreasing score."""
    import torch

    load("ops")
    return torch.ops.torchvision.nms(boxes, scores, float(iou))


def decode_jpeg(data: torch.Tensor) -> torch.Tensor:
    """``torchvision.io.decode_jpeg(data, mode=RGB)`` on the CPU: ``(L,)`` uint8 CPU bytes ->
    ``(3, H, W)`` uint8 RGB (EXIF orientation not applied). Raises ``RuntimeError`` on bad data."""
    import torch

    load("image")
    return torch.ops.image.decode_jpeg(data, _RGB, False)


def decode_jpegs_cuda(encoded: list[torch.Tensor], device: torch.device) -> list[torch.Tensor]:
    """``torchvision.io.decode_jpeg(list, mode=RGB, device=cuda)`` (nvJPEG): non-empty list of
    ``(L,)`` uint8 CPU tensors -> ``(3, H, W)`` uint8 RGB tensors on ``device``."""
    import torch

    if not encoded:
        raise ValueError("decode_jpegs_cuda: the list of encoded images is empty")
    load("image")
    return list(torch.ops.image.decode_jpegs_cuda(encoded, _RGB, device))
