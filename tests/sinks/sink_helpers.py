"""Helpers for the sink tests (imported by name: pytest puts this folder on sys.path): FrameResults with known detections, built from vidpipe.types."""

from __future__ import annotations

import torch

from vidpipe.types import Detections, FrameMeta, FrameResult

NAMES = ("person", "bicycle", "car")


def make_result(
    index: int,
    boxes: list[list[float]],
    scores: list[float],
    class_ids: list[int],
    *,
    source: str = "clip.mp4",
    stream_id: int = 0,
    pts: float | None = None,
    track_ids: list[int] | None = None,
    names: tuple[str, ...] = NAMES,
    device: str = "cpu",
    box_dtype: torch.dtype = torch.float32,
) -> FrameResult:
    n = len(boxes)
    det = Detections(
        boxes=torch.tensor(boxes, dtype=box_dtype, device=device).reshape(n, 4),
        scores=torch.tensor(scores, dtype=torch.float32, device=device),
        class_ids=torch.tensor(class_ids, dtype=torch.int64, device=device),
        frame=torch.zeros(n, dtype=torch.int64, device=device),
        track_ids=None if track_ids is None else torch.tensor(track_ids, dtype=torch.int64, device=device),
    )
    meta = FrameMeta(source=source, stream_id=stream_id, index=index, pts=pts, height=480, width=640)
    return FrameResult(meta, det, names)


def sample_batches(device: str = "cpu") -> list[list[FrameResult]]:
    """Two batches: frames with 2, 0 and 1 detections, then 3 and 0 (one with unknown pts).

    Expected rows are :data:`EXPECTED` (source, frame, pts, class_id, class_name, conf, box).
    """
    return [
        [
            make_result(0, [[10.004, 20.5, 110.25, 220.0], [0.0, 0.0, 639.0, 479.0]], [0.91234, 0.5],
                        [0, 2], pts=0.0, device=device),
            make_result(1, [], [], [], pts=1 / 30, device=device),
            make_result(2, [[5.125, 6.0, 7.0, 8.0]], [0.25], [7], pts=2 / 30, device=device),
        ],
        [
            make_result(3, [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]], [0.1, 0.2, 0.3], [1, 1, 0],
                        pts=None, device=device),
            make_result(4, [], [], [], pts=4 / 30, device=device),
        ],
    ]


# (frame, pts, class_id, class_name, confidence, x1, y1, x2, y2); class 7 has no name -> "7".
EXPECTED = [
    (0, 0.0, 0, "person", 0.91234, 10.004, 20.5, 110.25, 220.0),
    (0, 0.0, 2, "car", 0.5, 0.0, 0.0, 639.0, 479.0),
    (2, 2 / 30, 7, "7", 0.25, 5.125, 6.0, 7.0, 8.0),
    (3, None, 1, "bicycle", 0.1, 1, 2, 3, 4),
    (3, None, 1, "bicycle", 0.2, 5, 6, 7, 8),
    (3, None, 0, "person", 0.3, 9, 10, 11, 12),
]
