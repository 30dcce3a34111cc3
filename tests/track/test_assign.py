"""IoU and the gated assignment: hand-computed cases, and the solver against scipy's."""

from __future__ import annotations

import numpy as np
import pytest

from vidpipe.track.assign import iou_matrix, linear_sum_assignment, match


def test_iou_by_hand():
    a = np.array([[0, 0, 10, 10], [0, 0, 10, 10]], dtype=np.float32)
    b = np.array([[5, 0, 15, 10], [20, 20, 30, 30], [0, 0, 10, 10], [0, 0, 5, 5]], dtype=np.float32)
    iou = iou_matrix(a, b)
    np.testing.assert_allclose(iou[0], [50 / 150, 0.0, 1.0, 0.25])
    assert iou.shape == (2, 4)
    assert iou_matrix(a[:0], b).shape == (0, 4)
    # degenerate (zero-area) boxes give 0, not NaN
    assert iou_matrix(np.array([[1, 1, 1, 1.0]]), np.array([[1, 1, 1, 1.0]]))[0, 0] == 0.0


@pytest.mark.parametrize("small", [10**9, 0], ids=["python", "numpy"])
def test_solver_matches_scipy_on_random_matrices(monkeypatch, small):
    """Both solvers (pure Python for small matrices, numpy for large) against scipy's."""
    from vidpipe.track import assign

    scipy_lsa = pytest.importorskip("scipy.optimize").linear_sum_assignment
    monkeypatch.setattr(assign, "_SMALL", small)
    rng = np.random.default_rng(0)
    for trial in range(200):
        n, m = rng.integers(1, 16, 2)
        cost = rng.random((n, m)) * 10
        if trial % 3 == 0:
            cost = np.round(cost)  # ties
        if trial % 7 == 0:
            cost = np.zeros((n, m))  # all tied
        r1, c1 = scipy_lsa(cost)
        r2, c2 = linear_sum_assignment(cost)
        assert len(r2) == min(n, m) == len(set(r2.tolist())) == len(set(c2.tolist()))
        assert cost[r2, c2].sum() == pytest.approx(cost[r1, c1].sum(), abs=1e-9)


def test_match_takes_isolated_pairs_and_respects_the_threshold():
    inf = np.inf
    cost = np.array([
        [0.1, inf, inf],
        [inf, 0.9, inf],   # over the threshold: never paired
        [inf, inf, 0.5],
    ])  # fmt: skip
    rows, cols = match(cost, 0.8)
    assert list(zip(rows.tolist(), cols.tolist())) == [(0, 0), (2, 2)]


def test_match_is_optimal_where_greedy_is_not():
    # greedy takes (0, 0) at 0.1 and leaves row 1 without a partner; the optimum pairs both
    cost = np.array([[0.1, 0.2], [0.3, np.inf]])
    rows, cols = match(cost, 0.8)
    assert list(zip(rows.tolist(), cols.tolist())) == [(0, 1), (1, 0)]


def test_match_prefers_leaving_a_pair_over_a_costly_one():
    # ByteTrack's cost_limit: pairing (0, 1) and (1, 0) gains (0.8-0.7)+(0.8-0.7) = 0.2 < (0.8-0.05) for (0, 0) alone
    cost = np.array([[0.05, 0.7], [0.7, np.inf]])
    rows, cols = match(cost, 0.8)
    assert list(zip(rows.tolist(), cols.tolist())) == [(0, 0)]


def test_match_empty():
    rows, cols = match(np.zeros((0, 3)), 0.8)
    assert rows.size == cols.size == 0
    rows, cols = match(np.full((2, 2), np.inf), 0.8)
    assert rows.size == 0
