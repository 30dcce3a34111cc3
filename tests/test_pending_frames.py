"""Frames queued before their preprocessing (vidpipe.batching.pending): a batch of them, of mixed
sizes and beside ordinary model inputs, gives exactly the model input that preprocessing each one
on its own gives, in the batch's order; every frame's buffer is released exactly once, whether its
batch ran or the latest-wins queue dropped it. The independent reference is the letterbox of
each frame alone (the same path the file sources take), compared bit for bit."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
import torch

from vidpipe.batching import Batcher
from vidpipe.batching.pending import PendingFrame, materialize
from vidpipe.ops.preprocess import Preprocessor
from vidpipe.pipeline_config import PipelineConfig, SourceState
from vidpipe.sources.spec import SourceSpec
from vidpipe.types import FrameBatch, FrameMeta

NEVER = threading.Event()


def detector(device="cpu"):
    info = SimpleNamespace(stride=32, dynamic_shape=True)
    return SimpleNamespace(device=torch.device(device), dtype=torch.float32, input_size=(96, 96),
                           model=SimpleNamespace(info=info))


def frame(stream: int, index: int, h: int, w: int, released: list) -> PendingFrame:
    g = torch.Generator().manual_seed(1000 * stream + index)
    data = torch.randint(0, 256, (1, 3, h, w), dtype=torch.uint8, generator=g)
    fb = FrameBatch(data=data, frames=(FrameMeta(f"s{stream}", stream, index, None, h, w),))
    shape = Preprocessor(detector(), PipelineConfig()).input_shape(h, w)
    return PendingFrame(batch=fb, input_shape=shape, release=lambda done: released.append((stream, index, done)))


@pytest.mark.parametrize("keep", [False, True])
def test_a_batch_of_pending_frames_equals_each_preprocessed_alone(keep):
    to_input = Preprocessor(detector(), PipelineConfig(keep_frames=keep))
    released: list = []
    sizes = [(64, 96), (64, 96), (48, 96), (64, 96)]  # one of another size, in the middle
    parts = [frame(s, 7, h, w, released) for s, (h, w) in enumerate(sizes)]
    alone = [to_input(p.batch) for p in parts]
    # an ordinary model input between them (a file source's chunk)
    mixed = [parts[0], alone[1], parts[2], parts[3]]
    got = materialize(mixed, to_input)
    assert [f.stream_id for f in got.frames] == [0, 1, 2, 3]
    want = torch.cat([a.tensor for a in alone])
    assert torch.equal(got.tensor, want)
    assert torch.equal(got.scale, torch.cat([a.scale for a in alone]))
    assert torch.equal(got.pad, torch.cat([a.pad for a in alone]))
    if keep:
        for img, p in zip(got.images, parts):
            assert torch.equal(img, p.batch.data[0])
    else:
        assert got.images is None
    assert sorted(released) == [(0, 7, None), (2, 7, None), (3, 7, None)]  # once each, done at once on the CPU


def test_pending_frames_dropped_or_closed_in_a_queue_are_released():
    released: list = []
    b = Batcher(4)
    st = SourceState(spec=SourceSpec("file", "cam"), stream_id=0)
    q = b.add_queue(st, live=True, capacity=2)
    for i in range(5):
        assert q.put(frame(0, i, 32, 32, released), None, stop=NEVER)
    assert [r[1] for r in released] == [0, 1, 2] and st.drop_causes == {"queue": 3}  # latest wins
    assert b.remove_queue(q) == 2  # the two queued when the source is removed
    assert sorted(r[1] for r in released) == [0, 1, 2, 3, 4]
    assert all(done is None for _, _, done in released)
