"""ByteTrack (Zhang et al., 2022) on numpy arrays: one :class:`ByteTrack` per stream.

Per frame: every track's Kalman state is moved to the frame's time; detections scored at least
``high_thresh`` are associated with the confirmed and lost tracks (IoU, times the score, plus an
appearance distance when embeddings are given); new, unconfirmed tracks with the high detections
left; then every track still unmatched with the low-scored detections (IoU only), which keeps
objects through partial occlusion (unlike the paper, lost and unconfirmed tracks take part too,
as in the ``trackers`` package's ByteTrack); a track lost for more than
``track_buffer`` seconds (on the frames' clock) is dropped; high detections left over start
tracks. Every step is vectorised over all tracks (:mod:`vidpipe.track.kalman`,
:mod:`vidpipe.track.assign`); the state is a few arrays, and ended tracks are removed from them
at once, so a long run does not grow.

Ids are confirmed tracks' numbers, 1, 2, 3, ... in order of confirmation (a track never
confirmed uses no id); detections not (yet) in a confirmed track get ``-1``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from vidpipe.track.assign import iou_matrix, match
from vidpipe.track.config import TrackConfig
from vidpipe.track.kalman import KalmanXYAH, xyah_to_xyxy, xyxy_to_xyah
from vidpipe.track.snapshot import TrackerSnapshot

__all__ = ["ByteTrack", "TENTATIVE", "TRACKED", "LOST"]

TENTATIVE, TRACKED, LOST = 0, 1, 2
_KF = KalmanXYAH()


@dataclass
class _Tracks:
    """Struct of arrays, one row per live track."""

    kf: np.ndarray  # (T, 20) float64: Kalman mean and covariance, packed (see vidpipe.track.kalman)
    state: np.ndarray  # (T,) int8: TENTATIVE / TRACKED / LOST
    ids: np.ndarray  # (T,) int64, -1 until confirmed
    hits: np.ndarray  # (T,) int64 detections matched so far (birth included)
    last_t: np.ndarray  # (T,) float64 time of the last match, seconds
    cls: np.ndarray  # (T,) int64
    emb: np.ndarray | None  # (T, D) float32 unit vectors, or None

    @classmethod
    def empty(cls) -> "_Tracks":
        z = np.zeros
        return cls(z((0, 20)), z(0, np.int8), z(0, np.int64), z(0, np.int64), z(0), z(0, np.int64), None)

    def __len__(self) -> int:
        return int(self.state.shape[0])

    def take(self, keep: np.ndarray) -> "_Tracks":
        return _Tracks(
            self.kf[keep], self.state[keep], self.ids[keep], self.hits[keep], self.last_t[keep], self.cls[keep],
            None if self.emb is None else self.emb[keep],
        )  # fmt: skip

    def extend(self, other: "_Tracks") -> "_Tracks":
        if len(self) == 0:
            return other
        emb = None
        if self.emb is not None and other.emb is not None and self.emb.shape[1] == other.emb.shape[1]:
            emb = np.concatenate([self.emb, other.emb])
        return _Tracks(
            np.concatenate([self.kf, other.kf]), np.concatenate([self.state, other.state]),
            np.concatenate([self.ids, other.ids]), np.concatenate([self.hits, other.hits]),
            np.concatenate([self.last_t, other.last_t]),
            np.concatenate([self.cls, other.cls]), emb,
        )  # fmt: skip


def _nz(mask: np.ndarray) -> np.ndarray:
    return mask.nonzero()[0]


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


class ByteTrack:
    """The tracker of one stream (supervision's shape: :meth:`update` per frame, :meth:`reset`).

    Args:
        config: the options (:class:`~vidpipe.track.TrackConfig`); or pass them as keywords.
        first_id: the id the first confirmed track gets (ids then count up).

    Example::

        tracker = ByteTrack(track_buffer=2.0)
        ids = tracker.update(boxes, scores, class_ids, t=frame_time)   # (N,) int64, -1 untracked
    """

    def __init__(self, config: TrackConfig | None = None, *, first_id: int = 1, **options: object) -> None:
        if config is None:
            config = TrackConfig(**options)  # type: ignore[arg-type]
        elif options:
            from dataclasses import replace

            config = replace(config, **options)  # type: ignore[arg-type]
        self.config = config
        self._first_id = self._next_id = int(first_id)
        self.reset()

    # ------------------------------------------------------------------ state
    def reset(self) -> None:
        """Drop every track (ids keep counting up, so an id is never reused by this tracker)."""
        self._tracks = _Tracks.empty()
        self._t: float | None = None
        self.frames = 0

    @property
    def next_id(self) -> int:
        return self._next_id

    def snapshot(self) -> TrackerSnapshot:
        """The tracks and clock now, as arrays (copies; see :mod:`vidpipe.track.snapshot`)."""
        tr = self._tracks
        return TrackerSnapshot(
            tr.kf.copy(), tr.state.copy(), tr.ids.copy(), tr.hits.copy(), tr.last_t.copy(), tr.cls.copy(),
            None if tr.emb is None else tr.emb.copy(), self._t, self.frames, self._first_id, self._next_id,
        )  # fmt: skip

    @property
    def started(self) -> int:
        """Tracks confirmed so far (ids handed out since creation)."""
        return self._next_id - self._first_id

    def active(self) -> int:
        """Confirmed tracks being followed now (not lost)."""
        return int(np.count_nonzero(self._tracks.state == TRACKED))

    def __len__(self) -> int:
        """Tracks held (tentative, followed and lost)."""
        return len(self._tracks)

    # ------------------------------------------------------------------ update
    def update(
        self,
        boxes: np.ndarray,
        scores: np.ndarray,
        class_ids: np.ndarray | None = None,
        *,
        t: float | None = None,
        embeddings: np.ndarray | None = None,
    ) -> np.ndarray:
        """Track one frame's detections.

        Args:
            boxes: ``(N, 4)`` x1, y1, x2, y2 (any float dtype).
            scores: ``(N,)`` confidences.
            class_ids: ``(N,)`` integers (``None``: one class).
            t: the frame's time in seconds (capture time, timestamp); ``None``: one
                ``1 / nominal_fps`` after the previous frame.
            embeddings: ``(N, D)`` appearance vectors, or ``None``.

        Returns:
            ``(N,)`` int64: each detection's track id, ``-1`` where it is not in a confirmed track.
        """
        cfg = self.config
        boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
        n = boxes.shape[0]
        scores = np.asarray(scores, dtype=np.float64).reshape(n)
        cls = np.zeros(n, np.int64) if class_ids is None else np.asarray(class_ids, dtype=np.int64).reshape(n)
        emb = None
        if embeddings is not None and cfg.appearance_weight > 0 and n:
            emb = _unit(np.asarray(embeddings, dtype=np.float32).reshape(n, -1))

        step = 1.0 / cfg.nominal_fps
        if t is None:
            t = (self._t + step) if self._t is not None else 0.0
        elif not math.isfinite(t):
            raise ValueError(f"t must be a finite time in seconds, got {t!r}")
        first_frame = self._t is None
        dt = 1.0 if first_frame else (t - self._t) * cfg.nominal_fps  # type: ignore[operator]
        if not dt > 0:  # same or earlier time (a repeated timestamp): one nominal step
            dt = 1.0
            t = self._t + step  # type: ignore[operator]
        elif dt > 0.5 and abs(dt - round(dt)) < 1e-6:  # whole steps up to the timestamps' rounding
            dt = float(round(dt))
        self._t = t
        self.frames += 1

        tr = self._tracks
        if len(tr):  # tracks unseen for longer than the buffer end before they can match again
            expired = t - tr.last_t > cfg.track_buffer + 1e-9
            if np.count_nonzero(expired):  # (count_nonzero: a fifth of .any()'s per-call cost)
                self._tracks = tr = tr.take(~expired)
        if len(tr):
            lost = tr.state == LOST
            if np.count_nonzero(lost):  # ByteTrack: a lost track's height stops changing
                tr.kf[lost, 7] = 0.0
            tr.kf = _KF.predict_packed(tr.kf, dt)

        out = np.empty(n, dtype=np.int64)
        out.fill(-1)  # (np.full costs five times as much on a few elements)
        det_used = np.zeros(n, dtype=bool)
        pairs_t: list[np.ndarray] = []
        pairs_d: list[np.ndarray] = []
        high = _nz(scores >= cfg.high_thresh)
        low = _nz((scores >= cfg.low_thresh) & (scores < cfg.high_thresh))
        pred = xyah_to_xyxy(tr.kf) if len(tr) else np.zeros((0, 4))
        matched_t = np.zeros(len(tr), dtype=bool)
        # every track against every detection once; each stage takes its rows and columns
        plain = fused = None
        if len(tr) and n:
            iou = iou_matrix(pred, boxes)
            plain = 1.0 - iou
            fused = 1.0 - iou * scores[None, :] if cfg.fuse_score else plain
            if cfg.per_class:
                other = tr.cls[:, None] != cls[None, :]
                plain[other] = np.inf  # never paired
                if fused is not plain:
                    fused[other] = np.inf

        # 1. confirmed and lost tracks <- high detections (IoU x score, + appearance)
        pool = _nz(tr.state != TENTATIVE)
        if pool.size and high.size:
            cost = fused[pool][:, high]
            if emb is not None and tr.emb is not None and tr.emb.shape[1] == emb.shape[1]:
                cos = np.minimum(np.maximum(1.0 - tr.emb[pool] @ emb[high].T, 0.0), 1.0)
                gated = cost < cfg.match_thresh
                cost = np.where(gated, (1 - cfg.appearance_weight) * cost + cfg.appearance_weight * cos, np.inf)
            r, c = match(cost, cfg.match_thresh)
            self._pair(pool[r], high[c], pairs_t, pairs_d, matched_t, det_used)

        # 2. unconfirmed tracks <- high detections left
        tent = _nz(tr.state == TENTATIVE)
        high_left = high[~det_used[high]]
        if tent.size and high_left.size:
            cost = fused[tent][:, high_left]
            r, c = match(cost, cfg.tentative_match_thresh)
            self._pair(tent[r], high_left[c], pairs_t, pairs_d, matched_t, det_used)

        # 3. every track still unmatched <- low detections (IoU only). The paper takes only the
        # tracks followed until the previous frame; taking the lost ones too lets a track missed
        # for a frame come back on a partly hidden (low-scored) detection, and the unconfirmed
        # ones too lets an object that is being hidden as it appears keep its new track (as
        # the trackers package does): on the generated scenes fewer misses, same or fewer
        # switches (vidpipe bench track)
        rest = _nz(~matched_t)
        if rest.size and low.size:
            cost = plain[rest][:, low]
            r, c = match(cost, cfg.low_match_thresh)
            self._pair(rest[r], low[c], pairs_t, pairs_d, matched_t, det_used)

        if pairs_t:
            ti = np.concatenate(pairs_t)
            di = np.concatenate(pairs_d)
            if ti.size:
                self._apply_matches(ti, di, boxes, cls, emb, t, out)

        # unmatched: followed -> lost; unconfirmed -> removed; lost past the buffer -> removed
        if len(tr):
            tr.state[(tr.state == TRACKED) & ~matched_t] = LOST
            keep = ~((tr.state == TENTATIVE) & ~matched_t)
            keep &= ~((tr.state == LOST) & (t - tr.last_t > cfg.track_buffer + 1e-9))
            if np.count_nonzero(keep) < keep.shape[0]:
                self._tracks = tr = tr.take(keep)

        # 4. new tracks from the high detections left, scored at least new_track_thresh
        born = _nz(~det_used & (scores >= cfg.new_track_thresh))
        if born.size:
            self._birth(born, boxes, cls, emb, t, confirm=first_frame or cfg.min_hits <= 1, out=out)
        return out

    def update_frames(
        self,
        times: np.ndarray,
        counts: np.ndarray,
        boxes: np.ndarray,
        scores: np.ndarray,
        classes: np.ndarray,
        embeddings: np.ndarray | None = None,
    ) -> np.ndarray:
        """Track consecutive frames: :meth:`update` per frame (the interface of
        :meth:`CompiledByteTrack.update_frames <vidpipe.track.compiled.CompiledByteTrack.update_frames>`).

        Args:
            times: ``(F,)`` each frame's time in seconds; counts: ``(F,)`` detections per frame.
            boxes: ``(N, 4)`` xyxy, ``N = counts.sum()``, in frame order; scores: ``(N,)``;
                classes: ``(N,)`` integers; embeddings: ``(N, D)`` or ``None``.

        Returns:
            ``(N,)`` int64 track ids, ``-1`` where not in a confirmed track.
        """
        boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)  # once per batch, not per frame
        scores = np.asarray(scores, dtype=np.float64)
        classes = np.asarray(classes, dtype=np.int64)
        ids = np.empty(boxes.shape[0], dtype=np.int64)
        start = 0
        for t, c in zip(np.asarray(times, dtype=np.float64).tolist(), np.asarray(counts).tolist()):
            end = start + c
            ids[start:end] = self.update(
                boxes[start:end], scores[start:end], classes[start:end], t=t,
                embeddings=None if embeddings is None or not c else embeddings[start:end],
            )  # fmt: skip
            start = end
        if start != boxes.shape[0]:
            raise ValueError(f"counts add up to {start}, but there are {boxes.shape[0]} boxes")
        return ids

    @staticmethod
    def _pair(ti, di, pairs_t, pairs_d, matched_t, det_used) -> None:
        """Note the pairs (tracks ``ti``, detections ``di``) one association stage made."""
        if ti.shape[0]:
            pairs_t.append(ti)
            pairs_d.append(di)
            matched_t[ti] = True
            det_used[di] = True

    def _apply_matches(self, ti, di, boxes, cls, emb, t, out) -> None:
        tr = self._tracks
        tr.kf[ti] = _KF.update_packed(tr.kf[ti], xyxy_to_xyah(boxes[di]))
        hits = tr.hits[ti] + 1
        tr.hits[ti] = hits
        tr.last_t[ti] = t
        tr.cls[ti] = cls[di]
        state = tr.state[ti]  # the matched tracks' states, written back once
        state[state == LOST] = TRACKED
        confirm = (state == TENTATIVE) & (hits >= self.config.min_hits)
        if np.count_nonzero(confirm):
            state[confirm] = TRACKED
            tr.ids[ti[confirm]] = self._take_ids(int(np.count_nonzero(confirm)))
        tr.state[ti] = state
        if emb is not None:
            if tr.emb is None or tr.emb.shape[1] != emb.shape[1]:
                tr.emb = np.zeros((len(tr), emb.shape[1]), dtype=np.float32)
            m = self.config.embedding_momentum
            old = tr.emb[ti]
            fresh = ~old.any(axis=1)  # a track without an embedding yet takes the detection's
            mixed = np.where(fresh[:, None], emb[di], m * old + (1 - m) * emb[di])
            tr.emb[ti] = _unit(mixed)
        out[di] = np.where(state == TRACKED, tr.ids[ti], -1)

    def _birth(self, born, boxes, cls, emb, t, *, confirm: bool, out) -> None:
        k = born.size
        kf = _KF.initiate_packed(xyxy_to_xyah(boxes[born]))
        ids = self._take_ids(k) if confirm else np.full(k, -1, dtype=np.int64)
        new = _Tracks(
            kf, np.full(k, TRACKED if confirm else TENTATIVE, dtype=np.int8), ids, np.ones(k, np.int64),
            np.full(k, t), cls[born].copy(), None,
        )  # fmt: skip
        tr = self._tracks
        if emb is not None:
            new.emb = emb[born].astype(np.float32)
            if tr.emb is None and len(tr):
                tr.emb = np.zeros((len(tr), emb.shape[1]), dtype=np.float32)
        elif tr.emb is not None:
            new.emb = np.zeros((k, tr.emb.shape[1]), dtype=np.float32)
        self._tracks = tr.extend(new)
        out[born] = ids

    def _take_ids(self, k: int) -> np.ndarray:
        ids = np.arange(self._next_id, self._next_id + k, dtype=np.int64)
        self._next_id += k
        return ids
