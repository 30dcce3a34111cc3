"""``vidpipe bench track``: tracker quality on generated scenes with ground truth (MOTA, IDF1, ID
switches, with motmetrics) for vidpipe's ByteTrack and the ``trackers`` package's
``ByteTrackTracker`` (its defaults, and settings matched to ours) on the same detections; the
tracker stage's rate at ~4, ~20 and ~100 detections per frame, compiled and numpy; and track counts on a real clip (no
ground truth there: tracks, their lengths and short fragments, for both trackers on the same
detections).

Scenes: :data:`vidpipe.bench.track_scenes.PRESETS`, several seeds each; the table shows means.
FPS is frames per second of the tracker alone (vidpipe: ``TrackerStage.process`` on 32-frame
batches of CPU tensors, the host copy and the ids' way back included; trackers: ``update``).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

__all__ = ["TrackBench", "run_track_bench", "measure_rate", "clip_tracks"]

_KEYS = ("mota", "idf1", "num_switches", "num_fragmentations", "num_false_positives", "num_misses")


@dataclass
class TrackBench:
    """Results: ``scenes`` rows ``{scene, tracker, seeds, mota, idf1, ...,  fps}``; ``rate`` rows
    ``{objects, detections_per_frame, fps, device, engine}``; ``clip``: per tracker track statistics (or empty)."""

    scenes: list[dict[str, Any]] = field(default_factory=list)
    rate: list[dict[str, Any]] = field(default_factory=list)
    clip: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: issue 13's target per scene and metric: ``{scene, metric, seeds, vidpipe, trackers, diff, se, met}``
    #: against ``trackers (matched)``; ``diff`` the mean paired difference over the seeds, ``se``
    #: its standard error (``None`` with one seed)
    targets: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"scenes": self.scenes, "rate": self.rate, "clip": self.clip, "notes": self.notes,
                "targets": self.targets}  # fmt: skip

    def table(self) -> str:
        lines = ["scene     tracker                MOTA    IDF1   IDsw  frag     FP     FN      fps"]
        for r in self.scenes:
            lines.append(
                f"{r['scene']:<9} {r['tracker']:<20} {r['mota']:6.3f}  {r['idf1']:6.3f}  {r['num_switches']:5.1f} "
                f"{r['num_fragmentations']:5.1f} {r['num_false_positives']:6.1f} {r['num_misses']:6.1f} {r['fps']:8,.0f}"
            )
        if self.rate:
            lines += ["", "TrackerStage.process rate (this CPU, 32-frame batches, inline), frames/s:"]
            for k in dict.fromkeys(r["objects"] for r in self.rate):
                rows = [r for r in self.rate if r["objects"] == k]
                lines.append(f"  {rows[0]['detections_per_frame']:6.1f} detections/frame: "
                             + ", ".join(f"{r['engine']} {r['fps']:10,.0f}" for r in rows))  # fmt: skip
        if self.clip:
            lines += ["", f"real clip {self.clip['clip']} ({self.clip['frames']} frames, {self.clip['detections']} "
                      "detections; no ground truth):"]  # fmt: skip
            for name, s in self.clip["trackers"].items():
                lines.append(
                    f"  {name:<20} tracks {s['tracks']:4d}  tracked {s['tracked_fraction']:.2f}  median length "
                    f"{s['median_length']:5.1f} frames  short (<5 frames) {s['short_tracks']:3d}"
                )
        if self.targets:
            lines += ["", f"target: MOTA and IDF1 >= trackers (matched), the same detections; the difference "
                      f"paired over {self.targets[0]['seeds']} seeds (mean +- standard error):"]  # fmt: skip
            for t in self.targets:
                se = f" +- {t['se']:.4f}" if t["se"] is not None else ""
                lines.append(f"  {t['scene']:<9} {t['metric'].upper():<5} {t['vidpipe']:.4f} vs {t['trackers']:.4f}: "
                             f"{t['diff']:+.4f}{se}  {'met' if t['met'] else 'NOT met'}")  # fmt: skip
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def _mean(ms: list[dict[str, float]]) -> dict[str, float]:
    return {k: float(np.mean([m[k] for m in ms])) for k in _KEYS}


def run_track_bench(
    scenes: Sequence[str] = ("easy", "crossing", "crowd", "drops"),
    *,
    seeds: int = 8,
    rate: bool = True,
    clip: str | None = None,
    device: str = "cpu",
) -> TrackBench:
    """Run the benchmark (see the module docstring); ``clip``: a video to count tracks on
    (``None``: skip)."""
    from vidpipe.bench.track_scenes import make_scene
    from vidpipe.bench.track_score import TRACKERS_MATCHED, run_trackers, run_vidpipe, score

    out = TrackBench()
    have_trackers = _have_trackers(out)
    for name in scenes:
        runs: dict[str, list] = {"vidpipe": [], "trackers (defaults)": [], "trackers (matched)": []}
        for seed in range(seeds):
            scene = make_scene(name, seed=seed)
            frames = len(scene.frames)
            hyp, sec = run_vidpipe(scene, device=device)
            runs["vidpipe"].append((score(scene, hyp), frames, sec))
            if have_trackers:
                for label, opts in (("trackers (defaults)", None), ("trackers (matched)", TRACKERS_MATCHED)):
                    hyp, sec = run_trackers(scene, opts)
                    runs[label].append((score(scene, hyp), frames, sec))
        for label, rs in runs.items():
            if rs:
                row = {"scene": name, "tracker": label, "seeds": seeds, **_mean([m for m, _, _ in rs])}
                row["fps"] = sum(f for _, f, _ in rs) / max(sum(s for _, _, s in rs), 1e-9)
                out.scenes.append(row)
        if runs["vidpipe"] and runs["trackers (matched)"]:
            out.targets += _paired(name, runs["vidpipe"], runs["trackers (matched)"])
    if rate:
        from vidpipe.track.compiled import available

        engines = ("compiled", "numpy") if available() else ("numpy",)
        out.rate = [measure_rate(k, device=device, engine=e) for k in (4, 20, 100) for e in engines]
    if clip is not None:
        out.clip = clip_tracks(clip, device=device, with_trackers=have_trackers)
    return out


def _paired(scene: str, ours: list, theirs: list) -> list[dict[str, Any]]:
    """MOTA and IDF1 of ``ours`` against ``theirs`` (per seed: ``(metrics, frames, seconds)``)."""
    out = []
    for metric in ("mota", "idf1"):
        a = np.array([m[metric] for m, _, _ in ours])
        b = np.array([m[metric] for m, _, _ in theirs])
        d = a - b
        se = float(d.std(ddof=1) / np.sqrt(d.size)) if d.size > 1 else None
        out.append({"scene": scene, "metric": metric, "seeds": int(d.size), "vidpipe": float(a.mean()),
                    "trackers": float(b.mean()), "diff": float(d.mean()), "se": se,
                    "met": bool(a.mean() >= b.mean())})  # fmt: skip
    return out


def _have_trackers(out: TrackBench) -> bool:
    try:
        import trackers  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - any import failure: compare nothing, say why
        out.notes.append(f"the trackers package is not importable ({type(exc).__name__}: {exc}); "
                         "install it to compare: pip install trackers")  # fmt: skip
        return False
    return True


def measure_rate(
    objects: int, *, frames: int = 600, device: str = "cpu", repeats: int = 3, engine: str = "auto"
) -> dict[str, Any]:
    """Frames/s of ``TrackerStage.process`` (the tracker ``engine``) on a generated scene of
    ``objects`` objects (about that many detections per frame), best of ``repeats``."""
    from vidpipe.bench.track_scenes import SceneSpec, make_scene
    from vidpipe.bench.track_score import _results, run_vidpipe

    spec = SceneSpec(objects=objects, frames=frames, size=(20.0, 60.0), speed=3.0, false_positives=1.0)
    scene = make_scene(spec=spec, seed=0)
    results = _results(scene, device)
    best = 0.0
    for _ in range(repeats):
        _, sec = run_vidpipe(scene, results=results, engine=engine)
        best = max(best, len(results) / sec)
    return {"objects": objects, "detections_per_frame": scene.detections / len(scene.frames), "fps": best,
            "device": device, "engine": engine}  # fmt: skip


def clip_tracks(path: str, *, device: str = "cpu", with_trackers: bool = True) -> dict[str, Any]:
    """Detect ``path`` once, then track the same detections with both trackers: track counts,
    lengths and short fragments (no ground truth)."""
    import vidpipe
    from vidpipe.bench.track_scenes import Scene, SceneFrame, SceneSpec
    from vidpipe.bench.track_score import TRACKERS_MATCHED, run_trackers, run_vidpipe

    frames = []
    width = height = 0
    for r in vidpipe.detect(path, device=device, results_on_host=True):
        d = r.detections
        t = r.meta.pts if r.meta.pts is not None else r.meta.index / 30
        height, width = r.meta.height, r.meta.width
        frames.append(SceneFrame(r.meta.index, float(t), np.zeros(0, np.int64), np.zeros((0, 4), np.float32),
                                 d.boxes.numpy(), d.scores.numpy(), d.class_ids.numpy(), np.zeros(len(d), np.int64)))
    scene = Scene(Path(path).name, SceneSpec(width=width, height=height), frames)
    hyps = {"vidpipe": run_vidpipe(scene)[0]}
    if with_trackers:
        hyps["trackers (defaults)"] = run_trackers(scene)[0]
        hyps["trackers (matched)"] = run_trackers(scene, TRACKERS_MATCHED)[0]
    stats = {}
    for name, hyp in hyps.items():
        lengths: dict[int, int] = {}
        tracked = 0
        for _, ids in hyp:
            tracked += len(ids)
            for i in ids.tolist():
                lengths[i] = lengths.get(i, 0) + 1
        ls = np.array(sorted(lengths.values())) if lengths else np.zeros(1)
        stats[name] = {"tracks": len(lengths), "tracked_fraction": tracked / max(scene.detections, 1),
                       "median_length": float(np.median(ls)), "short_tracks": int((ls < 5).sum()) if lengths else 0}  # fmt: skip
    return {"clip": str(path), "frames": len(frames), "detections": scene.detections, "trackers": stats}


def write_json(result: TrackBench, path: str | Path) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps({"written_at": time.time(), **result.to_dict()}, indent=2))
    return p
