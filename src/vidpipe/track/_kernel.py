"""ByteTrack's per-frame step as numba-compiled loops, a whole batch of frames per call.

The same steps, in the same order, as :meth:`vidpipe.track.bytetrack.ByteTrack.update` (read that
one for the why of each): expiry, Kalman predict (:mod:`vidpipe.track.kalman`'s packed ``(T, 20)``
layout and noise model), IoU, the three associations with :func:`vidpipe.track.assign.match`'s
rule (isolated pairs taken, the rest solved exactly with the shortest-augmenting-path algorithm,
the same tie-breaking as ``assign._sap_small``), Kalman update, confirmation, births. Why compiled:
a frame of a few tracks costs the numpy tracker some hundred numpy calls, about 0.1-0.26 ms of
per-call overhead, which on crowded footage at 3,000-4,000 frames/s is a whole core; here it is a
few microseconds (``vidpipe bench track`` prints both rates).

Only :mod:`vidpipe.track.compiled` imports this module (numba is imported, and the functions are
compiled or loaded from numba's cache, on first use).

Track state (``C`` rows of capacity, the first ``n`` live, in birth order): ``kf (C, 20)``
float64, ``state (C,)`` int8, ``ids``/``hits``/``cls`` ``(C,)`` int64, ``last_t (C,)`` float64,
``emb (C, D)`` float32 (``D = 0``: no embeddings). ``C`` must be at least ``n`` plus the batch's
detections (each frame's births are at most its detections).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from vidpipe.track.bytetrack import LOST, TENTATIVE, TRACKED  # (the states a snapshot carries across)
from vidpipe.track.kalman import _INIT_C, _INIT_H, _Q_C, _Q_H, _R_C, _R_H

#: the Kalman filter's noise model (:mod:`vidpipe.track.kalman`), rows: process noise (height
#: factor, constant), initial (height factor, constant), measurement (height factor, constant; 4
#: columns used). An argument of :func:`track_batch`, not a global the kernel reads: numba's cache
#: would keep a global's value after kalman.py changed.
NOISE = np.stack([_Q_H, _Q_C, _INIT_H, _INIT_C, np.concatenate([_R_H, _R_H]), np.concatenate([_R_C, _R_C])])

#: the float options, in this order, as one float64 array (``params``)
PARAMS = (
    "high_thresh", "low_thresh", "new_track_thresh", "match_thresh", "low_match_thresh",
    "tentative_match_thresh", "track_buffer", "appearance_weight", "embedding_momentum", "nominal_fps",
)  # fmt: skip

_INF = np.inf


@njit(cache=True)
def _sap(c):
    """Minimum-cost complete assignment of the rows of ``c`` ``(n, m)``, ``n <= m``, finite:
    ``col4row`` (``assign._sap_small``, the same arithmetic and tie-breaking)."""
    n, m = c.shape
    u = np.zeros(n)
    v = np.zeros(m)
    col4row = np.full(n, -1, np.int64)
    row4col = np.full(m, -1, np.int64)
    shortest = np.empty(m)
    path = np.empty(m, np.int64)
    in_sr = np.empty(n, np.bool_)
    in_sc = np.empty(m, np.bool_)
    for cur in range(n):
        shortest[:] = _INF
        path[:] = -1
        in_sr[:] = False
        in_sc[:] = False
        min_val = 0.0
        i = cur
        sink = -1
        while sink < 0:
            in_sr[i] = True
            ui = u[i]
            best = _INF
            j_best = -1
            for j in range(m):
                if in_sc[j]:
                    continue
                r = min_val + c[i, j] - ui - v[j]
                if r < shortest[j]:
                    path[j] = i
                    shortest[j] = r
                sj = shortest[j]
                # (j_best = -1 reads the last column, as Python's list does in assign._sap_small)
                if sj < best or (sj == best and row4col[j] < 0 and row4col[j_best] >= 0):
                    best = sj
                    j_best = j
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
            nxt = col4row[i]
            col4row[i] = j
            j = nxt
            if i == cur:
                break
    return col4row


@njit(cache=True)
def _match(cost, thresh, out_r, out_c):
    """:func:`vidpipe.track.assign.match` into ``out_r``/``out_c`` (row order); returns the pair count."""
    t, d = cost.shape
    if t == 0 or d == 0:
        return 0
    valid = cost < thresh
    row_n = np.zeros(t, np.int64)
    col_n = np.zeros(d, np.int64)
    first = np.zeros(t, np.int64)
    for i in range(t):
        for j in range(d):
            if valid[i, j]:
                if row_n[i] == 0:
                    first[i] = j
                row_n[i] += 1
                col_n[j] += 1
    taken_c = np.zeros(d, np.bool_)
    pair_c = np.full(t, -1, np.int64)
    n_rest_r = 0
    for i in range(t):
        if row_n[i] == 1 and col_n[first[i]] == 1:
            pair_c[i] = first[i]
            taken_c[first[i]] = True
        elif row_n[i] > 0:
            n_rest_r += 1
    if n_rest_r:
        rest_r = np.empty(n_rest_r, np.int64)
        k = 0
        for i in range(t):
            if row_n[i] > 0 and pair_c[i] < 0:
                rest_r[k] = i
                k += 1
        n_rest_c = 0
        for j in range(d):
            if col_n[j] > 0 and not taken_c[j]:
                n_rest_c += 1
        rest_c = np.empty(n_rest_c, np.int64)
        k = 0
        for j in range(d):
            if col_n[j] > 0 and not taken_c[j]:
                rest_c[k] = j
                k += 1
        # maximise sum(thresh - cost) over valid pairs: minimise its negative (0 where invalid)
        transposed = n_rest_r > n_rest_c
        if transposed:
            neg = np.zeros((n_rest_c, n_rest_r))
        else:
            neg = np.zeros((n_rest_r, n_rest_c))
        for a in range(n_rest_r):
            for b in range(n_rest_c):
                i, j = rest_r[a], rest_c[b]
                g = -(thresh - cost[i, j]) if valid[i, j] else 0.0
                if transposed:
                    neg[b, a] = g
                else:
                    neg[a, b] = g
        col4row = _sap(neg)
        for k in range(col4row.shape[0]):
            if transposed:
                a, b = col4row[k], k
            else:
                a, b = k, col4row[k]
            i, j = rest_r[a], rest_c[b]
            if valid[i, j]:
                pair_c[i] = j
    n = 0
    for i in range(t):
        if pair_c[i] >= 0:
            out_r[n] = i
            out_c[n] = pair_c[i]
            n += 1
    return n


@njit(cache=True)
def _sub(full, rows, n_rows, cols, n_cols):
    """``full[rows[:n_rows]][:, cols[:n_cols]]``."""
    cost = np.empty((n_rows, n_cols))
    for a in range(n_rows):
        for b in range(n_cols):
            cost[a, b] = full[rows[a], cols[b]]
    return cost


@njit(cache=True)
def _record(k, rows, cols, mr, mc, pair_t, pair_d, n_pairs, matched, used):
    """Note the ``k`` pairs an association made (``mr``/``mc`` index ``rows``/``cols``); returns
    the pair count after them."""
    for p in range(k):
        ti, di = rows[mr[p]], cols[mc[p]]
        pair_t[n_pairs] = ti
        pair_d[n_pairs] = di
        n_pairs += 1
        matched[ti] = True
        used[di] = True
    return n_pairs


@njit(cache=True)
def _compact(keep, n, kf, state, ids, hits, last_t, cls, emb):
    """Move the rows ``keep[:n]`` to the front, in order; returns how many."""
    w = 0
    for i in range(n):
        if keep[i]:
            if w != i:
                kf[w] = kf[i]
                state[w] = state[i]
                ids[w] = ids[i]
                hits[w] = hits[i]
                last_t[w] = last_t[i]
                cls[w] = cls[i]
                emb[w] = emb[i]
            w += 1
    return w


@njit(cache=True)
def _xyah(box, out):
    """x1, y1, x2, y2 -> cx, cy, w / h, h (``kalman.xyxy_to_xyah``'s arithmetic)."""
    w = box[2] - box[0]
    h = max(box[3] - box[1], 1e-6)
    out[0] = (box[0] + box[2]) * 0.5
    out[1] = (box[1] + box[3]) * 0.5
    out[2] = w / h
    out[3] = h


@njit(cache=True)
def _unit_rows(x):
    for i in range(x.shape[0]):
        s = np.float32(0.0)
        for k in range(x.shape[1]):
            s += x[i, k] * x[i, k]
        norm = max(np.float32(math.sqrt(s)), np.float32(1e-12))
        for k in range(x.shape[1]):
            x[i, k] = x[i, k] / norm


@njit(cache=True)
def track_batch(
    kf, state, ids, hits, last_t, cls, emb, n, next_id, t_prev,
    times, counts, boxes, scores, classes, det_emb, has_emb, params, noise, min_hits, per_class, fuse_score, out,
):  # fmt: skip
    """Track the frames ``times (F,)``/``counts (F,)`` whose detections are the rows of ``boxes
    (N, 4)`` float64, ``scores (N,)`` float64, ``classes (N,)`` int64 (``det_emb (N, D)`` float32
    unit rows where ``has_emb``), after the tracks' state (updated in place); ``params``: the
    options (:data:`PARAMS`), ``noise``: :data:`NOISE`. ``t_prev``: the
    previous frame's time (NaN: none yet). Writes ``out (N,)`` int64 ids (-1: not in a confirmed
    track); returns ``(n, next_id, t_prev)`` after the batch."""
    high_t, low_t, new_t = params[0], params[1], params[2]
    match_t, low_match_t, tent_t = params[3], params[4], params[5]
    buffer = params[6] + 1e-9
    app_w, momentum, fps = params[7], params[8], params[9]
    step = 1.0 / fps
    use_emb = has_emb and app_w > 0
    start = 0
    for f in range(times.shape[0]):
        nd = counts[f]
        end = start + nd
        t = times[f]
        first_frame = math.isnan(t_prev)
        dt = 1.0 if first_frame else (t - t_prev) * fps
        if not dt > 0:  # a repeated or earlier timestamp: one nominal step
            dt = 1.0
            t = t_prev + step
        elif dt > 0.5 and abs(dt - round(dt)) < 1e-6:
            dt = float(round(dt))
        t_prev = t
        # expiry
        if n:
            keep = np.empty(n, np.bool_)
            gone = False
            for i in range(n):
                keep[i] = not (t - last_t[i] > buffer)
                gone = gone or not keep[i]
            if gone:
                n = _compact(keep, n, kf, state, ids, hits, last_t, cls, emb)
        # predict
        for i in range(n):
            s = kf[i]
            if state[i] == LOST:
                s[7] = 0.0
            h = s[3]
            for k in range(4):
                s[k] = s[k] + s[4 + k] * dt
                s[8 + k] = s[8 + k] + s[12 + k] * (2.0 * dt) + s[16 + k] * (dt * dt)
                s[12 + k] = s[12 + k] + s[16 + k] * dt
            for k in range(8):
                q = h * noise[0, k] + noise[1, k]
                q = q * q
                if dt != 1.0:
                    q = q * dt
                if k < 4:
                    s[8 + k] += q
                else:
                    s[12 + k] += q
        # costs
        plain = np.empty((n, nd))
        fused = np.empty((n, nd)) if fuse_score else plain
        for i in range(n):
            s = kf[i]
            hh = s[3] * 0.5
            w2 = s[2] * hh
            ax1, ay1, ax2, ay2 = s[0] - w2, s[1] - hh, w2 + s[0], hh + s[1]
            area_a = (ax2 - ax1) * (ay2 - ay1)
            for j in range(nd):
                b = boxes[start + j]
                iw = max(min(ax2, b[2]) - max(ax1, b[0]), 0.0)
                ih = max(min(ay2, b[3]) - max(ay1, b[1]), 0.0)
                inter = iw * ih
                union = area_a + (b[2] - b[0]) * (b[3] - b[1]) - inter
                iou = inter / union if union > 0 else 0.0
                if per_class and cls[i] != classes[start + j]:
                    plain[i, j] = _INF
                    if fuse_score:
                        fused[i, j] = _INF
                else:
                    plain[i, j] = 1.0 - iou
                    if fuse_score:
                        fused[i, j] = 1.0 - iou * scores[start + j]
        high = np.empty(nd, np.int64)
        low = np.empty(nd, np.int64)
        n_high = n_low = 0
        for j in range(nd):
            sc = scores[start + j]
            if sc >= high_t:
                high[n_high] = j
                n_high += 1
            elif sc >= low_t:
                low[n_low] = j
                n_low += 1
        matched = np.zeros(n, np.bool_)
        used = np.zeros(nd, np.bool_)
        pair_t = np.empty(n, np.int64)
        pair_d = np.empty(n, np.int64)
        n_pairs = 0
        mr = np.empty(n, np.int64)
        mc = np.empty(n, np.int64)
        # 1. confirmed and lost tracks <- high detections (+ appearance)
        rows = np.empty(n, np.int64)
        n_rows = 0
        for i in range(n):
            if state[i] != TENTATIVE:
                rows[n_rows] = i
                n_rows += 1
        if n_rows and n_high:
            cost = np.empty((n_rows, n_high))
            for a in range(n_rows):
                for b in range(n_high):
                    c = fused[rows[a], high[b]]
                    if use_emb and c < match_t:
                        dot = np.float32(0.0)
                        for k in range(emb.shape[1]):
                            dot += emb[rows[a], k] * det_emb[start + high[b], k]
                        cos = min(max(np.float32(1.0) - dot, np.float32(0.0)), np.float32(1.0))
                        c = (1 - app_w) * c + np.float32(app_w) * cos  # (numpy: a float32 product)
                    elif use_emb:
                        c = _INF
                    cost[a, b] = c
            k = _match(cost, match_t, mr, mc)
            n_pairs = _record(k, rows, high, mr, mc, pair_t, pair_d, n_pairs, matched, used)
        # 2. unconfirmed tracks <- high detections left
        n_rows = 0
        for i in range(n):
            if state[i] == TENTATIVE:
                rows[n_rows] = i
                n_rows += 1
        left = np.empty(nd, np.int64)
        n_left = 0
        for b in range(n_high):
            if not used[high[b]]:
                left[n_left] = high[b]
                n_left += 1
        if n_rows and n_left:
            k = _match(_sub(fused, rows, n_rows, left, n_left), tent_t, mr, mc)
            n_pairs = _record(k, rows, left, mr, mc, pair_t, pair_d, n_pairs, matched, used)
        # 3. every track still unmatched <- low detections (IoU only)
        n_rows = 0
        for i in range(n):
            if not matched[i]:
                rows[n_rows] = i
                n_rows += 1
        if n_rows and n_low:
            k = _match(_sub(plain, rows, n_rows, low, n_low), low_match_t, mr, mc)
            n_pairs = _record(k, rows, low, mr, mc, pair_t, pair_d, n_pairs, matched, used)
        for j in range(nd):
            out[start + j] = -1
        # matched tracks: Kalman update, hits, state, ids (in the order the pairs were made)
        z = np.empty(4)
        for p in range(n_pairs):
            ti, di = pair_t[p], pair_d[p]
            s = kf[ti]
            _xyah(boxes[start + di], z)
            h = s[3]
            gain = np.empty(8)
            for k in range(4):
                r = h * noise[4, k] + noise[5, k]
                r = r * r
                r = r + s[8 + k]
                gain[k] = s[8 + k] / r
                gain[4 + k] = s[12 + k] / r
            for k in range(4):
                inn = z[k] - s[k]
                vp, cpv, vv = s[8 + k], s[12 + k], s[16 + k]
                s[k] = s[k] + gain[k] * inn
                s[4 + k] = s[4 + k] + gain[4 + k] * inn
                s[8 + k] = vp - gain[k] * vp
                s[12 + k] = cpv - gain[k] * cpv
                s[16 + k] = vv - gain[4 + k] * cpv
            hits[ti] += 1
            last_t[ti] = t
            cls[ti] = classes[start + di]
            if state[ti] == LOST:
                state[ti] = TRACKED
            elif state[ti] == TENTATIVE and hits[ti] >= min_hits:
                state[ti] = TRACKED
                ids[ti] = next_id
                next_id += 1
            if has_emb:
                fresh = True
                for k in range(emb.shape[1]):
                    if emb[ti, k] != 0:
                        fresh = False
                        break
                for k in range(emb.shape[1]):
                    if fresh:
                        emb[ti, k] = det_emb[start + di, k]
                    else:
                        emb[ti, k] = np.float32(momentum) * emb[ti, k] + np.float32(1 - momentum) * det_emb[start + di, k]
                _unit_rows(emb[ti : ti + 1])
            out[start + di] = ids[ti] if state[ti] == TRACKED else -1
        # unmatched: followed -> lost; unconfirmed -> removed; lost past the buffer -> removed
        if n:
            keep = np.empty(n, np.bool_)
            gone = False
            for i in range(n):
                if state[i] == TRACKED and not matched[i]:
                    state[i] = LOST
                keep[i] = not (
                    (state[i] == TENTATIVE and not matched[i]) or (state[i] == LOST and t - last_t[i] > buffer)
                )
                gone = gone or not keep[i]
            if gone:
                n = _compact(keep, n, kf, state, ids, hits, last_t, cls, emb)
        # 4. births from the high detections left, scored at least new_track_thresh
        confirm = first_frame or min_hits <= 1
        for j in range(nd):
            if used[j] or not scores[start + j] >= new_t:
                continue
            s = kf[n]
            s[:] = 0.0
            _xyah(boxes[start + j], z)
            for k in range(4):
                s[k] = z[k]
            for k in range(8):
                std = z[3] * noise[2, k] + noise[3, k]
                std = std * std
                if k < 4:
                    s[8 + k] = std
                else:
                    s[12 + k] = std
            state[n] = TRACKED if confirm else TENTATIVE
            if confirm:
                ids[n] = next_id
                next_id += 1
            else:
                ids[n] = -1
            hits[n] = 1
            last_t[n] = t
            cls[n] = classes[start + j]
            for k in range(emb.shape[1]):
                emb[n, k] = det_emb[start + j, k] if has_emb else np.float32(0.0)
            out[start + j] = ids[n]
            n += 1
        start = end
    return n, next_id, t_prev
