"""Class-aware non-maximum suppression over a whole batch in one kernel call.

Two label rules: single-label (each candidate keeps only its best class, as Ultralytics' predict
does) and multi-label (``multi_label=True``: a candidate is one entry for every class scored
above ``conf``, as Darknet's ``do_nms_sort`` and ``draw_detections`` do, so a box scored 0.6 as
bicycle and 0.3 as motorbike suppresses lower motorbike boxes and is reported under both). NMS is
per frame and class in both, greedy by decreasing score, dropping IoU > ``iou``.

Candidates of every frame and class go through a single ``torchvision.ops.nms`` call (its compiled
operator, loaded by :mod:`vidpipe._tvops` without importing the torchvision package): each box is
shifted by ``(frame * num_classes + class) * span`` so boxes of different frames or classes can
never overlap. That is ``torchvision.ops.batched_nms``'s "coordinate trick", done here in float64
because ``batched_nms`` (a) switches to a Python loop over every (frame, class) group above 1,000
boxes on the CPU, (b) computes its offsets in float32, which loses sub-pixel precision once
``groups x coordinates`` passes ~1e6 (a batch of 64 frames x 80 classes x 1,280 px), and (c)
assumes non-negative coordinates, which YOLO boxes at the image border are not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vidpipe._validate import check_range
from vidpipe.models.base import Candidates
from vidpipe.post.dtypes import as_float32, as_int64
from vidpipe.types import Detections

if TYPE_CHECKING:
    import torch

__all__ = ["grouped_nms", "nms"]


def grouped_nms(boxes: "torch.Tensor", scores: "torch.Tensor", groups: "torch.Tensor", iou: float) -> "torch.Tensor":
    """Indices of the boxes kept by NMS within each group, by decreasing score (one kernel call).

    Args:
        boxes: ``(N, 4)`` ``x1, y1, x2, y2`` float, any device. scores: ``(N,)`` float.
        groups: ``(N,)`` int64 group ids (>= 0); boxes of different groups never suppress each other.
        iou: boxes overlapping a higher-scored one of their group by IoU > ``iou`` are dropped.

    Returns:
        ``(K,)`` int64 on the boxes' device.
    """
    import torch

    from vidpipe._tvops import nms as tv_nms

    if boxes.shape[0] == 0:
        return torch.zeros((0,), dtype=torch.int64, device=boxes.device)
    b = boxes.double()
    b = b - b.min()  # all coordinates >= 0
    span = b.max() + 1.0
    shifted = b + (groups.double() * span)[:, None]
    return tv_nms(shifted, scores.double(), float(iou))


def nms(
    cand: Candidates,
    *,
    conf: float = 0.25,
    iou: float = 0.45,
    classes: "torch.Tensor | None" = None,
    max_det: int = 300,
    agnostic: bool = False,
    max_candidates: int = 30000,
    num_classes: int | None = None,
    multi_label: bool = False,
) -> Detections:
    """Threshold, class-filter and class-aware NMS a batch of candidates into :class:`Detections`.

    Args:
        cand: ``(B, N)`` candidates (boxes in model-input pixels) on any device.
        conf: keep candidates with score > ``conf``.
        iou: NMS IoU threshold (within one frame and one class).
        classes: optional ``(K,)`` int64 tensor of allowed class ids, on the candidates' device.
        max_det: most detections kept per frame (the best-scored).
        agnostic: class-agnostic NMS: boxes of different classes suppress each other too.
        max_candidates: at most this many best-scored candidates per frame enter NMS.
        num_classes: number of classes of the model (default: inferred from ``class_ids``).
        multi_label: one entry per class scored above ``conf`` (Darknet's rule; needs
            ``cand.class_scores``, else single-label), instead of the best class only.

    Returns:
        Detections with boxes still in model-input pixels (float32), ``frame`` = row in the batch,
        sorted by frame then decreasing score; on the candidates' device. Candidates with
        ``needs_nms=False`` are only thresholded, filtered and capped.
    """
    import torch

    check_range("conf", conf, low=0.0, high=1.0)
    check_range("iou", iou, low=0.0, high=1.0)
    check_range("max_det", max_det, low=1, integer=True)
    check_range("max_candidates", max_candidates, low=1, integer=True)
    boxes, scores, class_ids, per_class = cand.boxes, cand.scores, cand.class_ids, cand.class_scores
    multi = multi_label and per_class is not None and cand.needs_nms
    b, n = scores.shape
    if n > max_candidates:
        scores, top = scores.topk(max_candidates, dim=1)
        class_ids = class_ids.gather(1, top)
        boxes = boxes.gather(1, top.unsqueeze(-1).expand(-1, -1, 4))
        if multi:
            per_class = per_class.gather(1, top.unsqueeze(-1).expand(-1, -1, per_class.shape[-1]))
    if multi:
        mask = per_class > conf  # (B, N, C)
        if classes is not None:
            allowed = torch.isin(torch.arange(per_class.shape[-1], device=mask.device), classes.to(mask.device))
            mask &= allowed
        frame, anchor, cls = mask.nonzero(as_tuple=True)
        if frame.numel() == 0:
            return Detections.empty(boxes.device)
        boxes, scores, class_ids = as_float32(boxes[frame, anchor]), as_float32(per_class[frame, anchor, cls]), cls
        if num_classes is None:
            num_classes = per_class.shape[-1]
    else:
        mask = scores > conf
        if classes is not None:
            mask &= torch.isin(class_ids, classes.to(class_ids.device))
        frame, anchor = mask.nonzero(as_tuple=True)
        if frame.numel() == 0:
            return Detections.empty(boxes.device)
        boxes, scores = as_float32(boxes[frame, anchor]), as_float32(scores[frame, anchor])
        class_ids = class_ids[frame, anchor]
    if cand.needs_nms:
        if num_classes is None:
            num_classes = int(class_ids.max()) + 1
        groups = frame if agnostic else frame * num_classes + class_ids
        keep = grouped_nms(boxes, scores, groups, iou)
    else:
        keep = torch.argsort(scores, descending=True)
    keep = keep[torch.argsort(frame[keep], stable=True)]  # by frame, score order kept within
    if keep.numel() > max_det:  # (its size is on the host: no frame can hold more than the batch keeps)
        keep = _cap_per_frame(keep, frame[keep], b, max_det)
    return Detections(
        boxes=boxes[keep],
        scores=scores[keep],
        class_ids=as_int64(class_ids[keep]),
        frame=frame[keep],
    )


def _cap_per_frame(keep: "torch.Tensor", kept_frames: "torch.Tensor", b: int, max_det: int) -> "torch.Tensor":
    """``keep`` (sorted by frame, best first within a frame) less each frame's rows after its
    ``max_det``-th (one host synchronisation: the boolean index)."""
    import torch

    counts = torch.zeros(b, dtype=torch.int64, device=keep.device).scatter_add_(
        0, kept_frames, torch.ones_like(kept_frames)
    )
    starts = counts.cumsum(0) - counts
    rank = torch.arange(keep.numel(), device=keep.device) - starts[kept_frames]
    return keep[rank < max_det]
