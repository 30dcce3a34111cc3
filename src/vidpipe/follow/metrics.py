"""How well a virtual camera follows: jerk of its path, target-in-frame share, safe-area share
and time to recover, measured against a :class:`~vidpipe.follow.scenes.Scene`'s ground truth.

- **Jerk**: ``|d³p/dt³|`` of the window's path ``p = (cx, cy, w)`` (the Euclidean norm over
  centre and width; finite differences over the frames' timestamps), divided by the wide shot's
  width: wide-shot widths per second cubed. Mean and 95th percentile over the frames.
- **In frame**: share of frames with the ball in view (wholly inside the source frame) whose
  true box is wholly inside the window.
- **Safe area**: the same for the central 80 % of the window (the title-safe area).
- **Recovery**: after the ball comes back into view (from out of the frame), seconds until its
  true box is inside the safe area and the window is zoomed in again (narrower than 80 % of the
  wide shot); the mean over the returns, ``None`` when the scene has none (``inf``: never).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from vidpipe.follow.scenes import Scene
    from vidpipe.follow.window import Window

__all__ = ["PathScore", "jerk", "run_camera", "score_path", "SAFE_AREA"]

SAFE_AREA = 0.8


@dataclass(frozen=True, slots=True)
class PathScore:
    """The scores of one camera on one scene (see the module docstring for each)."""

    jerk_mean: float
    jerk_p95: float
    in_frame: float
    safe_area: float
    recovery_s: float | None
    frames: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_camera(camera: Any, scene: "Scene") -> "list[Window]":
    """``camera.update(t, box)`` over the scene's frames -> one window per frame."""
    return [camera.update(float(t), d) for t, d in zip(scene.times, scene.detections)]


def jerk(times: "np.ndarray", path: "np.ndarray") -> "np.ndarray":
    """``(T,)`` magnitude of the third time derivative of ``path`` ``(T, D)`` (finite differences
    over the timestamps ``times`` ``(T,)``; exact inside a cubic's path at even spacing)."""
    import numpy as np

    if len(times) < 4:
        return np.zeros(0)
    d = path.astype(np.float64)
    for _ in range(3):
        d = np.gradient(d, times, axis=0)
    return np.linalg.norm(d, axis=1)


def score_path(scene: "Scene", windows: "Sequence[Window]") -> PathScore:
    import numpy as np

    from vidpipe.follow.window import wide_window

    ref = wide_window(scene.width, scene.height, windows[0].w / windows[0].h).w
    path = np.array([(w.cx, w.cy, w.w) for w in windows])
    j = jerk(scene.times, path) / ref
    inside = np.array([w.contains(tuple(b)) for w, b in zip(windows, scene.truth)])
    safe = np.array([w.contains(tuple(b), area=SAFE_AREA) for w, b in zip(windows, scene.truth)])
    vis = scene.visible
    n = int(vis.sum())
    rec = _recovery(scene, windows, safe, ref)
    return PathScore(
        jerk_mean=float(j.mean()) if len(j) else 0.0,
        jerk_p95=float(np.percentile(j, 95)) if len(j) else 0.0,
        in_frame=float(inside[vis].mean()) if n else 1.0,
        safe_area=float(safe[vis].mean()) if n else 1.0,
        recovery_s=rec,
        frames=len(windows),
    )


def _recovery(scene: "Scene", windows: "Sequence[Window]", safe: "np.ndarray", ref: float) -> float | None:
    vis = scene.visible
    returns = [i for i in range(1, len(vis)) if vis[i] and not vis[i - 1]]
    if not returns:
        return None
    times = []
    for i in returns:
        t = float("inf")
        for k in range(i, len(vis)):
            if not vis[k]:
                break
            if safe[k] and windows[k].w < 0.8 * ref:
                t = float(scene.times[k] - scene.times[i])
                break
        times.append(t)
    return sum(times) / len(times)


def compare(
    scene: "Scene", cameras: "dict[str, Callable[[int, int], Any]]"
) -> dict[str, PathScore]:
    """Each camera factory ``(width, height) -> camera`` run on ``scene`` -> its score."""
    return {name: score_path(scene, run_camera(make(scene.width, scene.height), scene))
            for name, make in cameras.items()}  # fmt: skip
