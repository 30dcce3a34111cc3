"""Association: IoU of box sets, and a gated linear assignment.

Why not ``scipy.optimize.linear_sum_assignment``: scipy is not a dependency of vidpipe (it would
add ~40 MB for one function). Tracking costs are sparse: most track/detection pairs do not
overlap at all, and most that do are a single track on a single detection. :func:`match` takes
those isolated pairs in one vectorised step and solves only the ambiguous rest exactly with
:func:`linear_sum_assignment` below: the shortest-augmenting-path algorithm scipy uses (Crouse
2016), in pure Python for small matrices (where numpy's per-call cost dominates) and vectorised
over columns with numpy for larger ones. The tests check both against scipy's.
"""

from __future__ import annotations

import numpy as np

__all__ = ["iou_matrix", "linear_sum_assignment", "match"]


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box in ``a`` ``(T, 4)`` with every box in ``b`` ``(D, 4)`` (xyxy) -> ``(T, D)`` float64."""
    if a.shape[0] == 0 or b.shape[0] == 0:
        return np.zeros((a.shape[0], b.shape[0]))
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    ax1, ay1, ax2, ay2 = a[:, 0:1], a[:, 1:2], a[:, 2:3], a[:, 3:4]  # (T, 1) columns
    bx1, by1, bx2, by2 = b[:, 0], b[:, 1], b[:, 2], b[:, 3]  # (D,)
    iw = np.minimum(ax2, bx2) - np.maximum(ax1, bx1)
    np.maximum(iw, 0.0, out=iw)
    ih = np.minimum(ay2, by2) - np.maximum(ay1, by1)
    np.maximum(ih, 0.0, out=ih)
    inter = iw * ih
    union = ((ax2 - ax1) * (ay2 - ay1)) + ((bx2 - bx1) * (by2 - by1)) - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)  # 0 where no area


def linear_sum_assignment(cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Minimum-cost complete assignment of the smaller side of a finite ``(n, m)`` cost matrix.

    Returns ``(rows, cols)``, int64, sorted by row, ``min(n, m)`` pairs (as scipy's).
    """
    cost = np.asarray(cost, dtype=np.float64)
    if cost.ndim != 2:
        raise ValueError(f"cost must be a 2-D matrix, got shape {cost.shape}")
    if not np.isfinite(cost).all():
        raise ValueError("cost must be finite")
    transposed = cost.shape[0] > cost.shape[1]
    c = cost.T if transposed else cost
    if c.shape[0] * c.shape[1] <= _SMALL:  # pure Python beats numpy's per-call cost on small matrices
        col4row = np.array(_sap_small(c.tolist(), c.shape[0], c.shape[1]), dtype=np.int64)
    else:
        col4row = _sap(np.ascontiguousarray(c))
    rows = np.arange(c.shape[0], dtype=np.int64)
    if transposed:
        order = np.argsort(col4row)
        return col4row[order].astype(np.int64), rows[order]
    return rows, col4row.astype(np.int64)


#: matrices of at most this many entries are solved by :func:`_sap_small`
_SMALL = 400


def _sap_small(c: list[list[float]], n: int, m: int) -> list[int]:
    """:func:`_sap` on Python lists (the same algorithm, for small matrices)."""
    inf = float("inf")
    u = [0.0] * n
    v = [0.0] * m
    col4row = [-1] * n
    row4col = [-1] * m
    for cur in range(n):
        shortest = [inf] * m
        path = [-1] * m
        in_sr = [False] * n
        in_sc = [False] * m
        min_val = 0.0
        i = cur
        sink = -1
        while sink < 0:
            in_sr[i] = True
            ci, ui = c[i], u[i]
            best, j_best = inf, -1
            for j in range(m):
                if in_sc[j]:
                    continue
                r = min_val + ci[j] - ui - v[j]
                if r < shortest[j]:
                    path[j] = i
                    shortest[j] = r
                sj = shortest[j]
                if sj < best or (sj == best and row4col[j] < 0 <= row4col[j_best]):
                    best, j_best = sj, j
            min_val = best
            j = j_best
            in_sc[j] = True
            if row4col[j] < 0:
                sink = j
            else:
                i = row4col[j]
        u[cur] += min_val
        for r in range(n):
            if in_sr[r] and r != cur:
                u[r] += min_val - shortest[col4row[r]]
        for j in range(m):
            if in_sc[j]:
                v[j] -= min_val - shortest[j]
        j = sink
        while True:
            i = path[j]
            row4col[j] = i
            col4row[i], j = j, col4row[i]
            if i == cur:
                break
    return col4row


def _sap(c: np.ndarray) -> np.ndarray:
    """Shortest augmenting path with dual variables; ``c`` is ``(n, m)``, ``n <= m``."""
    n, m = c.shape
    u = np.zeros(n)
    v = np.zeros(m)
    col4row = np.full(n, -1, dtype=np.int64)
    row4col = np.full(m, -1, dtype=np.int64)
    inf = np.inf
    for cur in range(n):
        shortest = np.full(m, inf)
        path = np.full(m, -1, dtype=np.int64)
        in_sr = np.zeros(n, dtype=bool)
        in_sc = np.zeros(m, dtype=bool)
        min_val = 0.0
        i = cur
        sink = -1
        while sink < 0:
            in_sr[i] = True
            reduced = min_val + c[i] - u[i] - v
            better = ~in_sc & (reduced < shortest)
            path[better] = i
            shortest[better] = reduced[better]
            cand = np.where(in_sc, inf, shortest)
            j = int(np.argmin(cand))
            min_val = float(cand[j])
            # among equally short columns, prefer a free one (ends the search sooner)
            ties = np.flatnonzero((cand == min_val) & (row4col < 0))
            if ties.size:
                j = int(ties[0])
            in_sc[j] = True
            if row4col[j] < 0:
                sink = j
            else:
                i = int(row4col[j])
        u[cur] += min_val
        others = in_sr.copy()
        others[cur] = False
        rows = np.flatnonzero(others)
        u[rows] += min_val - shortest[col4row[rows]]
        v[in_sc] -= min_val - shortest[in_sc]
        j = sink
        while True:
            i = int(path[j])
            row4col[j] = i
            col4row[i], j = j, int(col4row[i])
            if i == cur:
                break
    return col4row


def match(cost: np.ndarray, thresh: float) -> tuple[np.ndarray, np.ndarray]:
    """Pairs of rows and columns of ``cost`` ``(T, D)`` that minimise the total cost of the pairs
    plus ``thresh / 2`` per row or column left unpaired; a pair costing ``thresh`` or more is
    never made (ByteTrack's ``lapjv(..., extend_cost=True, cost_limit=thresh)``). ``inf`` or NaN
    marks pairs that may not be made.

    Equivalently, the maximum of ``sum(thresh - cost)`` over pairs below ``thresh``. Isolated
    pairs (the only candidate of their row and of their column) are taken directly; the rest is
    solved exactly.

    Returns ``(rows, cols)`` int64, sorted by row.
    """
    t, d = cost.shape
    if t == 0 or d == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    valid = cost < thresh  # False for NaN and inf
    pr, pc = valid.nonzero()  # candidate pairs, by row
    if pr.shape[0] <= 64:  # the usual frame: few candidates, each alone in its row and column
        lr, lc = pr.tolist(), pc.tolist()
        if len(set(lr)) == len(lr) and len(set(lc)) == len(lc):
            return pr.astype(np.int64, copy=False), pc.astype(np.int64, copy=False)
    row_n = valid.sum(1)
    col_n = valid.sum(0)
    first = valid.argmax(1)
    isolated = (row_n == 1) & (col_n[first] == 1)
    out_r = [np.flatnonzero(isolated)]
    out_c = [first[isolated]]
    rest_r = np.flatnonzero((row_n > 0) & ~isolated)
    if rest_r.size:
        free_c = col_n > 0
        free_c[out_c[0]] = False
        rest_c = free_c.nonzero()[0]
        sub_valid = valid[np.ix_(rest_r, rest_c)]
        gain = np.where(sub_valid, thresh - np.where(sub_valid, cost[np.ix_(rest_r, rest_c)], 0.0), 0.0)
        r, c = linear_sum_assignment(-gain)
        keep = sub_valid[r, c]
        out_r.append(rest_r[r[keep]])
        out_c.append(rest_c[c[keep]])
    rows = np.concatenate(out_r).astype(np.int64)
    cols = np.concatenate(out_c).astype(np.int64)
    order = np.argsort(rows, kind="stable")
    return rows[order], cols[order]
