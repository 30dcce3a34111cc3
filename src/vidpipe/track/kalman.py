"""A constant-velocity Kalman filter over all tracks of a stream at once (numpy, float64).

State per track: ``(cx, cy, a, h, vcx, vcy, va, vh)``: box centre, aspect ratio ``w / h``, height
and their velocities (ByteTrack's / DeepSORT's ``xyah`` filter, same noise model: standard
deviations proportional to the box height, ``1/20`` for positions and ``1/160`` for velocities).
Time is in *steps* of ``1 / nominal_fps`` seconds: :meth:`KalmanXYAH.predict` takes ``dt`` in
steps (1.0 is one ByteTrack frame), so a frame that comes 3 frame-times after the previous one
(dropped frames, ``frame_skip``) moves the boxes 3 times as far and grows their uncertainty as
3 steps would.

Shapes: ``mean`` ``(T, 8)``, ``cov`` ``(T, 8, 8)``, measurements ``(M, 4)`` ``xyah``; all float64.
"""

from __future__ import annotations

import numpy as np

__all__ = ["KalmanXYAH", "xyxy_to_xyah", "xyah_to_xyxy"]

_POS, _VEL = 1.0 / 20.0, 1.0 / 160.0
# standard deviations = height * _H + _C, per state (or measurement) component
_INIT_H = np.array([2 * _POS, 2 * _POS, 0, 2 * _POS, 10 * _VEL, 10 * _VEL, 0, 10 * _VEL])
_INIT_C = np.array([0, 0, 1e-2, 0, 0, 0, 1e-5, 0])
_Q_H = np.array([_POS, _POS, 0, _POS, _VEL, _VEL, 0, _VEL])
_Q_C = np.array([0, 0, 1e-2, 0, 0, 0, 1e-5, 0])
_R_H = np.array([_POS, _POS, 0, _POS])
_R_C = np.array([0, 0, 1e-1, 0])
_I8, _I4 = np.arange(8), np.arange(4)


def _std(h: np.ndarray, per_h: np.ndarray, const: np.ndarray) -> np.ndarray:
    return h[:, None] * per_h + const


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


class KalmanXYAH:
    """Vectorised predict / update of many independent tracks (stateless: arrays in, arrays out)."""

    ndim = 4

    def initiate(self, xyah: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """New tracks at measurements ``(M, 4)`` -> ``mean (M, 8)``, ``cov (M, 8, 8)``."""
        m = xyah.shape[0]
        mean = np.zeros((m, 8))
        mean[:, :4] = xyah
        cov = np.zeros((m, 8, 8))
        cov[:, _I8, _I8] = _std(xyah[:, 3], _INIT_H, _INIT_C) ** 2
        return mean, cov

    def predict(self, mean: np.ndarray, cov: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray]:
        """Move every track ``dt`` steps ahead: ``x' = F x``, ``P' = F P F^T + dt * Q``."""
        if mean.shape[0] == 0:
            return mean, cov
        q = dt * _std(mean[:, 3], _Q_H, _Q_C) ** 2  # from the height before the move (ByteTrack's)
        mean = mean.copy()
        mean[:, :4] += dt * mean[:, 4:]
        # F P F^T by blocks (F = [[I, dt I], [0, I]]): cheaper than two batched 8x8 matmuls
        p11, p12, p21, p22 = cov[:, :4, :4], cov[:, :4, 4:], cov[:, 4:, :4], cov[:, 4:, 4:]
        out = np.empty_like(cov)
        out[:, :4, :4] = p11 + dt * (p12 + p21) + (dt * dt) * p22
        out[:, :4, 4:] = p12 + dt * p22
        out[:, 4:, :4] = p21 + dt * p22
        out[:, 4:, 4:] = p22
        out[:, _I8, _I8] += q
        return mean, out

    def update(self, mean: np.ndarray, cov: np.ndarray, xyah: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Correct tracks ``(M, 8)``/``(M, 8, 8)`` with their measurements ``(M, 4)``."""
        if mean.shape[0] == 0:
            return mean, cov
        s = cov[:, :4, :4].copy()
        s[:, _I4, _I4] += _std(mean[:, 3], _R_H, _R_C) ** 2
        pht = cov[:, :, :4]  # P H^T, (M, 8, 4)
        # K = P H^T S^-1 (S symmetric): solve S K^T = H P
        gain = np.linalg.solve(s, np.swapaxes(pht, 1, 2)).swapaxes(1, 2)  # (M, 8, 4)
        innovation = xyah - mean[:, :4]
        new_mean = mean + np.einsum("mij,mj->mi", gain, innovation)
        new_cov = cov - gain @ s @ np.swapaxes(gain, 1, 2)
        return new_mean, new_cov
