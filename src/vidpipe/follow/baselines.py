"""Naive virtual cameras to measure :class:`~vidpipe.follow.planner.Planner` against (same
``update(t, box) -> Window`` interface, same zoom rule and frame clamping):

- :class:`CentreOnDetection` ("no smoothing"): the window centred on each detection.
- :class:`MovingAverage` ("EMA"): an exponential moving average of that window over time.

Both hold the last window while the target is lost and jump (``CentreOnDetection``) or glide
(``MovingAverage``) to the wide shot after ``config.hold`` seconds.
"""

from __future__ import annotations

import math

from vidpipe.follow.planner import FollowConfig
from vidpipe.follow.window import Window, wide_window

__all__ = ["CentreOnDetection", "MovingAverage"]


class CentreOnDetection:
    """The window centred on the detection, ``config.margin`` times its size (no smoothing)."""

    def __init__(self, width: int, height: int, config: FollowConfig | None = None) -> None:
        self.config = config or FollowConfig()
        self.width, self.height = width, height
        self.wide = wide_window(width, height, self.config.aspect)
        self._x = [self.wide.cx, self.wide.cy, self.wide.w]
        self._seen: float | None = None

    def _want(self, box: "tuple[float, float, float, float]") -> list[float]:
        c = self.config
        x1, y1, x2, y2 = box
        w = max(c.margin * (x2 - x1), c.margin * (y2 - y1) * c.aspect, self.wide.w / c.max_zoom)
        return [(x1 + x2) / 2, (y1 + y2) / 2, min(w, self.wide.w)]

    def _clamp(self, g: list[float]) -> list[float]:
        w = min(max(g[2], 1.0), self.wide.w)
        h = w / self.config.aspect
        return [min(max(g[0], w / 2), self.width - w / 2), min(max(g[1], h / 2), self.height - h / 2), w]

    def _goal(self, t: float, box: "tuple[float, float, float, float] | None") -> list[float]:
        if box is not None:
            self._seen = t
            return self._want(box)
        if self._seen is None or t - self._seen > self.config.hold:
            return [self.wide.cx, self.wide.cy, self.wide.w]
        return self._x

    def update(self, t: float, box: "tuple[float, float, float, float] | None") -> Window:
        self._x = self._clamp(self._goal(t, box))
        return Window(self._x[0], self._x[1], self._x[2], self._x[2] / self.config.aspect)


class MovingAverage(CentreOnDetection):
    """An exponential moving average (time constant ``tau`` seconds) of the no-smoothing window."""

    def __init__(self, width: int, height: int, config: FollowConfig | None = None, *, tau: float = 0.25) -> None:
        super().__init__(width, height, config)
        self.tau = tau
        self._t: float | None = None

    def update(self, t: float, box: "tuple[float, float, float, float] | None") -> Window:
        goal = list(self._goal(t, box))
        if self._t is None:
            self._x = goal
        elif t > self._t:
            a = 1.0 - math.exp(-(t - self._t) / self.tau)
            self._x = [x + a * (g - x) for x, g in zip(self._x, goal)]
        self._t = t if self._t is None else max(t, self._t)
        self._x = self._clamp(self._x)
        return Window(self._x[0], self._x[1], self._x[2], self._x[2] / self.config.aspect)
