"""A constant-velocity Kalman filter over all tracks of a stream at once (numpy, float64).

State per track: ``(cx, cy, a, h, vcx, vcy, va, vh)``: box centre, aspect ratio ``w / h``, height
and their velocities (ByteTrack's / DeepSORT's ``xyah`` filter and noise model: standard
deviations proportional to the box height, ``1/20`` for positions and ``1/160`` for velocities,
except the velocities' process noise: ``1/80``, twice ByteTrack's. YOLOv3-tiny's boxes on the
bundled street clip change velocity by about 0.014-0.045 of the height a frame, where ByteTrack's
model allows 0.006 (``tools/bench-probes/kalman_noise.py``, a rough estimate), and on the
generated scenes of ``vidpipe bench track`` a filter that follows turns sooner keeps more
identities: IDF1 +0.007-0.010 over 24 seeds, same or fewer switches; docs/bench/cpu/track).
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

The tracker keeps both in one *packed* ``(T, 20)`` array per stream (``mean``, then ``cov``
row by row: the layout of ``np.concatenate([mean, cov.reshape(T, 12)], 1)``) and uses the
``*_packed`` methods: its predict is one matrix product plus the process noise (a few numpy calls
instead of some thirty; numpy's per-call cost, not arithmetic, is what a frame of a few tracks
costs). The unpacked methods wrap them, so the tests hold both against the textbook form.
"""

from __future__ import annotations

import numpy as np

__all__ = ["KalmanXYAH", "xyxy_to_xyah", "xyah_to_xyxy", "full_cov", "pack", "unpack"]

_POS, _VEL, _VEL_Q = 1.0 / 20.0, 1.0 / 160.0, 1.0 / 80.0
# standard deviations = height * _H + _C, per coordinate (cx, cy, a, h)
_INIT_P_H, _INIT_P_C = np.array([2 * _POS, 2 * _POS, 0, 2 * _POS]), np.array([0, 0, 1e-2, 0])
_INIT_V_H, _INIT_V_C = np.array([10 * _VEL, 10 * _VEL, 0, 10 * _VEL]), np.array([0, 0, 1e-5, 0])
_Q_P_H, _Q_P_C = np.array([_POS, _POS, 0, _POS]), np.array([0, 0, 1e-2, 0])
_Q_V_H, _Q_V_C = np.array([_VEL_Q, _VEL_Q, 0, _VEL_Q]), np.array([0, 0, 1e-5, 0])
_R_H, _R_C = np.array([_POS, _POS, 0, _POS]), np.array([0, 0, 1e-1, 0])
# process noise of positions and velocities side by side: (T, 8) stds = height * _Q_H + _Q_C
_Q_H, _Q_C = np.concatenate([_Q_P_H, _Q_V_H]), np.concatenate([_Q_P_C, _Q_V_C])
_INIT_H, _INIT_C = np.concatenate([_INIT_P_H, _INIT_V_H]), np.concatenate([_INIT_P_C, _INIT_V_C])


def pack(mean: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """``mean (T, 8)`` and ``cov (T, 3, 4)`` as one packed ``(T, 20)`` array."""
    return np.concatenate([mean, cov.reshape(cov.shape[0], 12)], axis=1)


def unpack(state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A packed ``(T, 20)`` array as ``mean (T, 8)``, ``cov (T, 3, 4)`` (copies)."""
    return state[:, :8].copy(), state[:, 8:].reshape(state.shape[0], 3, 4).copy()


def _transition_parts() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``I``, ``D1``, ``D2`` with ``packed @ (I + dt D1 + dt^2 D2)`` = ``F x`` and ``F P F^T``
    (before noise)."""
    d1, d2 = np.zeros((20, 20)), np.zeros((20, 20))
    for i in range(4):
        d1[4 + i, i] = 1.0  # p += dt v
        d1[12 + i, 8 + i] = 2.0  # var(p) += 2 dt cov(p, v) + dt^2 var(v)
        d2[16 + i, 8 + i] = 1.0
        d1[16 + i, 12 + i] = 1.0  # cov(p, v) += dt var(v)
    return np.eye(20), d1, d2


_EYE, _D1, _D2 = _transition_parts()
#: the transition of whole steps (1: the usual frame; 2, 3, ...: frames dropped), made once each
_STEPS = {k: _EYE + k * _D1 + (k * k) * _D2 for k in range(1, 9)}


def xyxy_to_xyah(boxes: np.ndarray) -> np.ndarray:
    """``(N, 4)`` x1, y1, x2, y2 -> ``(N, 4)`` cx, cy, w / h, h (float64)."""
    b = np.asarray(boxes, dtype=np.float64)
    wh = b[:, 2:] - b[:, :2]
    out = np.empty((b.shape[0], 4))
    np.add(b[:, :2], b[:, 2:], out=out[:, :2])
    out[:, :2] *= 0.5
    h = np.maximum(wh[:, 1], 1e-6, out=out[:, 3])
    np.divide(wh[:, 0], h, out=out[:, 2])
    return out


def xyah_to_xyxy(xyah: np.ndarray) -> np.ndarray:
    """``(N, >=4)`` cx, cy, a, h, ... -> ``(N, 4)`` x1, y1, x2, y2."""
    out = np.empty((xyah.shape[0], 4))
    half = out[:, 2:]  # w / 2, h / 2 first, then x2, y2
    np.multiply(xyah[:, 3:4], 0.5, out=half[:, 1:])
    np.multiply(xyah[:, 2], half[:, 1], out=half[:, 0])
    np.subtract(xyah[:, :2], half, out=out[:, :2])
    half += xyah[:, :2]
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
        return unpack(self.initiate_packed(xyah))

    def predict(self, mean: np.ndarray, cov: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray]:
        """Move every track ``dt`` steps ahead: ``x' = F x``, ``P' = F P F^T + dt * Q``, with
        ``F = [[I, dt I], [0, I]]`` and Q from the height before the move (ByteTrack's)."""
        if mean.shape[0] == 0:
            return mean, cov
        return unpack(self.predict_packed(pack(mean, cov), dt))

    def update(self, mean: np.ndarray, cov: np.ndarray, xyah: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Correct tracks ``(M, 8)`` / ``(M, 3, 4)`` with their measurements ``(M, 4)``:
        per coordinate, ``S = var(p) + R``, gains ``var(p) / S`` and ``cov(p, v) / S``."""
        if mean.shape[0] == 0:
            return mean, cov
        return unpack(self.update_packed(pack(mean, cov), xyah))

    # ------------------------------------------------------------------ packed (T, 20)
    def initiate_packed(self, xyah: np.ndarray) -> np.ndarray:
        """:meth:`initiate` as one packed ``(M, 20)`` array."""
        m = xyah.shape[0]
        out = np.zeros((m, 20))
        out[:, :4] = xyah
        std = xyah[:, 3:4] * _INIT_H
        std += _INIT_C
        std *= std
        out[:, 8:12] = std[:, :4]
        out[:, 16:20] = std[:, 4:]
        return out

    def predict_packed(self, state: np.ndarray, dt: float) -> np.ndarray:
        """:meth:`predict` on a packed ``(T, 20)`` array (a new array)."""
        if state.shape[0] == 0:
            return state
        out = state @ (_STEPS.get(dt) if dt in _STEPS else _EYE + dt * _D1 + (dt * dt) * _D2)
        q = state[:, 3:4] * _Q_H
        q += _Q_C
        q *= q
        if dt != 1.0:
            q *= dt
        out[:, 8:12] += q[:, :4]
        out[:, 16:20] += q[:, 4:]
        return out

    def update_packed(self, state: np.ndarray, xyah: np.ndarray) -> np.ndarray:
        """:meth:`update` on a packed ``(M, 20)`` array and its measurements ``(M, 4)`` (a new array)."""
        if state.shape[0] == 0:
            return state
        r = state[:, 3:4] * _R_H
        r += _R_C
        r *= r
        r += state[:, 8:12]  # S = var(p) + R
        gain = state[:, 8:16] / np.concatenate([r, r], axis=1)  # var(p) / S, cov(p, v) / S
        innovation = xyah - state[:, :4]
        out = np.empty_like(state)
        out[:, :8] = state[:, :8] + gain * np.concatenate([innovation, innovation], axis=1)
        kp = gain[:, :4]
        out[:, 8:16] = state[:, 8:16] - np.concatenate([kp, kp], axis=1) * state[:, 8:16]
        out[:, 16:20] = state[:, 16:20] - gain[:, 4:] * state[:, 12:16]
        return out
