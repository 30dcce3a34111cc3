"""``vidpipe bench follow``: the follow-cam's smoothness and framing on generated scenes with
ground truth (:mod:`vidpipe.follow.scenes`), beside two naive cameras in the same run on the same
detections: ``none`` (the window centred on each detection) and ``ema`` (an exponential moving
average of it, 0.25 s). Metrics: :mod:`vidpipe.follow.metrics` (jerk in wide-shot widths/s³,
target-in-frame and safe-area shares, recovery seconds after the ball returns into view).

Also: the planner's rate (frames per second of ``Planner.update``, this CPU) and how much the
window moves when every other frame is dropped (same timestamps; the planner runs on time, so
the path should not change: the largest difference at the common frames, in wide-shot widths).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["FollowBench", "run_follow_bench", "write_json", "CAMERAS"]

CAMERAS = ("planner", "none", "ema")
_METRICS = ("jerk_mean", "jerk_p95", "in_frame", "safe_area", "recovery_s")


def _factories(config: Any = None) -> dict[str, Any]:
    from vidpipe.follow.baselines import CentreOnDetection, MovingAverage
    from vidpipe.follow.planner import Planner

    return {
        "planner": lambda w, h: Planner(w, h, config),
        "none": lambda w, h: CentreOnDetection(w, h, config),
        "ema": lambda w, h: MovingAverage(w, h, config),
    }


@dataclass
class FollowBench:
    """``rows``: ``{scene, camera, seeds, jerk_mean, jerk_p95, in_frame, safe_area, recovery_s}``
    (means over the seeds; ``recovery_s`` ``None`` where the ball never returns into view);
    ``drop_check``: per scene the largest window difference with every other frame dropped;
    ``rate_fps``: ``Planner.update`` calls per second."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    drop_check: dict[str, float] = field(default_factory=dict)
    rate_fps: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "drop_check": self.drop_check, "rate_fps": self.rate_fps}

    def table(self) -> str:
        lines = ["| scene | camera | jerk mean | jerk p95 | in frame | safe area | recovery s |",
                 "|---|---|---:|---:|---:|---:|---:|"]  # fmt: skip
        for r in self.rows:
            rec = "-" if r["recovery_s"] is None else f"{r['recovery_s']:.2f}"
            lines.append(f"| {r['scene']} | {r['camera']} | {r['jerk_mean']:.2f} | {r['jerk_p95']:.2f} | "
                         f"{r['in_frame']:.3f} | {r['safe_area']:.3f} | {rec} |")  # fmt: skip
        lines += ["", "jerk: |d³(cx, cy, w)/dt³| in wide-shot widths/s³; in frame / safe area: share of frames with the "
                  "ball in view whose true box is inside the window / its central 80 %"]  # fmt: skip
        if self.drop_check:
            worst = ", ".join(f"{k} {v:.4f}" for k, v in self.drop_check.items())
            lines.append(f"every other frame dropped, largest window change (wide-shot widths): {worst}")
        lines.append(f"Planner.update: {self.rate_fps:,.0f} frames/s (this CPU, one thread)")
        return "\n".join(lines)


def run_follow_bench(scenes: Sequence[str], *, seeds: int = 5, config: Any = None) -> FollowBench:
    import numpy as np

    from vidpipe.follow.metrics import run_camera, score_path
    from vidpipe.follow.planner import Planner
    from vidpipe.follow.scenes import make_scene
    from vidpipe.follow.window import wide_window

    out = FollowBench()
    cams = _factories(config)
    for name in scenes:
        per: dict[str, list[dict[str, Any]]] = {c: [] for c in cams}
        for seed in range(seeds):
            scene = make_scene(name, seed=seed)
            for cam, make in cams.items():
                per[cam].append(score_path(scene, run_camera(make(scene.width, scene.height), scene)).to_dict())
        for cam, scores in per.items():
            row: dict[str, Any] = {"scene": name, "camera": cam, "seeds": seeds}
            for k in _METRICS:
                vals = [s[k] for s in scores if s[k] is not None]
                row[k] = float(np.mean(vals)) if vals else None
            out.rows.append(row)
        scene = make_scene(name, seed=0, dropout=0.0)
        full = run_camera(Planner(scene.width, scene.height, config), scene)[::2]
        half = run_camera(Planner(scene.width, scene.height, config), scene.subsample(2))
        ref = wide_window(scene.width, scene.height, full[0].w / full[0].h).w
        out.drop_check[name] = max(max(abs(a.cx - b.cx), abs(a.cy - b.cy), abs(a.w - b.w))
                                   for a, b in zip(full, half)) / ref  # fmt: skip
    scene = make_scene("bounce", seed=0)
    planner = Planner(scene.width, scene.height, config)
    t0 = time.perf_counter()
    run_camera(planner, scene)
    out.rate_fps = len(scene.times) / (time.perf_counter() - t0)
    return out


def write_json(result: FollowBench, path: str | Path) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(result.to_dict(), indent=2) + "\n")
    return p
