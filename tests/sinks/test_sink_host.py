"""Detections reach the host in one copy per batch, not one per frame, and without loss."""

from __future__ import annotations

import csv

import pytest
import torch
from sink_helpers import EXPECTED, make_result, sample_batches
from torch.utils._pytree import tree_leaves
from torch.utils._python_dispatch import TorchDispatchMode

from vidpipe.sinks import TableSink
from vidpipe.sinks._host import to_host

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def _need(device: str) -> None:
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")


class DeviceToHostCounter(TorchDispatchMode):
    """Counts every aten op that takes a non-CPU tensor and produces host data.

    That covers ``.cpu()``/``.to("cpu")`` (``_to_copy``), ``copy_`` into a CPU tensor, and
    ``.item()``/``.tolist()`` (``_local_scalar_dense``), so per-frame copies cannot hide.
    """

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = [t for t in tree_leaves((args, kwargs or {})) if isinstance(t, torch.Tensor)]
        if any(t.device.type != "cpu" for t in inputs):
            outputs = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
            if func is torch.ops.aten._local_scalar_dense.default or any(t.device.type == "cpu" for t in outputs):
                self.ops.append(str(func))
        return out


@pytest.mark.parametrize("device", DEVICES)
def test_one_host_copy_per_batch(tmp_path, device):
    _need(device)
    path = tmp_path / "dets.csv"
    sink = TableSink(path)
    batches = sample_batches(device)
    with DeviceToHostCounter() as counter:
        sink.write(batches[0])  # 3 frames, 3 detections
    first = list(counter.ops)
    with DeviceToHostCounter() as counter:
        sink.write(batches[1])  # 2 frames, 3 detections
    second = list(counter.ops)
    sink.close()
    want = 0 if device == "cpu" else 1
    assert len(first) == want and len(second) == want, (first, second)
    assert sink.stats["d2h_copies"] == 2 * want
    # (N, 6) float64 per batch: boxes, score, class id
    assert sink.stats["d2h_bytes"] == (0 if device == "cpu" else 6 * 8 * len(EXPECTED))
    rows = list(csv.DictReader(path.open()))
    assert [int(r["frame"]) for r in rows] == [e[0] for e in EXPECTED]
    assert [float(r["x2"]) for r in rows] == pytest.approx([e[7] for e in EXPECTED], abs=0.005)


@pytest.mark.parametrize("device", DEVICES)
def test_to_host_is_lossless(device):
    _need(device)
    big_id = 2**40 + 3  # exact through the float64 packing (< 2**53)
    results = [
        make_result(0, [[0.1, 0.2, 1000.3, 2000.4]], [0.123456], [5], track_ids=[big_id], device=device),
        make_result(1, [], [], [], device=device),
        make_result(2, [[1.5, 2.5, 3.5, 4.5], [7, 8, 9, 10]], [0.5, 1.0], [0, 79], device=device,
                    box_dtype=torch.float16),
    ]
    rows = to_host(results, tracks=True)
    assert rows.counts.tolist() == [1, 0, 2]
    assert rows.frame_pos.tolist() == [0, 2, 2]
    assert rows.boxes.dtype.name == "float32" and rows.class_ids.dtype.name == "int64"
    expected_boxes = torch.cat([r.detections.boxes.float().cpu() for r in results])
    assert torch.equal(torch.from_numpy(rows.boxes), expected_boxes)
    assert rows.scores.tolist() == torch.tensor([0.123456, 0.5, 1.0]).tolist()
    assert rows.class_ids.tolist() == [5, 0, 79]
    assert rows.track_ids.tolist() == [big_id, -1, -1]
    assert rows.track_valid.tolist() == [True, False, False]
    assert rows.d2h_copies == (0 if device == "cpu" else 1)


def test_to_host_every_frame_tracked():
    """Every frame with ids (the usual tracked batch, packed in one go): ids, -1 and order kept."""
    big_id = 2**40 + 7
    results = [
        make_result(0, [[0, 0, 1, 1], [2, 2, 3, 3]], [0.9, 0.8], [1, 2], track_ids=[big_id, -1]),
        make_result(1, [], [], [], track_ids=[]),
        make_result(2, [[4, 4, 5, 5]], [0.7], [3], track_ids=[12]),
    ]
    rows = to_host(results, tracks=True)
    assert rows.track_ids.tolist() == [big_id, -1, 12]
    assert rows.track_valid.tolist() == [True, False, True]
    assert rows.class_ids.tolist() == [1, 2, 3] and rows.frame_pos.tolist() == [0, 0, 2]


def test_to_host_empty_batch():
    rows = to_host([make_result(0, [], [], [])])
    assert len(rows) == 0 and rows.boxes.shape == (0, 4) and rows.d2h_copies == 0
