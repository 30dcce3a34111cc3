"""Compare two sets of detections of the same frames (e.g. FP16 vs FP32, GPU vs CPU, two backends).

Greedy matching: rows of ``a`` in decreasing score each take the unmatched row of ``b`` of the same
frame and class with the highest IoU, if that IoU reaches the threshold. Not on a hot path: it
moves the detections to the host.
"""

from __future__ import annotations

from dataclasses import dataclass

from vidpipe.types import Detections

__all__ = ["MatchReport", "match_detections"]


@dataclass(frozen=True)
class MatchReport:
    """How well two detection sets agree.

    Attributes:
        matched: pairs found (same frame, same class, IoU >= the threshold).
        unmatched_a, unmatched_b: scores of the rows of ``a`` / ``b`` left without a partner.
        min_iou, mean_iou: over the matched pairs (1.0 when there are none).
        max_score_diff: largest ``|score_a - score_b|`` over the matched pairs (0.0 when none).
    """

    matched: int
    unmatched_a: tuple[float, ...]
    unmatched_b: tuple[float, ...]
    min_iou: float
    mean_iou: float
    max_score_diff: float

    @property
    def identical_sets(self) -> bool:
        """Every detection of each side has a partner on the other."""
        return not self.unmatched_a and not self.unmatched_b

    def as_dict(self) -> dict[str, object]:
        return {
            "matched": self.matched,
            "unmatched_a": list(self.unmatched_a),
            "unmatched_b": list(self.unmatched_b),
            "min_iou": self.min_iou,
            "mean_iou": self.mean_iou,
            "max_score_diff": self.max_score_diff,
        }


def match_detections(a: Detections, b: Detections, *, iou: float = 0.5) -> MatchReport:
    """Match ``a`` against ``b`` (see the module docstring); both may be on any device."""
    import torch
    from torchvision.ops import box_iou

    a, b = a.cpu(), b.cpu()
    if len(a) and len(b):
        ious = box_iou(a.boxes.double(), b.boxes.double())
        same = (a.class_ids[:, None] == b.class_ids[None, :]) & (a.frame[:, None] == b.frame[None, :])
        ious = torch.where(same, ious, torch.full_like(ious, -1.0))
    else:
        ious = torch.zeros((len(a), len(b)), dtype=torch.float64)
    taken = torch.zeros(len(b), dtype=torch.bool)
    pairs: list[tuple[int, int, float]] = []
    for i in torch.argsort(a.scores, descending=True).tolist():
        if len(b) == 0:
            break
        row = ious[i].masked_fill(taken, -1.0)
        j = int(row.argmax())
        if float(row[j]) >= iou:
            taken[j] = True
            pairs.append((i, j, float(row[j])))
    used_a = {i for i, _, _ in pairs}
    ov = [p[2] for p in pairs]
    diffs = [abs(float(a.scores[i]) - float(b.scores[j])) for i, j, _ in pairs]
    return MatchReport(
        matched=len(pairs),
        unmatched_a=tuple(float(s) for k, s in enumerate(a.scores.tolist()) if k not in used_a),
        unmatched_b=tuple(float(s) for k, s in enumerate(b.scores.tolist()) if not taken[k]),
        min_iou=min(ov, default=1.0),
        mean_iou=sum(ov) / len(ov) if ov else 1.0,
        max_score_diff=max(diffs, default=0.0),
    )
