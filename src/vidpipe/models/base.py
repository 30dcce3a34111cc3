"""The model interface: a backend runs a network, a head turns its raw output into candidates.

``Model.forward`` takes ``(B, 3, H, W)`` RGB in [0, 1] (``Model.dtype`` on ``Model.device``) and
returns whatever the network returns; a :class:`Head` turns that into :class:`Candidates`, which
NMS (``vidpipe.post``) reduces to :class:`~vidpipe.types.Detections`.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

if TYPE_CHECKING:
    import torch

ModelFormat = Literal["darknet", "torch", "torchscript", "export", "onnx", "tensorrt"]


@dataclass(frozen=True)
class ModelInfo:
    """What a loaded model is.

    Attributes:
        name: short name ("yolov3-tiny") or the file stem.
        format: the backend that runs it.
        names: class names, index = class id.
        input_size: ``(H, W)`` the model expects (or the default for dynamic-shape models).
        stride: input sizes must be multiples of this.
        head: name of the output head that decodes it (see ``vidpipe.models.heads``).
        dynamic_batch: whether any batch size runs (else ``max_batch`` is the fixed one).
        max_batch: largest batch the backend accepts (``None``: unbounded).
        dynamic_shape: whether any input size that is a multiple of ``stride`` runs (then
            the pipeline may trim letterbox padding, see ``ops.letterbox.canvas_size``).
    """

    name: str
    format: ModelFormat
    names: tuple[str, ...]
    input_size: tuple[int, int]
    stride: int = 32
    head: str = "yolov5"
    dynamic_batch: bool = True
    max_batch: int | None = None
    dynamic_shape: bool = False

    @property
    def num_classes(self) -> int:
        return len(self.names)


class Model(abc.ABC):
    """A network on one device with one dtype; call it with a ``(B, 3, H, W)`` batch in [0, 1]."""

    info: ModelInfo
    device: "torch.device"
    dtype: "torch.dtype"

    @abc.abstractmethod
    def forward(self, x: "torch.Tensor") -> Any:
        """Run the network on ``x`` (``(B, 3, H, W)``, ``self.dtype``, ``self.device``)."""

    def __call__(self, x: "torch.Tensor") -> Any:
        return self.forward(x)


@dataclass(frozen=True, repr=False)
class Candidates:
    """Per-frame candidate boxes before NMS, in model-input pixels.

    Attributes:
        boxes: ``(B, N, 4)`` float32 ``x1, y1, x2, y2`` in model-input pixels.
        scores: ``(B, N)`` float32 confidence (objectness x class probability for YOLO).
        class_ids: ``(B, N)`` int64.
        needs_nms: ``False`` for set-prediction heads (DETR) whose boxes are already unique.
        class_scores: optional ``(B, N, C)`` float32 score of every class (for YOLO objectness x
            that class's probability; ``scores`` is its max, ``class_ids`` its argmax), for
            multi-label NMS (Darknet's: a box counts for every class scored above the threshold).
    """

    boxes: "torch.Tensor"
    scores: "torch.Tensor"
    class_ids: "torch.Tensor"
    needs_nms: bool = True
    class_scores: "torch.Tensor | None" = None

    def __post_init__(self) -> None:
        b, n = self.scores.shape if self.scores.ndim == 2 else (-1, -1)
        if self.boxes.shape != (b, n, 4):
            raise ValueError(f"Candidates.boxes must be ({b}, {n}, 4), got {tuple(self.boxes.shape)}")
        if self.class_ids.shape != (b, n):
            raise ValueError(f"Candidates.class_ids must be ({b}, {n}), got {tuple(self.class_ids.shape)}")
        cs = self.class_scores
        if cs is not None and (cs.ndim != 3 or tuple(cs.shape[:2]) != (b, n)):
            raise ValueError(f"Candidates.class_scores must be ({b}, {n}, C), got {tuple(cs.shape)}")

    def __repr__(self) -> str:
        return f"Candidates(boxes={tuple(self.boxes.shape)}, device={self.boxes.device}, needs_nms={self.needs_nms})"


class Head(abc.ABC):
    """Turns a model's raw output into :class:`Candidates` (boxes in model-input pixels)."""

    name: ClassVar[str]

    @abc.abstractmethod
    def __call__(self, raw: Any, input_size: tuple[int, int]) -> Candidates:
        """Decode ``raw`` for a batch whose input was ``input_size`` = ``(H, W)``."""
