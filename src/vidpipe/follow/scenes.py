"""Generated follow-cam scenes with ground truth: a ball moving on a known path, and what a
detector would report of it (position and size noise, dropped detections, nothing while it is
out of the frame). Used by :mod:`vidpipe.follow.metrics`, ``vidpipe bench follow`` and the tests.

Scenes (:data:`SCENES`):

- ``still``: the ball lies still off-centre; only detection jitter (the camera should not move).
- ``linear``: a straight pass across the frame at constant speed.
- ``bounce``: a ball bouncing off the frame's edges (sudden reversals of one axis).
- ``turn``: a fast run that reverses direction at once halfway.
- ``leave``: the ball runs out of the frame on the right, stays out ~3 s, and comes back slower.

Every scene also drops detections: single frames at random (``dropout``) and one burst of
0.4 s (a tracker losing the ball briefly).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

__all__ = ["SCENES", "Scene", "make_scene"]

SCENES = ("still", "linear", "bounce", "turn", "leave")


@dataclass(frozen=True, repr=False)
class Scene:
    """One generated scene.

    Attributes:
        name, seed: which scene, which random draw.
        width, height: the source frame's size in pixels.
        times: ``(T,)`` float64 seconds, each frame's timestamp.
        truth: ``(T, 4)`` float64 the ball's true box x1, y1, x2, y2 (may lie outside the frame).
        visible: ``(T,)`` bool, the true box wholly inside the frame.
        detections: ``T`` noisy boxes ``(x1, y1, x2, y2)``, ``None`` where nothing was detected.
        stays_in_frame: the ball never leaves the frame.
    """

    name: str
    seed: int
    width: int
    height: int
    times: "np.ndarray"
    truth: "np.ndarray"
    visible: "np.ndarray"
    detections: "tuple[tuple[float, float, float, float] | None, ...]"
    stays_in_frame: bool

    def __repr__(self) -> str:
        return f"Scene({self.name!r}, seed={self.seed}, {self.width}x{self.height}, frames={len(self.times)})"

    def subsample(self, step: int) -> "Scene":
        """Every ``step``-th frame (as if a live stream dropped the others); same timestamps."""
        keep = slice(None, None, step)
        return Scene(self.name, self.seed, self.width, self.height, self.times[keep], self.truth[keep],
                     self.visible[keep], self.detections[keep], self.stays_in_frame)  # fmt: skip


def _bounce(p0: float, v: float, t: "np.ndarray", lo: float, hi: float) -> "np.ndarray":
    """Positions of a point moving at ``v`` from ``p0``, reflected between ``lo`` and ``hi``."""
    import numpy as np

    span = hi - lo
    u = np.mod(p0 - lo + v * t, 2 * span)
    return lo + np.where(u > span, 2 * span - u, u)


def _path(name: str, t: "np.ndarray", w: int, h: int, rng: "np.random.Generator") -> "tuple[np.ndarray, np.ndarray]":
    import numpy as np

    dur = float(t[-1]) if len(t) else 1.0
    if name == "still":
        x = np.full_like(t, w * rng.uniform(0.25, 0.75))
        y = np.full_like(t, h * rng.uniform(0.3, 0.7))
    elif name == "linear":
        x0, x1 = w * 0.1, w * 0.9
        if rng.random() < 0.5:
            x0, x1 = x1, x0
        x = x0 + (x1 - x0) * t / dur
        y = h * rng.uniform(0.3, 0.7) + h * rng.uniform(-0.2, 0.2) * t / dur
    elif name == "bounce":
        sx, sy = w * rng.uniform(0.25, 0.35), h * rng.uniform(0.25, 0.4)
        x = _bounce(w * rng.uniform(0.2, 0.8), sx * rng.choice((-1, 1)), t, w * 0.03, w * 0.97)
        y = _bounce(h * rng.uniform(0.2, 0.8), sy * rng.choice((-1, 1)), t, h * 0.05, h * 0.95)
    elif name == "turn":
        # right at 0.19 W/s for half the scene, then at once back up and left
        tc = dur / 2
        p0 = np.array([w * 0.1, h * rng.uniform(0.4, 0.6)])
        pc = np.array([w * 0.85, h * rng.uniform(0.55, 0.75)])
        end = np.array([w * 0.2, h * 0.25])
        v1, v2 = (pc - p0) / tc, (end - pc) / (dur - tc)
        before = t[:, None] <= tc
        pts = np.where(before, p0 + v1 * t[:, None], pc + v2 * (t[:, None] - tc))
        x, y = pts[:, 0], pts[:, 1]
    elif name == "leave":
        # right at 0.3 W/s from the centre, out of the frame at ~1.6 s, turns 1 s later
        # (0.3 W beyond the edge), comes back at 0.15 W/s: back in view at ~4.7 s
        out_speed, back_speed = w * 0.3, w * 0.15
        t_turn = (w * 0.5 + out_speed * 1.0) / out_speed
        x = np.where(t <= t_turn, w * 0.5 + out_speed * t, w * 0.5 + out_speed * t_turn - back_speed * (t - t_turn))
        y = h * 0.5 + h * 0.15 * np.sin(t * 0.8)
    else:
        raise ValueError(f"unknown scene {name!r}; expected one of {', '.join(SCENES)}")
    return x, y


def make_scene(
    name: str,
    *,
    seed: int = 0,
    fps: float = 30.0,
    seconds: float = 8.0,
    width: int = 1920,
    height: int = 1080,
    ball: float = 24.0,
    noise: float = 3.0,
    dropout: float = 0.05,
) -> Scene:
    """Generate scene ``name`` (one of :data:`SCENES`) with ``seed``.

    Args:
        fps, seconds: frames per second and length.
        width, height: the source frame's size in pixels.
        ball: the ball's diameter in pixels.
        noise: standard deviation in pixels of the detected centre (and of its size).
        dropout: share of frames whose detection is missing at random (plus one 0.4 s burst).
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    n = int(round(seconds * fps))
    t = np.arange(n, dtype=np.float64) / fps
    x, y = _path(name, t, width, height, rng)
    r = ball / 2
    truth = np.stack([x - r, y - r, x + r, y + r], axis=1)
    visible = (truth[:, 0] >= 0) & (truth[:, 1] >= 0) & (truth[:, 2] <= width) & (truth[:, 3] <= height)
    present = visible & (rng.random(n) >= dropout)
    burst_at = int(rng.uniform(0.25, 0.45) * n)
    present[burst_at : burst_at + int(0.4 * fps)] = False
    jitter = rng.normal(0.0, noise, size=(n, 2))
    size = np.maximum(ball + rng.normal(0.0, noise / 2, size=n), 2.0)
    dets: list[tuple[float, float, float, float] | None] = []
    for i in range(n):
        if not present[i]:
            dets.append(None)
            continue
        cx, cy, s = x[i] + jitter[i, 0], y[i] + jitter[i, 1], size[i] / 2
        dets.append((float(cx - s), float(cy - s), float(cx + s), float(cy + s)))
    return Scene(name, seed, width, height, t, truth, visible, tuple(dets), bool(visible.all()))
