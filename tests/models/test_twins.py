"""A detector's CUDA-graph twins are kept across runs (vidpipe.models.twins)."""

from __future__ import annotations

import threading

import pytest

import vidpipe
from vidpipe.models.twins import KEEP_IDLE, GraphTwins


def test_twins_are_lent_one_caller_at_a_time() -> None:
    pool: GraphTwins[object] = GraphTwins()
    a = pool.take("k", object)
    b = pool.take("k", object)  # a is in use: a new one
    assert a is not b and pool.made == 2
    pool.give("k", a)
    assert pool.take("k", object) is a and pool.made == 2
    assert pool.take("other", object) is not a and pool.made == 3  # keys do not mix


def test_twins_keep_a_bounded_number_idle() -> None:
    pool: GraphTwins[object] = GraphTwins()
    twins = [pool.take("k", object) for _ in range(KEEP_IDLE + 3)]
    for t in twins:
        pool.give("k", t)
    kept = [pool.take("k", object) for _ in range(KEEP_IDLE)]
    assert all(any(k is t for t in twins) for k in kept)
    made = pool.made
    pool.take("k", object)
    assert pool.made == made + 1  # the extra ones were dropped


def _rows(run: vidpipe.DetectionRun) -> list[tuple]:
    out = []
    for r in run:
        d = r.detections.to("cpu")
        out.append((r.meta.index, d.boxes.tolist(), d.class_ids.tolist()))
    return out


@pytest.mark.gpu
@pytest.mark.nvdec
def test_runs_of_one_detector_share_one_graph(bikes_path) -> None:
    """Six runs of one detector capture one CUDA graph; the memory PyTorch has allocated stays
    where the second run left it (a graph captured per run kept ~70 MiB of static buffers
    allocated until the cycle collector ran); the results are the same each time. Two runs at
    once capture a second graph."""
    import torch

    from vidpipe.api import build_detector

    det = build_detector("yolov3-tiny", device="cuda")
    first = _rows(vidpipe.detect(bikes_path, model=det, batch_size=32))
    assert _rows(vidpipe.detect(bikes_path, model=det, batch_size=32)) == first
    allocated = torch.cuda.memory_allocated()
    for _ in range(4):
        assert _rows(vidpipe.detect(bikes_path, model=det, batch_size=32)) == first
    assert det.twins.made == 1
    assert torch.cuda.memory_allocated() <= allocated + 16 * 2**20
    out: list[list[tuple]] = []
    runs = [vidpipe.detect(bikes_path, model=det, batch_size=32) for _ in range(2)]
    iters = [iter(r) for r in runs]
    for it in iters:  # both runs hold their graph before either ends
        next(it)
    threads = [threading.Thread(target=lambda it=it: out.append(list(it))) for it in iters]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert det.twins.made == 2 and len(out) == 2
