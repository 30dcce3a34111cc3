"""``Detections.split``: a batch's detections into one ``Detections`` per frame, held against a
boolean mask per frame (the plain way)."""

from __future__ import annotations

import pytest
import torch

from vidpipe.types import Detections


def _batch(frames: list[int], *, tracks: bool) -> Detections:
    n = len(frames)
    g = torch.Generator().manual_seed(n)
    xy = torch.rand((n, 2), generator=g) * 100
    return Detections(
        torch.cat([xy, xy + 10], 1),
        torch.rand((n,), generator=g),
        torch.randint(0, 80, (n,), generator=g),
        torch.tensor(frames, dtype=torch.int64),
        torch.arange(n) + 7 if tracks else None,
    )


@pytest.mark.parametrize("tracks", [False, True])
@pytest.mark.parametrize("frames", [[0, 2, 5, 1, 2, 0, 2], [3, 3, 3], [], [1, 0, 9, 9]])
def test_split_matches_a_mask_per_frame(frames, tracks):
    d = _batch(frames, tracks=tracks)
    parts = d.split(6)  # frame 9 is past the batch: its rows are dropped
    assert len(parts) == 6
    for i, p in enumerate(parts):
        m = d.frame == i
        assert torch.equal(p.boxes, d.boxes[m]) and torch.equal(p.scores, d.scores[m])
        assert torch.equal(p.class_ids, d.class_ids[m])
        assert p.frame.tolist() == [0] * int(m.sum())
        if tracks and len(d):
            assert torch.equal(p.track_ids, d.track_ids[m])
        else:  # (an empty batch splits into empty Detections without ids)
            assert p.track_ids is None
        Detections(p.boxes, p.scores, p.class_ids, p.frame, p.track_ids)  # what the checks would say: valid


@pytest.mark.parametrize("frames", [[0, 0, 1, 2, 2, 2, 5], [3, 3, 3], []])
def test_split_by_frame_skips_the_sort_of_sorted_rows(frames):
    d = _batch(frames, tracks=True)
    for plain, fast in zip(d.split(6), d.split(6, by_frame=True)):
        assert torch.equal(plain.boxes, fast.boxes) and torch.equal(plain.scores, fast.scores)
        assert torch.equal(plain.class_ids, fast.class_ids) and torch.equal(plain.frame, fast.frame)
        assert (plain.track_ids is None) == (fast.track_ids is None)
        if plain.track_ids is not None:
            assert torch.equal(plain.track_ids, fast.track_ids)
