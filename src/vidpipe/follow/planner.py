"""Where the virtual camera looks: :class:`Planner` turns one stream's target boxes into a smooth
crop :class:`~vidpipe.follow.window.Window` per frame (host side, a few microseconds a frame).

The camera's motion, per frame at time ``t`` (the frame's timestamp: dropped live frames do not
change the motion's speed)::

    target box ─► centre + lead (velocity x lead) ─► dead zone ─► goal ─► low-pass ─► spring ─► limits ─► clamp
                   size + speed ─► zoom ─────────────┘

- **Goal**: the target's centre, ahead by its estimated velocity times ``lead`` seconds (so the
  camera does not trail a moving target), and a width that keeps the target ``margin`` times its
  size in view, wider while it moves fast (``speed_zoom``), at most ``max_zoom`` times closer
  than the wide shot.
- **Dead zone**: the goal moves only when the target leaves a box of ``dead_zone`` times the
  window around it (and the zoom only by more than ``zoom_dead_zone``): detection jitter does
  not move the camera.
- **Smoothing**: a first-order low-pass of the goal, then a critically damped spring of the same
  rate (exact for any time step: together a third-order response whose acceleration does not
  jump) settling in about ``smooth`` seconds; speed and acceleration limits.
- **Lost target**: the window holds for ``hold`` seconds, then eases to the wide shot (the whole
  frame at the output's aspect) over about ``ease`` seconds; a target that returns is eased in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from vidpipe._validate import check_range
from vidpipe.follow.window import Window, wide_window

if TYPE_CHECKING:
    import numpy as np

__all__ = ["FollowConfig", "Planner", "pick_target"]

Mode = Literal["wide", "track", "hold"]


@dataclass(frozen=True, slots=True, kw_only=True)
class FollowConfig:
    """Options of the virtual camera (see the module docstring).

    Attributes:
        aspect: the output's width / height (``1280 / 720``).
        margin: the window is at least ``margin`` times the target's width and height.
        max_zoom: the window is at least the wide shot's size / ``max_zoom``.
        speed_zoom: seconds of the target's motion the window widens by (fast targets, wider shot).
        lead: seconds ahead of the target's estimated motion the camera aims.
        dead_zone: share of the window's width/height the target may move without moving the goal.
        zoom_dead_zone: relative change of the wanted zoom that moves the goal's zoom.
        smooth: seconds the camera takes to cover ~90 % of a jump of its goal.
        max_speed: the window's centre and width move at most this many wide-shot widths a second.
        max_accel: ... and accelerate at most this many wide-shot widths a second squared.
        hold: seconds the window holds after the target is lost.
        ease: seconds to ease to the wide shot after the hold (~90 % of the way).
    """

    aspect: float = 16 / 9
    margin: float = 4.0
    max_zoom: float = 3.0
    speed_zoom: float = 0.3
    lead: float = 0.35
    dead_zone: float = 0.08
    zoom_dead_zone: float = 0.15
    smooth: float = 0.8
    max_speed: float = 1.5
    max_accel: float = 6.0
    hold: float = 1.0
    ease: float = 1.5

    def __post_init__(self) -> None:
        check_range("aspect", self.aspect, low=0.05, high=20)
        check_range("margin", self.margin, low=1.0, high=100)
        check_range("max_zoom", self.max_zoom, low=1.0, high=50)
        check_range("speed_zoom", self.speed_zoom, low=0.0, high=10)
        check_range("lead", self.lead, low=0.0, high=5)
        check_range("dead_zone", self.dead_zone, low=0.0, high=0.45)
        check_range("zoom_dead_zone", self.zoom_dead_zone, low=0.0, high=1.0)
        check_range("smooth", self.smooth, low=0.0, high=30, low_inclusive=False)
        check_range("max_speed", self.max_speed, low=0.0, high=1000, low_inclusive=False)
        check_range("max_accel", self.max_accel, low=0.0, high=10000, low_inclusive=False)
        check_range("hold", self.hold, low=0.0, high=3600)
        check_range("ease", self.ease, low=0.0, high=60, low_inclusive=False)


def pick_target(
    boxes: "np.ndarray", scores: "np.ndarray", track_ids: "np.ndarray | None", current: int | None
) -> tuple[int | None, int | None]:
    """Which of a frame's target-class detections to follow -> ``(row, track id)``.

    The current track while it lives; else the best-scored detection in a confirmed track
    (``track_ids >= 0``), else the best-scored detection; ``(None, current)`` when there is none.
    ``boxes`` ``(N, 4)``, ``scores`` ``(N,)``, ``track_ids`` ``(N,)`` int or ``None`` (untracked).
    """
    n = len(scores)
    if n == 0:
        return None, current
    if track_ids is not None:
        if current is not None:
            same = (track_ids == current).nonzero()[0]
            if len(same):
                return int(same[0]), current
        confirmed = (track_ids >= 0).nonzero()[0]
        if len(confirmed):
            row = int(confirmed[scores[confirmed].argmax()])
            return row, int(track_ids[row])
    row = int(scores.argmax())
    tid = None if track_ids is None or track_ids[row] < 0 else int(track_ids[row])
    return row, tid if tid is not None else current


class Planner:
    """The virtual camera of one stream: :meth:`update` once per frame, in time order.

    Args:
        width, height: the source frame's size in pixels.
        config: :class:`FollowConfig`.
    """

    def __init__(self, width: int, height: int, config: FollowConfig | None = None) -> None:
        self.config = config or FollowConfig()
        self.width, self.height = int(width), int(height)
        self.wide = wide_window(self.width, self.height, self.config.aspect)
        self.mode: Mode = "wide"
        self._t: float | None = None
        self._seen: float | None = None  # time of the last detection
        self._meas: tuple[float, float] | None = None  # last measured centre
        self._vel = [0.0, 0.0]  # estimated target velocity, px/s
        w = self.wide
        self._goal = [w.cx, w.cy, w.w]
        self._pre = [w.cx, w.cy, w.w]
        self._x = [w.cx, w.cy, w.w]
        self._v = [0.0, 0.0, 0.0]

    @property
    def window(self) -> Window:
        cx, cy, w = self._x
        return Window(cx, cy, w, w / self.config.aspect)

    def update(self, t: float, box: "tuple[float, float, float, float] | None") -> Window:
        """The window at time ``t`` (seconds, the frame's timestamp) given the target's box
        ``(x1, y1, x2, y2)`` in source pixels, or ``None`` when it is not detected."""
        c = self.config
        first = self._t is None
        if not first and t < self._t - 1.0:  # type: ignore[operator]
            # the clock went back (a stream that starts over): go on from here, as if no time passed
            jump = self._t - t  # type: ignore[operator]
            self._t = t
            self._seen = None if self._seen is None else self._seen - jump
        dt = 0.0 if first or t <= self._t else t - self._t  # type: ignore[operator]
        self._t = t if first or t > self._t else self._t  # type: ignore[operator]
        if box is not None:
            self._see(t, box)
        elif self.mode == "track":
            self.mode = "hold"  # lost: the window stays where it aimed
        if self.mode == "hold" and self._seen is not None and t - self._seen > c.hold:
            self.mode = "wide"
            self._goal = [self.wide.cx, self.wide.cy, self.wide.w]
        if first:
            self._pre = list(self._goal)
            self._x = list(self._goal)
        elif dt > 0:
            self._step(dt)
        return self.window

    # ------------------------------------------------------------------ internals
    def _see(self, t: float, box: "tuple[float, float, float, float]") -> None:
        c = self.config
        x1, y1, x2, y2 = (float(v) for v in box)
        mx, my = (x1 + x2) / 2, (y1 + y2) / 2
        bw, bh = max(x2 - x1, 1.0), max(y2 - y1, 1.0)
        fresh = self.mode == "wide" or self._seen is None or t - self._seen > c.hold
        if fresh or self._meas is None:
            self._vel = [0.0, 0.0]
        else:
            gap = t - self._seen  # type: ignore[operator]
            if gap > 0:
                a = 1.0 - math.exp(-gap / 0.25)  # velocity smoothed over ~0.25 s
                for i, m in enumerate((mx, my)):
                    self._vel[i] += a * ((m - self._meas[i]) / gap - self._vel[i])
        self._meas = (mx, my)
        self._seen = t
        # wanted window: the target `margin` times its size, wider while it moves fast
        speed = math.hypot(*self._vel)
        want_w = max(c.margin * bw, c.margin * bh * c.aspect, self.wide.w / c.max_zoom)
        want_w = min(want_w + 2 * c.speed_zoom * speed, self.wide.w)
        dx, dy = mx + self._vel[0] * c.lead, my + self._vel[1] * c.lead
        if fresh:  # (re)acquired: aim straight at it; the spring eases the camera in
            self._goal = [dx, dy, want_w]
        else:
            g = self._goal
            zr = c.zoom_dead_zone
            if want_w > g[2] * (1 + zr):
                g[2] = want_w / (1 + zr)
            elif want_w < g[2] / (1 + zr):
                g[2] = want_w * (1 + zr)
            gw = g[2]
            for i, (d, half) in enumerate(((dx, gw * c.dead_zone), (dy, gw / c.aspect * c.dead_zone))):
                off = d - g[i]
                if abs(off) > half:
                    g[i] += off - math.copysign(half, off)
        self._goal = self._clamped(self._goal)
        self.mode = "track"

    def _clamped(self, g: list[float]) -> list[float]:
        w = min(max(g[2], 1.0), self.wide.w)
        h = w / self.config.aspect
        cx = min(max(g[0], w / 2), self.width - w / 2)
        cy = min(max(g[1], h / 2), self.height - h / 2)
        return [cx, cy, w]

    def _step(self, dt: float) -> None:
        c = self.config
        settle = c.ease if self.mode == "wide" else c.smooth
        # low-pass then critically damped spring, both at omega: 1 - (1 + a + a^2/2) e^-a with
        # a = omega t is 90 % of a step at a = 5.32, i.e. after `settle` seconds
        omega = 5.32 / settle
        a_pre = 1.0 - math.exp(-dt * omega)  # a low-pass of the same rate: the spring's input has no steps
        e = math.exp(-omega * dt)
        vmax = c.max_speed * self.wide.w
        amax = c.max_accel * self.wide.w
        for i in range(3):
            self._pre[i] += a_pre * (self._goal[i] - self._pre[i])
            x0 = self._x[i] - self._pre[i]
            v0 = self._v[i]
            tmp = (v0 + omega * x0) * dt
            v1 = (v0 - omega * tmp) * e
            x1 = self._pre[i] + (x0 + tmp) * e
            limited = min(max(v1, v0 - amax * dt), v0 + amax * dt)
            limited = min(max(limited, -vmax), vmax)
            if limited != v1:
                x1 = self._x[i] + (v0 + limited) / 2 * dt
                v1 = limited
            self._x[i], self._v[i] = x1, v1
        # inside the frame; a wall stops the motion into it
        cx, cy, w = self._clamped(self._x)
        for i, val in enumerate((cx, cy, w)):
            if val != self._x[i]:
                self._v[i] = 0.0
        self._x = [cx, cy, w]
