"""Generated tracking scenes with ground truth, and detections derived from it (seeded).

A :class:`Scene` is a list of :class:`SceneFrame` (the frames a tracker is given, in order): the
true boxes and identities of the objects visible in that frame, and the "detections" a detector
might have produced: the visible objects' boxes with noise, scored by how much of them is
visible (occluded ones score low, then are missed), random misses, and false positives.

Objects move at constant velocity with a little jitter, bounce off or leave the frame; some
cross each other (the nearer one occludes the other: objects have a depth); some leave and come
back later under their old identity (a ground-truth id is a physical object). Dropped frames
(single frames and bursts) are left out of the list but keep their times, as a live camera's
would. Presets: :data:`PRESETS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["SceneFrame", "Scene", "SceneSpec", "PRESETS", "make_scene"]


@dataclass(frozen=True)
class SceneFrame:
    """One frame given to the tracker.

    Attributes:
        index: frame number (dropped frames leave gaps); ``t``: its time, seconds.
        gt_ids: ``(G,)`` int64 true identities of the visible objects; ``gt_boxes``: ``(G, 4)`` xyxy.
        boxes: ``(N, 4)`` float32 detections, ``scores`` ``(N,)`` float32, ``class_ids`` ``(N,)`` int64.
        det_gt: ``(N,)`` int64 the true identity a detection came from, ``-1`` for a false positive.
    """

    index: int
    t: float
    gt_ids: np.ndarray
    gt_boxes: np.ndarray
    boxes: np.ndarray
    scores: np.ndarray
    class_ids: np.ndarray
    det_gt: np.ndarray


@dataclass(frozen=True)
class SceneSpec:
    """How a scene is generated (see :data:`PRESETS`)."""

    objects: int = 6
    frames: int = 300
    fps: float = 30.0
    width: int = 1280
    height: int = 720
    speed: float = 4.0  # pixels per frame, typical
    size: tuple[float, float] = (40.0, 120.0)  # box heights, min and max
    crossing: bool = False  # objects move on paths that cross (pairs moving towards each other)
    comeback: float = 0.0  # fraction of objects that leave and come back
    noise: float = 0.03  # box noise, standard deviation as a fraction of the box size
    miss: float = 0.02  # chance a visible object is not detected
    false_positives: float = 0.1  # mean false positives per frame
    drop: float = 0.0  # chance a frame is dropped
    burst: float = 0.0  # chance a dropped frame starts a burst of 2-6 dropped frames
    classes: int = 1


@dataclass(frozen=True)
class Scene:
    name: str
    spec: SceneSpec
    frames: list[SceneFrame] = field(repr=False)

    @property
    def detections(self) -> int:
        return sum(len(f.scores) for f in self.frames)


PRESETS: dict[str, SceneSpec] = {
    # few well separated objects, small noise: a correct tracker keeps every identity
    "easy": SceneSpec(objects=5, frames=240, speed=3.0, noise=0.02, miss=0.01, false_positives=0.05),
    # pairs walking through each other with occlusion: the low-score stage and the Kalman
    # velocity keep them apart
    "crossing": SceneSpec(objects=8, frames=300, crossing=True, noise=0.03, miss=0.03, false_positives=0.1),
    # many objects, all effects: crossings, objects leaving and returning, misses, false positives
    "crowd": SceneSpec(objects=24, frames=300, crossing=True, comeback=0.3, noise=0.04, miss=0.05,
                       false_positives=0.5, classes=2),  # fmt: skip
    # a live camera dropping frames (single frames and bursts): real time keeps tracks together
    "drops": SceneSpec(objects=10, frames=300, crossing=True, noise=0.03, miss=0.03, false_positives=0.2,
                       drop=0.15, burst=0.3),  # fmt: skip
}


def make_scene(name: str = "easy", *, seed: int = 0, spec: SceneSpec | None = None) -> Scene:
    """The scene ``name`` of :data:`PRESETS` (or ``spec``), generated with ``seed``."""
    if spec is None:
        if name not in PRESETS:
            raise ValueError(f"unknown scene {name!r}; expected one of {', '.join(PRESETS)}")
        spec = PRESETS[name]
    rng = np.random.default_rng(seed)
    traj = _trajectories(spec, rng)  # (F, K, 4) boxes, NaN when absent
    depth = rng.permutation(spec.objects)  # larger is nearer
    cls = rng.integers(0, spec.classes, spec.objects)
    kept = _kept_frames(spec, rng)
    frames = []
    for f in kept:
        boxes = traj[f]
        present = ~np.isnan(boxes[:, 0])
        idx = np.flatnonzero(present)
        vis = _visibility(boxes[idx], depth[idx])
        seen = vis >= 0.25  # mostly hidden objects are not ground truth a tracker could see
        gt_ids = idx[seen].astype(np.int64)
        gt_boxes = boxes[gt_ids]
        frames.append(_detect(spec, rng, f, gt_ids, gt_boxes, vis[seen], cls))
    return Scene(name, spec, frames)


def _trajectories(spec: SceneSpec, rng: np.random.Generator) -> np.ndarray:
    k, n, w, h = spec.objects, spec.frames, spec.width, spec.height
    out = np.full((n, k, 4), np.nan)
    for i in range(k):
        bh = rng.uniform(*spec.size)
        bw = bh * rng.uniform(0.35, 0.6)
        if spec.crossing and i % 2 == 1:  # the partner of object i-1: start opposite, move towards it
            y = rng.uniform(0.3, 0.7) * h
            x0, x1 = 0.1 * w, 0.9 * w
            start = np.array([x1 if (i // 2) % 2 == 0 else x0, y])
            v = np.array([-1.0 if (i // 2) % 2 == 0 else 1.0, rng.normal(0, 0.05)]) * spec.speed * rng.uniform(0.7, 1.3)
        elif spec.crossing:
            y = rng.uniform(0.3, 0.7) * h
            start = np.array([0.1 * w if (i // 2) % 2 == 0 else 0.9 * w, y])
            v = np.array([1.0 if (i // 2) % 2 == 0 else -1.0, rng.normal(0, 0.05)]) * spec.speed * rng.uniform(0.7, 1.3)
        else:
            start = rng.uniform([0.15 * w, 0.15 * h], [0.85 * w, 0.85 * h])
            ang = rng.uniform(0, 2 * np.pi)
            v = np.array([np.cos(ang), np.sin(ang)]) * spec.speed * rng.uniform(0.6, 1.4)
        pos = start.copy()
        away = (-1, -1)
        if rng.random() < spec.comeback:
            a = int(rng.integers(n // 5, n // 2))
            away = (a, a + int(rng.integers(n // 8, n // 4)))
        for f in range(n):
            v = v + rng.normal(0, 0.05 * spec.speed, 2) * 0.2  # small jitter in velocity
            pos = pos + v
            for ax, lim in ((0, w), (1, h)):  # bounce off the borders
                if pos[ax] < bw / 2 or pos[ax] > lim - bw / 2:
                    v[ax] = -v[ax]
                    pos[ax] = np.clip(pos[ax], bw / 2, lim - bw / 2)
            if away[0] <= f < away[1]:
                continue  # out of the picture (left and will come back)
            out[f, i] = (pos[0] - bw / 2, pos[1] - bh / 2, pos[0] + bw / 2, pos[1] + bh / 2)
    return out


def _kept_frames(spec: SceneSpec, rng: np.random.Generator) -> list[int]:
    kept, f = [], 0
    while f < spec.frames:
        if f > 0 and rng.random() < spec.drop:
            f += int(rng.integers(2, 7)) if rng.random() < spec.burst else 1
            continue
        kept.append(f)
        f += 1
    return kept


def _visibility(boxes: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """Fraction of each box not covered by the nearer boxes (pairwise, the largest cover)."""
    k = boxes.shape[0]
    if k == 0:
        return np.zeros(0)
    iw = np.minimum(boxes[:, None, 2], boxes[None, :, 2]) - np.maximum(boxes[:, None, 0], boxes[None, :, 0])
    ih = np.minimum(boxes[:, None, 3], boxes[None, :, 3]) - np.maximum(boxes[:, None, 1], boxes[None, :, 1])
    inter = np.clip(iw, 0, None) * np.clip(ih, 0, None)
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    nearer = depth[None, :] > depth[:, None]
    covered = np.where(nearer, inter / area[:, None], 0.0)
    return 1.0 - np.clip(covered.sum(1), 0, 1)


def _detect(spec, rng, f, gt_ids, gt_boxes, vis, cls) -> SceneFrame:
    n = gt_ids.size
    wh = np.stack([gt_boxes[:, 2] - gt_boxes[:, 0], gt_boxes[:, 3] - gt_boxes[:, 1]], 1)
    noisy = gt_boxes + rng.normal(0, spec.noise, (n, 4)) * np.concatenate([wh, wh], 1)
    # score: high when fully visible, low when half hidden (ByteTrack's second stage), else missed
    score = np.where(vis > 0.7, rng.uniform(0.55, 0.95, n), np.where(vis > 0.4, rng.uniform(0.15, 0.45, n), 0.0))
    detected = (score > 0) & (rng.random(n) >= spec.miss)
    boxes, scores, classes, src = [noisy[detected]], [score[detected]], [cls[gt_ids[detected]]], [gt_ids[detected]]
    nfp = int(rng.poisson(spec.false_positives))
    if nfp:
        bh = rng.uniform(*spec.size, nfp)
        bw = bh * rng.uniform(0.35, 0.6, nfp)
        x = rng.uniform(0, spec.width - bw)
        y = rng.uniform(0, spec.height - bh)
        boxes.append(np.stack([x, y, x + bw, y + bh], 1))
        scores.append(np.where(rng.random(nfp) < 0.3, rng.uniform(0.5, 0.75, nfp), rng.uniform(0.1, 0.5, nfp)))
        classes.append(rng.integers(0, spec.classes, nfp))
        src.append(np.full(nfp, -1))
    return SceneFrame(
        index=f, t=f / spec.fps, gt_ids=gt_ids, gt_boxes=gt_boxes.astype(np.float32),
        boxes=np.concatenate(boxes).astype(np.float32), scores=np.concatenate(scores).astype(np.float32),
        class_ids=np.concatenate(classes).astype(np.int64), det_gt=np.concatenate(src).astype(np.int64),
    )  # fmt: skip
