"""The vectorised Kalman filter against the textbook matrix form, and hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest

from vidpipe.track.kalman import KalmanXYAH, full_cov, xyah_to_xyxy, xyxy_to_xyah

POS, VEL = 1 / 20, 1 / 160
VEL_Q = 1 / 80  # the velocities' process noise: twice ByteTrack's (see vidpipe.track.kalman)


def _textbook_predict(mean, cov, dt):
    """One track: x' = F x, P' = F P F^T + dt Q with explicit 8x8 matrices (DeepSORT/ByteTrack)."""
    f = np.eye(8)
    f[:4, 4:] = dt * np.eye(4)
    h = mean[3]
    q = np.diag(np.array([POS * h, POS * h, 1e-2, POS * h, VEL_Q * h, VEL_Q * h, 1e-5, VEL_Q * h]) ** 2)
    return f @ mean, f @ cov @ f.T + dt * q


def _textbook_update(mean, cov, z):
    hm = np.eye(4, 8)
    h = mean[3]
    r = np.diag(np.array([POS * h, POS * h, 1e-1, POS * h]) ** 2)
    s = hm @ cov @ hm.T + r
    k = cov @ hm.T @ np.linalg.inv(s)
    return mean + k @ (z - hm @ mean), (np.eye(8) - k @ hm) @ cov


def test_box_conversions_round_trip():
    boxes = np.array([[10.0, 20.0, 50.0, 120.0], [0.0, 0.0, 3.0, 6.0]])
    xyah = xyxy_to_xyah(boxes)
    np.testing.assert_allclose(xyah, [[30, 70, 0.4, 100], [1.5, 3, 0.5, 6]])
    np.testing.assert_allclose(xyah_to_xyxy(xyah), boxes)


def test_initiate_and_predict_by_hand():
    kf = KalmanXYAH()
    mean, cov = kf.initiate(np.array([[100.0, 50.0, 0.5, 100.0]]))
    # initial std: 2 * h / 20 = 10 px for positions, 10 * h / 160 = 6.25 px/step for velocities
    np.testing.assert_allclose(np.diag(full_cov(cov)[0])[[0, 1, 3, 4]], [100.0, 100.0, 100.0, 6.25**2])
    mean[0, 4:6] = (2.0, -1.0)  # moving 2 px right, 1 px up per step
    m2, c2 = kf.predict(mean, cov, dt=3.0)
    c2 = full_cov(c2)
    np.testing.assert_allclose(m2[0, :4], [106.0, 47.0, 0.5, 100.0])
    # var(cx) = 100 + 3^2 * 6.25^2 + 3 * (h / 20)^2 = 100 + 351.5625 + 75
    assert c2[0, 0, 0] == pytest.approx(526.5625)
    assert c2[0, 0, 4] == pytest.approx(3 * 6.25**2)  # position-velocity covariance


def test_predict_and_update_match_the_textbook_form():
    rng = np.random.default_rng(3)
    kf = KalmanXYAH()
    t = 7
    mean, cov = kf.initiate(np.column_stack([rng.uniform(0, 500, (t, 2)), rng.uniform(0.3, 0.7, t),
                                             rng.uniform(20, 200, t)]))  # fmt: skip
    mean[:, 4:] = rng.normal(0, 2, (t, 4))
    ref_mean, ref_cov = mean.copy(), full_cov(cov)  # the textbook filter runs alongside, on 8x8 matrices
    for dt in (1.0, 2.5, 0.5, 4.0):
        mean, cov = kf.predict(mean, cov, dt)
        for i in range(t):
            ref_mean[i], ref_cov[i] = _textbook_predict(ref_mean[i], ref_cov[i], dt)
        np.testing.assert_allclose(mean, ref_mean, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(full_cov(cov), ref_cov, rtol=1e-10, atol=1e-9)
        z = mean[:, :4] + rng.normal(0, 3, (t, 4))
        mean, cov = kf.update(mean, cov, z)
        for i in range(t):
            ref_mean[i], ref_cov[i] = _textbook_update(ref_mean[i], ref_cov[i], z[i])
        np.testing.assert_allclose(mean, ref_mean, rtol=1e-9, atol=1e-8)
        np.testing.assert_allclose(full_cov(cov), ref_cov, rtol=1e-8, atol=1e-8)


def test_update_pulls_towards_the_measurement_and_shrinks_uncertainty():
    kf = KalmanXYAH()
    mean, cov = kf.initiate(np.array([[0.0, 0.0, 0.5, 100.0]]))
    m2, c2 = kf.update(mean, cov, np.array([[10.0, 0.0, 0.5, 100.0]]))
    # gain on cx: P / (P + R) = 100 / (100 + 25) = 0.8
    assert m2[0, 0] == pytest.approx(8.0)
    assert full_cov(c2)[0, 0, 0] == pytest.approx(100 * 25 / 125)


def test_empty_track_sets():
    kf = KalmanXYAH()
    mean, cov = kf.initiate(np.zeros((0, 4)))
    assert mean.shape == (0, 8) and cov.shape == (0, 3, 4)
    assert kf.predict(mean, cov, 1.0)[0].shape == (0, 8)
    assert kf.update(mean, cov, np.zeros((0, 4)))[1].shape == (0, 3, 4)
