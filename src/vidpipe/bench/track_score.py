"""Scoring a tracker's output on a generated :class:`~vidpipe.bench.track_scenes.Scene` with
``motmetrics`` (MOTA, IDF1, ID switches, ...), and running trackers over a scene.

Two trackers run on the same detections: vidpipe's (:class:`~vidpipe.track.TrackerStage`, fed
:class:`~vidpipe.types.FrameResult` batches as the pipeline does) and the ``trackers`` package's
``ByteTrackTracker`` (fed ``supervision.Detections`` and each frame's timestamp). A hypothesis
matches a true box when their IoU is at least 0.5 (the MOTChallenge convention); the distance
matrix is ``1 - IoU`` computed here (motmetrics 1.4's own ``iou_matrix`` uses ``np.asfarray``,
which numpy 2 removed), the accounting (matching over time, switches, IDF1) is motmetrics'.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from vidpipe._lazy import optional_import

if TYPE_CHECKING:
    from vidpipe.bench.track_scenes import Scene
    from vidpipe.track import TrackConfig

__all__ = ["Hypothesis", "score", "run_vidpipe", "run_trackers", "TRACKERS_MATCHED", "METRICS"]

INSTALL = 'pip install "vidpipe[track-bench]" (motmetrics, and trackers for the comparison)'
#: motmetrics' names of what the table shows
METRICS = ("mota", "idf1", "num_switches", "num_false_positives", "num_misses", "num_fragmentations",
           "mostly_tracked", "num_unique_objects")  # fmt: skip

#: ``trackers.ByteTrackTracker`` settings matching vidpipe's defaults (its own defaults differ:
#: activation 0.7, IoU 0.1, high 0.6)
TRACKERS_MATCHED: dict[str, Any] = {
    "lost_track_buffer": 30, "frame_rate": 30.0, "track_activation_threshold": 0.6,
    "minimum_consecutive_frames": 2, "minimum_iou_threshold": 0.2, "high_conf_det_threshold": 0.5,
}  # fmt: skip

#: per frame of the scene: ``(boxes (H, 4), ids (H,))`` of the tracker's confirmed tracks
Hypothesis = list[tuple[np.ndarray, np.ndarray]]


def _iou_distance(gt: np.ndarray, hyp: np.ndarray, min_iou: float = 0.5) -> np.ndarray:
    from vidpipe.track.assign import iou_matrix

    iou = iou_matrix(gt, hyp)
    return np.where(iou >= min_iou, 1.0 - iou, np.nan)


def score(scene: "Scene", hyp: Hypothesis) -> dict[str, float]:
    """MOT metrics of ``hyp`` on ``scene`` (keys: :data:`METRICS`)."""
    mm = optional_import("motmetrics", purpose="scoring trackers (vidpipe bench track)", install=INSTALL)
    acc = mm.MOTAccumulator(auto_id=True)
    for frame, (boxes, ids) in zip(scene.frames, hyp):
        acc.update(frame.gt_ids.tolist(), ids.tolist(), _iou_distance(frame.gt_boxes, boxes))
    table = mm.metrics.create().compute(acc, metrics=list(METRICS), name="x")
    return {k: float(table[k].iloc[0]) for k in METRICS}


def _results(scene: "Scene", device: str = "cpu") -> list:
    """The scene as the FrameResults a pipeline would hand the tracker (one stream)."""
    import torch

    from vidpipe.types import Detections, FrameMeta, FrameResult

    out = []
    for f in scene.frames:
        n = len(f.scores)
        dets = Detections(
            torch.from_numpy(f.boxes).to(device), torch.from_numpy(f.scores).to(device),
            torch.from_numpy(f.class_ids).to(device), torch.zeros(n, dtype=torch.int64, device=device),
        )  # fmt: skip
        meta = FrameMeta("scene", 0, f.index, f.t, scene.spec.height, scene.spec.width)
        out.append(FrameResult(meta, dets))
    return out


def run_vidpipe(
    scene: "Scene", config: "TrackConfig | None" = None, *, batch: int = 32, device: str = "cpu",
    results: Sequence | None = None, engine: str = "auto",
) -> tuple[Hypothesis, float]:
    """vidpipe's tracker (``engine``: see :class:`~vidpipe.track.TrackerStage`) over ``scene`` in
    batches of ``batch`` frames -> ``(hypothesis, seconds)`` (the seconds are the stage's
    ``process`` calls only, after the tracker was compiled)."""
    from vidpipe.track import TrackerStage

    stage = TrackerStage(config, worker="inline", engine=engine)  # the tracker itself, without a helper process
    stage.wait_ready()
    results = list(results) if results is not None else _results(scene, device)
    hyp: Hypothesis = []
    spent = 0.0
    for i in range(0, len(results), batch):
        t0 = time.perf_counter()
        out = stage.process(results[i : i + batch])
        spent += time.perf_counter() - t0
        for r in out:
            d = r.detections.cpu()
            ids = d.track_ids.numpy()
            keep = ids >= 0
            hyp.append((d.boxes.numpy()[keep], ids[keep]))
    return hyp, spent


def run_trackers(scene: "Scene", options: Mapping[str, Any] | None = None) -> tuple[Hypothesis, float]:
    """The ``trackers`` package's ``ByteTrackTracker`` over ``scene`` (its defaults, or
    ``options``), given each frame's timestamp -> ``(hypothesis, seconds)``."""
    trackers = optional_import("trackers", purpose="the ByteTrack comparison (vidpipe bench track)", install=INSTALL)
    import supervision as sv

    tracker = trackers.ByteTrackTracker(**dict(options or {}))
    hyp: Hypothesis = []
    spent = 0.0
    for f in scene.frames:
        dets = sv.Detections(xyxy=f.boxes.astype(np.float32), confidence=f.scores, class_id=f.class_ids)
        t0 = time.perf_counter()
        out = tracker.update(dets, timestamp=f.t)
        spent += time.perf_counter() - t0
        ids = np.asarray(out.tracker_id, dtype=np.int64) if out.tracker_id is not None else np.zeros(0, np.int64)
        keep = ids >= 0
        hyp.append((np.asarray(out.xyxy)[keep], ids[keep]))
    return hyp, spent
