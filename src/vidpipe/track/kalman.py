"""A constant-velocity Kalman filter over all tracks of a stream at once (numpy, float64).

State per track: ``(cx, cy, a, h, vcx, vcy, va, vh)``: box centre, aspect ratio ``w / h``, height
and their velocities (ByteTrack's / DeepSORT's ``xyah`` filter, same noise model: standard
deviations proportional to the box height, ``1/20`` for positions and ``1/160`` for velocities).
Time is in *steps* of ``1 / nominal_fps`` seconds: :meth:`KalmanXYAH.predict` takes ``dt`` in
steps (1.0 is one ByteTrack frame), so a frame that comes 3 frame-times after the previous one
(dropped frames, ``frame_skip``) moves the boxes 3 times as far and grows their uncertainty as
3 steps would.

The covariance is stored compactly. That filter's process and measurement noises are diagonal
and its initial covariance is too, so each coordinate's (position, velocity) pair never mixes
with another's: the 8x8 covariance only ever has, per coordinate ``i``, ``var(p_i)``,
``cov(p_i, v_i)`` and ``var(v_i)``. Keeping those three ``(T, 4)`` rows makes predict and
update a few elementwise operations (no batched matrix products or solves) with exactly the
8x8 filter's results (:func:`full_cov` rebuilds the 8x8 matrices; the tests compare them with
the textbook matrix form).

Shapes: ``mean`` ``(T, 8)``, ``cov`` ``(T, 3, 4)`` (rows: var(p), cov(p, v), var(v)),
measurements ``(M, 4)`` ``xyah``; all float64.
"""

from __future__ import annotations

import numpy as np

__all__ = ["KalmanXYAH", "xyxy_to_xyah", "xyah_to_xyxy", "full_cov"]

_POS, _VEL = 1.0 / 20.0, 1.0 / 160.0
# standard deviations = height * _H + _C, per coordinate (cx, cy, a, h)
_INIT_P_H, _INIT_P_C = np.array([2 * _POS, 2 * _POS, 0, 2 * _POS]), np.array([0, 0, 1e-2, 0])
_INIT_V_H, _INIT_V_C = np.array([10 * _VEL, 10 * _VEL, 0, 10 * _VEL]), np.array([0, 0, 1e-5, 0])
_Q_P_H, _Q_P_C = np.array([_POS, _POS, 0, _POS]), np.array([0, 0, 1e-2, 0])
_Q_V_H, _Q_V_C = np.array([_VEL, _VEL, 0, _VEL]), np.array([0, 0, 1e-5, 0])
_R_H, _R_C = np.array([_POS, _POS, 0, _POS]), np.array([0, 0, 1e-1, 0])


def _var(h: np.ndarray, per_h: np.ndarray, const: np.ndarray) -> np.ndarray:
    """``(T, 4)`` variances ``(h * per_h + const) ** 2``."""
    std = h[:, None] * per_h + const
    return std * std


def xyxy_to_xyah(boxes: np.ndarray) -> np.ndarray:
    """``(N, 4)`` x1, y1, x2, y2 -> ``(N, 4)`` cx, cy, w / h, h (float64)."""
    b = np.asarray(boxes, dtype=np.float64)
    out = np.empty((b.shape[0], 4))
    out[:, 3] = np.maximum(b[:, 3] - b[:, 1], 1e-6)
    out[:, 2] = (b[:, 2] - b[:, 0]) / out[:, 3]
    out[:, 0] = (b[:, 0] + b[:, 2]) * 0.5
    out[:, 1] = (b[:, 1] + b[:, 3]) * 0.5
    return out


def xyah_to_xyxy(xyah: np.ndarray) -> np.ndarray:
    """``(N, >=4)`` cx, cy, a, h, ... -> ``(N, 4)`` x1, y1, x2, y2."""
    out = np.empty((xyah.shape[0], 4))
    half_h = xyah[:, 3] * 0.5
    half_w = xyah[:, 2] * half_h
    out[:, 0] = xyah[:, 0] - half_w
    out[:, 1] = xyah[:, 1] - half_h
    out[:, 2] = xyah[:, 0] + half_w
    out[:, 3] = xyah[:, 1] + half_h
    return out


def full_cov(cov: np.ndarray) -> np.ndarray:
    """The compact ``(T, 3, 4)`` covariance as the ``(T, 8, 8)`` matrices it stands for."""
    t = cov.shape[0]
    out = np.zeros((t, 8, 8))
    i = np.arange(4)
    out[:, i, i] = cov[:, 0]
    out[:, i, i + 4] = cov[:, 1]
    out[:, i + 4, i] = cov[:, 1]
    out[:, i + 4, i + 4] = cov[:, 2]
    return out


class KalmanXYAH:
    """Vectorised predict / update of many independent tracks (stateless: arrays in, arrays out)."""

    ndim = 4

    def initiate(self, xyah: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """New tracks at measurements ``(M, 4)`` -> ``mean (M, 8)``, ``cov (M, 3, 4)``."""
        m = xyah.shape[0]
        mean = np.zeros((m, 8))
        mean[:, :4] = xyah
        cov = np.zeros((m, 3, 4))
        h = xyah[:, 3]
        cov[:, 0] = _var(h, _INIT_P_H, _INIT_P_C)
        cov[:, 2] = _var(h, _INIT_V_H, _INIT_V_C)
        return mean, cov

    def predict(self, mean: np.ndarray, cov: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray]:
        """Move every track ``dt`` steps ahead: ``x' = F x``, ``P' = F P F^T + dt * Q``, with
        ``F = [[I, dt I], [0, I]]`` and Q from the height before the move (ByteTrack's)."""
        if mean.shape[0] == 0:
            return mean, cov
        h = mean[:, 3]
        pp, pv, vv = cov[:, 0], cov[:, 1], cov[:, 2]
        out = np.empty_like(cov)
        out[:, 0] = pp + (2 * dt) * pv + (dt * dt) * vv + dt * _var(h, _Q_P_H, _Q_P_C)
        out[:, 1] = pv + dt * vv
        out[:, 2] = vv + dt * _var(h, _Q_V_H, _Q_V_C)
        mean = mean.copy()
        mean[:, :4] += dt * mean[:, 4:]
        return mean, out

    def update(self, mean: np.ndarray, cov: np.ndarray, xyah: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Correct tracks ``(M, 8)`` / ``(M, 3, 4)`` with their measurements ``(M, 4)``:
        per coordinate, ``S = var(p) + R``, gains ``var(p) / S`` and ``cov(p, v) / S``."""
        if mean.shape[0] == 0:
            return mean, cov
        pp, pv, vv = cov[:, 0], cov[:, 1], cov[:, 2]
        s = pp + _var(mean[:, 3], _R_H, _R_C)
        kp = pp / s
        kv = pv / s
        innovation = xyah - mean[:, :4]
        new_mean = np.empty_like(mean)
        new_mean[:, :4] = mean[:, :4] + kp * innovation
        new_mean[:, 4:] = mean[:, 4:] + kv * innovation
        new_cov = np.empty_like(cov)
        new_cov[:, 0] = pp - kp * pp
        new_cov[:, 1] = pv - kp * pv
        new_cov[:, 2] = vv - kv * pv
        return new_mean, new_cov
