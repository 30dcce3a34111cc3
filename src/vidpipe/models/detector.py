"""``Detector``: model + head + NMS + box scaling, from a :class:`ModelInput` to :class:`Detections`."""

from __future__ import annotations

import difflib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TYPE_CHECKING

from vidpipe._validate import check_range
from vidpipe.errors import ConfigError, ModelError
from vidpipe.models.base import Candidates
from vidpipe.models.heads import get_head
from vidpipe.models.twins import GraphTwins
from vidpipe.ops.scratch import ScratchArena
from vidpipe.post.boxes import to_source
from vidpipe.post.nms import nms
from vidpipe.types import Detections, ModelInput

if TYPE_CHECKING:
    import torch

    from vidpipe.models.base import Model

__all__ = ["Detector", "DetectorConfig", "resolve_classes"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DetectorConfig:
    """Post-processing options.

    Attributes:
        conf: keep detections whose score (objectness x class probability) is > ``conf``, in [0, 1].
        iou: NMS IoU threshold in [0, 1] (per frame and class).
        classes: class ids to keep (``None``: all); see :func:`resolve_classes` for names.
        agnostic: class-agnostic NMS (boxes of different classes suppress each other).
        max_det: most detections per frame (>= 1).
        multi_label: a box counts for every class scored above ``conf`` (``True``, Darknet's
            ``do_nms_sort``: a bicycle box also scored 0.3 as motorbike suppresses weaker
            motorbike boxes and is reported twice, once per class) or for its best class only
            (``False``, Ultralytics' predict). ``None`` (default): the model's own convention,
            ``True`` for Darknet models (the bundled one included), ``False`` for the others.
    """

    conf: float = 0.25
    iou: float = 0.45
    classes: tuple[int, ...] | None = None
    agnostic: bool = False
    max_det: int = 300
    multi_label: bool | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.agnostic, bool):
            raise ConfigError(f"invalid agnostic={self.agnostic!r}; expected True or False")
        check_range("conf", self.conf, low=0.0, high=1.0)
        check_range("iou", self.iou, low=0.0, high=1.0)
        check_range("max_det", self.max_det, low=1, integer=True)
        if self.multi_label is not None and not isinstance(self.multi_label, bool):
            raise ConfigError(f"invalid multi_label={self.multi_label!r}; expected None, True or False")
        if self.classes is not None:
            ids = tuple(self.classes) if isinstance(self.classes, (list, tuple)) else None
            if not ids or any(isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in ids):
                raise ConfigError(
                    f"invalid classes={self.classes!r}; expected None or a non-empty tuple of class ids >= 0 "
                    "(use resolve_classes() for names)"
                )
            object.__setattr__(self, "classes", ids)


def _norm(name: str) -> str:
    return " ".join(name.replace("_", " ").split()).lower()


def resolve_classes(spec: str | Sequence[str | int], names: Sequence[str]) -> tuple[int, ...]:
    """Class ids from ``"person,car"``, ``"0,2"`` or a sequence of names and ids (in order, deduplicated).

    Names match case-insensitively, ``_`` standing for a space (``traffic_light``). An unknown name
    or an id out of range raises ConfigError with the closest class names.
    """
    if isinstance(spec, str):
        items: list[str | int] = [s.strip() for s in spec.split(",") if s.strip()]
    elif isinstance(spec, Sequence):
        items = list(spec)
    else:
        raise ConfigError(f"invalid classes={spec!r}; expected names or ids, e.g. 'person,car' or [0, 2]")
    if not items:
        raise ConfigError(f"invalid classes={spec!r}: no class given")
    lookup = {_norm(n): i for i, n in reversed(list(enumerate(names)))}
    out: list[int] = []
    for item in items:
        if isinstance(item, bool):
            raise ConfigError(f"invalid class {item!r}; expected a name or an id")
        if isinstance(item, int) or (isinstance(item, str) and item.strip().isdigit()):
            idx = int(item)
            if not 0 <= idx < len(names):
                raise ConfigError(
                    f"class id {idx} is out of range; the model has {len(names)} classes (0..{len(names) - 1})"
                )
        elif isinstance(item, str):
            key = _norm(item)
            if key not in lookup:
                close = difflib.get_close_matches(key, list(lookup), n=3, cutoff=0.6)
                hint = f"; did you mean {', '.join(repr(names[lookup[c]]) for c in close)}?" if close else ""
                shown = ", ".join(names[:10]) + (", ..." if len(names) > 10 else "")
                raise ConfigError(f"unknown class {item!r}{hint} (the model's {len(names)} classes: {shown})")
            idx = lookup[key]
        else:
            raise ConfigError(f"invalid class {item!r}; expected a name or an id")
        if idx not in out:
            out.append(idx)
    return tuple(out)


class Detector:
    """Runs a model on a :class:`ModelInput` and returns :class:`Detections` in source pixels.

    ``detector(inp)``: the model forward, its output head and NMS (under
    ``torch.inference_mode``), then the letterbox undone, all on the model's device; the returned
    tensors are ordinary (not inference) tensors. ``inp.tensor`` must be on
    ``detector.device``; it is cast to ``detector.dtype`` if needed.
    """

    def __init__(self, model: "Model", *, config: DetectorConfig | None = None) -> None:
        self.model = model
        self.config = config or DetectorConfig()
        self.head = get_head(model.info.head)
        ml = self.config.multi_label
        self.multi_label: bool = ml if ml is not None else model.info.format == "darknet"
        self._classes: torch.Tensor | None = None
        #: CUDA-graph twins of this detector, kept across runs (:mod:`vidpipe.models.twins`)
        self.twins: GraphTwins[Detector] = GraphTwins()
        #: CUDA streams lent to the runs' workers and post-processing, kept across runs so the
        #: caching allocator's blocks cached on them are reused (:mod:`vidpipe.models.twins`)
        self.cuda_streams: GraphTwins[Any] = GraphTwins(keep_idle=32)
        #: the fused letterbox's work buffer, shared by the runs' sources and kept across runs, so
        #: GPU memory does not depend on their timing (:mod:`vidpipe.ops.scratch`)
        self.scratch = ScratchArena(model.device)
        if self.config.classes is not None:
            import torch

            bad = [i for i in self.config.classes if i >= model.info.num_classes]
            if bad:
                raise ConfigError(f"classes {bad} out of range; {model.info.name} has {model.info.num_classes} classes")
            self._classes = torch.tensor(self.config.classes, dtype=torch.int64, device=model.device)

    @property
    def names(self) -> tuple[str, ...]:
        return self.model.info.names

    @property
    def input_size(self) -> tuple[int, int]:
        return self.model.info.input_size

    @property
    def device(self) -> "torch.device":
        return self.model.device

    @property
    def dtype(self) -> "torch.dtype":
        return self.model.dtype

    def __call__(self, inp: ModelInput) -> Detections:
        return self.postprocess(self.forward(inp), inp)

    def forward(self, inp: "ModelInput | torch.Tensor") -> Any:
        """Queue the model on ``inp`` (or its ``(B, 3, H, W)`` tensor) and return its raw output
        (no host synchronisation): the first half of :meth:`__call__`, so a caller can launch
        batch N+1 before post-processing batch N."""
        import torch

        x = inp.tensor if isinstance(inp, ModelInput) else inp
        if x.device != self.device:
            raise ModelError(f"ModelInput is on {x.device} but the model {self.model.info.name} runs on {self.device}")
        with torch.inference_mode():
            return self.model(x.to(self.dtype))

    def postprocess(self, raw: Any, inp: ModelInput) -> Detections:
        """Output head, NMS (one host synchronisation) and the letterbox undone, for the ``raw``
        output of :meth:`forward` on ``inp``; runs on the current CUDA stream."""
        import torch

        dets = self.select(raw, inp)
        # The results leave as ordinary tensors (inference tensors refuse in-place updates outside
        # inference mode, which would surprise a tracker or a sink); they are small.
        with torch.no_grad():
            out = to_source(dets, inp)
            out = Detections(out.boxes, out.scores.clone(), out.class_ids.clone(), out.frame.clone())
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("%d frames -> %d detections", len(inp), len(out))
        return out

    def select(self, raw: Any, inp: ModelInput) -> Detections:
        """Output head and NMS (one host synchronisation) for the ``raw`` output of :meth:`forward`
        on ``inp``: the batch's detections with boxes still in ``inp``'s model-input pixels
        (``frame`` = row in the batch; inference tensors on the model's device, current CUDA
        stream). :meth:`postprocess` then undoes the letterbox on the device;
        :func:`vidpipe.post.host.results_on_host` does it on the host."""
        import torch

        cfg = self.config
        x = inp.tensor
        with torch.inference_mode():
            cand = self.head(raw, (int(x.shape[-2]), int(x.shape[-1])))
            return nms(
                cand,
                conf=cfg.conf,
                iou=cfg.iou,
                classes=self._classes,
                agnostic=cfg.agnostic,
                max_det=cfg.max_det,
                num_classes=self.model.info.num_classes,
                multi_label=self.multi_label,
            )

    def warmup(self, batch_size: int = 1) -> float:
        """Run the whole detector (model, head, NMS, box mapping) once on a grey
        ``(batch_size, 3, H, W)`` batch of its input size, so the CUDA context, cuDNN's algorithm
        choice, lazily loaded kernels and other first-call costs are paid before timing starts.
        Returns the seconds it took."""
        import time

        import torch

        from vidpipe.types import FrameMeta

        t0 = time.perf_counter()
        h, w = self.input_size
        x = torch.full((batch_size, 3, h, w), 0.5, dtype=self.dtype, device=self.device)
        meta = FrameMeta("<warm-up>", 0, 0, None, h, w)
        inp = ModelInput(
            tensor=x,
            frames=(meta,) * batch_size,
            scale=torch.ones((batch_size, 2), dtype=torch.float32, device=self.device),
            pad=torch.zeros((batch_size, 2), dtype=torch.float32, device=self.device),
        )
        self(inp).cpu()
        # A grey batch gives no candidate above the threshold, so NMS and what follows never ran:
        # run them on made-up confident boxes too (their first CUDA calls cost seconds).
        g = torch.Generator(device=self.device).manual_seed(0)
        xy = torch.rand((batch_size, 64, 2), generator=g, device=self.device) * torch.tensor([w, h], device=self.device)
        boxes = torch.cat([xy, xy + 20], dim=2)
        ids = self._classes[0] if self._classes is not None else 0
        per_class = None
        if int(ids) < self.model.info.num_classes:  # multi-label NMS's first calls too
            per_class = torch.zeros((batch_size, 64, self.model.info.num_classes), device=self.device)
            per_class[..., int(ids)] = 0.9
        cand = Candidates(
            boxes=boxes,
            scores=torch.full((batch_size, 64), 0.9, device=self.device),
            class_ids=torch.full((batch_size, 64), int(ids), dtype=torch.int64, device=self.device),
            class_scores=per_class,
        )
        cfg = self.config
        dets = nms(cand, conf=cfg.conf, iou=cfg.iou, classes=self._classes, max_det=cfg.max_det,
                   num_classes=self.model.info.num_classes, multi_label=self.multi_label)  # fmt: skip
        to_source(dets, inp).cpu().split(batch_size)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter() - t0

    def __repr__(self) -> str:
        return f"Detector(model={self.model!r}, config={self.config})"
