"""The ``embed`` stage: crops of the detections -> a model -> ``FrameResult.embeddings``.

Put it **before the tracker** in a run's stages (``stages=[EmbedStage(...), tracker, ...]``): the
tracker reads ``FrameResult.embeddings`` for appearance matching when they are there. A stage
that writes the embeddings with track ids (:class:`~vidpipe.crops.parquet.EmbeddingsParquet`)
goes after the tracker.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from vidpipe._validate import check_range
from vidpipe.crops.roi import CropOptions, crop_detections
from vidpipe.errors import ConfigError

if TYPE_CHECKING:
    import torch

    from vidpipe.crops.embedder import Embedder
    from vidpipe.types import FrameResult

__all__ = ["EmbedStage"]

logger = logging.getLogger(__name__)


class EmbedStage:
    """Crop each detection (:func:`~vidpipe.crops.roi.crop_detections`, ``torchvision``'s
    ``roi_align`` on the run's device), run an embedding model on the crops in batches, and set
    ``FrameResult.embeddings``: ``(N, D)`` float32, one row per detection row, on the detections'
    device. Rows of classes not selected (``classes``) are NaN (``torch.isnan(e[:, 0])`` finds
    them); a frame without detections gets ``(0, D)``.

    Args:
        model: the embedding model (:func:`~vidpipe.crops.embedder.load_embedder`: ``None`` for
            the built-in colour-grid descriptor, an ``nn.Module``, a callable, or an ONNX /
            TorchScript / torch.export file). It takes ``(N, 3, h, w)`` float RGB crops in [0, 1]
            (after ``mean``/``std`` when given) and returns ``(N, D)``.
        size: ``(height, width)`` of the crops (default 256 x 128, the usual person-ReID input).
        expand, pad, clip: how boxes are grown before cropping (:class:`CropOptions`).
        classes: class names or ids to embed (``"person"``, ``[0, 2]``); ``None``: every detection.
        normalize: L2-normalise each embedding (unit length; cosine similarity is a dot product).
        mean, std: per-channel normalisation of the crops before the model (e.g. ImageNet's
            ``(0.485, 0.456, 0.406)``, ``(0.229, 0.224, 0.225)``); ``None``: crops in [0, 1].
        batch_size: crops per model call (memory bound; all crops of a call of :meth:`process`
            are one batch up to this many).
        dtype: the model's input dtype (default: its parameters').

    The model is loaded on the frames' device at the first frame; crops need the frames, so the
    stage has ``needs_frames=True`` and the run keeps them.
    """

    name = "embed"
    needs_frames = True
    #: how errors about ``classes`` name it (the command line sets its flag's name)
    classes_option = "classes"

    def __init__(
        self,
        model: Any = None,
        *,
        size: "tuple[int, int] | int" = (256, 128),
        expand: float = 0.0,
        pad: float = 0.0,
        clip: bool = True,
        classes: "str | Sequence[str | int] | None" = None,
        normalize: bool = True,
        mean: "Sequence[float] | None" = None,
        std: "Sequence[float] | None" = None,
        batch_size: int = 512,
        dtype: Any = None,
    ) -> None:
        self._model_spec = model
        self._crop = CropOptions(size=size if not isinstance(size, int) else (size, size), expand=expand, pad=pad,
                                 clip=clip)  # fmt: skip
        self._classes_spec = classes
        self.normalize = bool(normalize)
        self.batch_size = int(check_range("batch_size", batch_size, low=1, high=1 << 20, integer=True))
        if (mean is None) != (std is None):
            raise ConfigError("mean and std go together: give both or neither")
        if mean is not None and (len(mean) != 3 or len(std) != 3 or min(std) <= 0):  # type: ignore[arg-type]
            raise ConfigError(f"mean={mean!r}, std={std!r}; expected three values each, std > 0")
        self._mean_std = None
        if mean is not None and std is not None:
            self._mean_std = (tuple(map(float, mean)), tuple(map(float, std)))
        self._dtype = dtype
        self._embedder: "Embedder | None" = None
        self._norm: "tuple[torch.Tensor, torch.Tensor] | None" = None
        self.dim: int | None = None
        self.frames = 0
        self.crops = 0
        self.calls = 0
        if isinstance(model, (str, os.PathLike)) and not os.path.exists(os.fspath(model)):
            raise ConfigError(f"embedding model {os.fspath(model)!r}: no such file")

    # ------------------------------------------------------------------ Stage protocol
    def process(self, results: "Sequence[FrameResult]") -> "list[FrameResult]":
        import torch

        if not results:
            return []
        self.frames += len(results)
        device = next((r.image.device for r in results if r.image is not None), results[0].detections.device)
        self._ensure(results[0].names, device)
        crops = crop_detections(results, self._crop)
        dim = self.dim
        assert dim is not None  # set by _ensure
        counts = [len(r.detections) for r in results]
        full = torch.full((crops.total, dim), float("nan"), dtype=torch.float32, device=device)
        if len(crops):
            full.index_copy_(0, crops.index, self._embed(crops.tensor))
            self.crops += len(crops)
        out = []
        det_device = results[0].detections.device
        if full.device != det_device:
            full = full.to(det_device)  # one copy for the call (results on the host)
        for r, part in zip(results, full.split(counts)):
            out.append(dataclasses.replace(r, embeddings=part))
        self.calls += 1
        return out

    def reset(self, stream_id: int) -> None:
        """Nothing to forget: embeddings depend on one frame only."""

    def report(self) -> Mapping[str, Any]:
        if self._embedder is None:
            return {}
        return {
            "model": self._embedder.name,
            "dim": self.dim,
            "size": list(self._crop.size),
            "classes": None if self._crop.classes is None else list(self._crop.classes),
            "normalized": self.normalize,
            "frames": self.frames,
            "crops": self.crops,
        }

    def close(self) -> None:
        """Nothing to release (the model goes with the stage)."""

    # ------------------------------------------------------------------ internals
    def _ensure(self, names: Sequence[str], device: "torch.device") -> None:
        """Load the model on ``device`` and learn its output size (one zero crop), once."""
        if self._embedder is not None:
            return
        import torch

        from vidpipe.crops.embedder import load_embedder

        if self._classes_spec is not None:
            from vidpipe.models.detector import resolve_classes

            spec = self._classes_spec
            if names:
                try:
                    classes = resolve_classes(spec if isinstance(spec, str) else list(spec), names)
                except ConfigError as exc:
                    raise ConfigError(f"{self.classes_option}: {exc}") from None
            else:  # a model without names: ids only
                items = spec.split(",") if isinstance(spec, str) else list(spec)
                try:
                    classes = tuple(int(c) for c in items)
                except (TypeError, ValueError):
                    raise ConfigError(
                        f"{self.classes_option}={spec!r}: the model has no class names; give class ids"
                    ) from None
            self._crop = dataclasses.replace(self._crop, classes=classes)
        emb = load_embedder(self._model_spec, device=device, dtype=self._dtype)
        if self._mean_std is not None:
            m, s = self._mean_std
            self._norm = (
                torch.tensor(m, dtype=torch.float32, device=device).view(1, 3, 1, 1),
                torch.tensor(s, dtype=torch.float32, device=device).view(1, 3, 1, 1),
            )
        self._embedder = emb
        probe = torch.zeros((1, 3, *self._crop.size), dtype=torch.float32, device=device)
        self.dim = int(self._run(probe).shape[1])
        logger.info("embed: %s on %s, %d-dimensional embeddings of %dx%d crops", emb.name, device, self.dim,
                    *self._crop.size)  # fmt: skip

    def _run(self, x: "torch.Tensor") -> "torch.Tensor":
        assert self._embedder is not None
        if self._norm is not None:
            x = (x.float() - self._norm[0]) / self._norm[1]
        return self._embedder(x)

    def _embed(self, crops: "torch.Tensor") -> "torch.Tensor":
        """``(N, 3, h, w)`` crops -> ``(N, D)`` float32, ``batch_size`` crops per model call."""
        import torch
        import torch.nn.functional as F

        parts = [self._run(crops[i : i + self.batch_size]) for i in range(0, crops.shape[0], self.batch_size)]
        out = (parts[0] if len(parts) == 1 else torch.cat(parts)).float()
        if out.shape[1] != self.dim:
            from vidpipe.errors import ModelError

            name = self._embedder.name if self._embedder is not None else "?"
            raise ModelError(f"embedding model {name}: {out.shape[1]} values per crop, then {self.dim}")
        return F.normalize(out, dim=1) if self.normalize else out
