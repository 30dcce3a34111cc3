"""Ground-truth scenes for the zones tests: tracked boxes whose bottom-centre anchor follows known
paths, as :class:`vidpipe.types.FrameResult` objects (what a tracker hands the zones stage)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import torch

from vidpipe.types import Detections, FrameMeta, FrameResult

NAMES = ("person", "bicycle", "car")
W, H = 20.0, 40.0  # box size around the anchor


def boxes_at(points: np.ndarray) -> np.ndarray:
    """Boxes whose bottom centre is ``points`` ``(n, 2)`` -> ``(n, 4)``."""
    x, y = points[:, 0], points[:, 1]
    return np.stack([x - W / 2, y - H, x + W / 2, y], axis=1)


def frame(
    index: int,
    rows: Sequence[tuple[int, int, float, float]],
    *,
    stream_id: int = 0,
    fps: float = 10.0,
    pts: float | None | str = "auto",
    mono: float | None = None,
    wall: float | None = None,
    connection: int = 0,
    device: str = "cpu",
    tracked: bool = True,
) -> FrameResult:
    """One frame: ``rows`` of ``(track_id, class_id, anchor x, anchor y)``."""
    arr = np.asarray(rows, dtype=np.float64).reshape(-1, 4)
    n = len(arr)
    boxes = torch.as_tensor(boxes_at(arr[:, 2:4]), dtype=torch.float32, device=device)
    dets = Detections(
        boxes,
        torch.ones(n, device=device),
        torch.as_tensor(arr[:, 1], dtype=torch.int64, device=device),
        torch.zeros(n, dtype=torch.int64, device=device),
        torch.as_tensor(arr[:, 0], dtype=torch.int64, device=device) if tracked else None,
    )
    meta = FrameMeta(
        f"cam{stream_id}.mp4", stream_id, index, index / fps if pts == "auto" else pts, 480, 640,
        captured_at=wall, captured_mono=mono, connection=connection,
    )
    return FrameResult(meta, dets, names=NAMES)


def frames_from_paths(
    paths: Mapping[int, Mapping[int, tuple[float, float]]],
    *,
    classes: Mapping[int, int] | None = None,
    n_frames: int | None = None,
    **kw,
) -> list[FrameResult]:
    """``{track_id: {frame index: (x, y)}}`` -> one FrameResult per frame (tracks missing from a
    frame are not detected in it)."""
    last = max(i for p in paths.values() for i in p) + 1 if n_frames is None else n_frames
    out = []
    for i in range(last):
        rows = [(tid, (classes or {}).get(tid, 0), *p[i]) for tid, p in sorted(paths.items()) if i in p]
        out.append(frame(i, rows, **kw))
    return out


def linear(start: tuple[float, float], end: tuple[float, float], frames: Iterable[int]) -> dict[int, tuple[float, float]]:
    """Evenly from ``start`` to ``end`` over ``frames`` (a range)."""
    frames = list(frames)
    k = max(1, len(frames) - 1)
    return {f: (start[0] + (end[0] - start[0]) * j / k, start[1] + (end[1] - start[1]) * j / k)
            for j, f in enumerate(frames)}


def events(results: Iterable[FrameResult], kind: str | None = None) -> list:
    return [e for r in results for e in r.events if kind is None or e.kind == kind]
