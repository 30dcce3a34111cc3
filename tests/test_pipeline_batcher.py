"""The per-source queues and the batcher on their own: round-robin fairness, the same-shape rule,
split chunks keeping frame order, latest-wins drops, blocking puts that stop, deadlines, lulls."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from vidpipe.batching import END, Batcher
from vidpipe.batching.batcher import LULL_S
from vidpipe.pipeline_config import SourceState
from vidpipe.sources.spec import SourceSpec
from vidpipe.types import FrameMeta, ModelInput

NEVER = threading.Event()


def inp(stream_id: int, first: int, n: int, hw=(32, 32)) -> ModelInput:
    """``n`` frames ``first..first+n-1`` of one stream; each frame's pixels hold its index."""
    t = torch.arange(first, first + n, dtype=torch.float32).view(n, 1, 1, 1).expand(n, 3, *hw).contiguous()
    frames = tuple(FrameMeta(f"s{stream_id}", stream_id, i, None, *hw) for i in range(first, first + n))
    return ModelInput(t, frames, torch.ones(n, 2), torch.zeros(n, 2))


def state(i: int) -> SourceState:
    return SourceState(spec=SourceSpec("file", f"s{i}"), stream_id=i)


def ids(batch) -> list[tuple[int, int]]:
    return [(f.stream_id, f.index) for c in batch for f in c.inp.frames]


def test_round_robin_across_sources_and_split_chunks_keep_order():
    b = Batcher(4)
    qs = [b.add_queue(state(i), live=False, capacity=8) for i in range(3)]
    for i, q in enumerate(qs):
        for k in range(3):
            assert q.put(inp(i, 3 * k, 3), None, stop=NEVER)
    first = b.next(in_flight=False, stop=NEVER)
    assert ids(first) == [(0, 0), (0, 1), (0, 2), (1, 0)]  # chunk of 0, then 1 frame of 1's chunk
    second = b.next(in_flight=False, stop=NEVER)
    assert ids(second) == [(2, 0), (2, 1), (2, 2), (0, 3)]  # continues after the source served last
    # the pixels travel with their frames (split chunks are views of the right rows)
    for batch in (first, second):
        for c in batch:
            assert [int(v) for v in c.inp.tensor[:, 0, 0, 0]] == [f.index for f in c.inp.frames]
    got = ids(first) + ids(second)
    for qs_ in qs:
        qs_.finish()
    while (nxt := b.next(in_flight=False, stop=NEVER)) is not END:
        got += ids(nxt)
    for i in range(3):
        assert [f for s, f in got if s == i] == list(range(9))


def test_one_busy_source_cannot_crowd_out_another():
    b = Batcher(8)
    busy = b.add_queue(state(0), live=False, capacity=16)
    cam = b.add_queue(state(1), live=True, capacity=2)
    for k in range(10):
        busy.put(inp(0, 8 * k, 8), None, stop=NEVER)
    served = []
    for k in range(5):
        cam.put(inp(1, k, 1), None, stop=NEVER)
        batch = b.next(in_flight=False, stop=NEVER)
        assert len(ids(batch)) == 8
        served += [f for s, f in ids(batch) if s == 1]
    assert served == [0, 1, 2, 3, 4]  # the camera's frame goes out in the very next batch


def test_other_shapes_wait_for_a_later_batch():
    b = Batcher(4)
    a = b.add_queue(state(0), live=False, capacity=4)
    w = b.add_queue(state(1), live=False, capacity=4)
    a.put(inp(0, 0, 2, hw=(32, 32)), None, stop=NEVER)
    w.put(inp(1, 0, 2, hw=(32, 64)), None, stop=NEVER)
    a.finish()
    w.finish()
    shapes = []
    while (batch := b.next(in_flight=False, stop=NEVER)) is not END:
        assert len({c.shape for c in batch}) == 1
        shapes.append(batch[0].shape)
    assert sorted(shapes) == [(3, 32, 32), (3, 32, 64)]


def test_latest_wins_drops_oldest_and_counts():
    b = Batcher(8)
    st = state(0)
    q = b.add_queue(st, live=True, capacity=2)
    for k in range(5):
        assert q.put(inp(0, k, 1), None, stop=NEVER)  # never blocks
    assert (st.drops, st.produced, q.frames) == (3, 2, 2)
    q.finish()
    assert ids(b.next(in_flight=False, stop=NEVER)) == [(0, 3), (0, 4)]
    assert b.next(in_flight=False, stop=NEVER) is END


def test_full_file_queue_blocks_until_taken_or_stopped():
    b = Batcher(2)
    q = b.add_queue(state(0), live=False, capacity=1)
    stop = threading.Event()
    assert q.put(inp(0, 0, 2), None, stop=stop)
    result = []
    t = threading.Thread(target=lambda: result.append(q.put(inp(0, 2, 2), None, stop=stop)))
    t.start()
    time.sleep(0.3)
    assert t.is_alive()  # waiting: every frame of a file is kept
    assert ids(b.next(in_flight=False, stop=NEVER)) == [(0, 0), (0, 1)]
    t.join(2)
    assert result == [True]
    t = threading.Thread(target=lambda: result.append(q.put(inp(0, 4, 2), None, stop=stop)))
    t.start()
    time.sleep(0.2)
    stop.set()
    t.join(1)
    assert not t.is_alive() and result == [True, False]


def test_deadline_mode_emits_partial_batches_after_the_timeout():
    b = Batcher(32, batch_timeout=0.2)
    q = b.add_queue(state(0), live=True, capacity=8)
    q.put(inp(0, 0, 1), None, stop=NEVER)
    t0 = time.monotonic()
    batch = b.next(in_flight=False, stop=NEVER)
    waited = time.monotonic() - t0
    assert ids(batch) == [(0, 0)] and 0.15 < waited < 0.5
    q.put(inp(0, 1, 1), None, stop=NEVER)
    assert b.next(in_flight=True, stop=NEVER) is None  # not due: finish the batch in flight first


def test_lull_mode_flushes_after_a_quiet_spell_and_ends():
    b = Batcher(32)
    q = b.add_queue(state(0), live=False, capacity=4)
    assert b.timeout() is None
    q.put(inp(0, 0, 3), None, stop=NEVER)
    t0 = time.monotonic()
    assert ids(b.next(in_flight=False, stop=NEVER)) == [(0, 0), (0, 1), (0, 2)]
    assert LULL_S * 0.8 < time.monotonic() - t0 < 0.5
    q.finish()
    assert b.next(in_flight=False, stop=NEVER) is END


def test_stop_and_close_wake_a_waiting_consumer():
    b = Batcher(4, keep_alive=True)
    b.add_queue(state(0), live=True, capacity=2)
    stop = threading.Event()
    threading.Timer(0.3, lambda: (stop.set(), b.wake())).start()
    t0 = time.monotonic()
    assert b.next(in_flight=False, stop=stop) is None
    assert time.monotonic() - t0 < 0.6
    b2 = Batcher(4, keep_alive=True)
    threading.Timer(0.3, b2.close).start()
    t0 = time.monotonic()
    assert b2.next(in_flight=False, stop=NEVER) is None
    assert time.monotonic() - t0 < 0.6


def test_removed_queue_refuses_puts_and_its_frames_leave_no_batch():
    b = Batcher(4)
    keep = b.add_queue(state(0), live=False, capacity=4)
    gone = b.add_queue(state(1), live=False, capacity=4)
    gone.put(inp(1, 0, 2), None, stop=NEVER)
    keep.put(inp(0, 0, 2), None, stop=NEVER)
    assert b.remove_queue(gone) == 2
    assert not gone.put(inp(1, 2, 2), None, stop=NEVER)
    keep.finish()
    assert ids(b.next(in_flight=False, stop=NEVER)) == [(0, 0), (0, 1)]
    assert b.next(in_flight=False, stop=NEVER) is END


@pytest.mark.parametrize("timeout, measured", [(None, 1 / 30), (0.5, 0.5)])
def test_default_deadline_is_one_frame_interval_of_the_fastest_stream(timeout, measured):
    b = Batcher(8, batch_timeout=timeout)
    assert b.timeout() == (timeout if timeout is not None else None)
    slow = b.add_queue(state(0), live=True, capacity=2)
    fast = b.add_queue(state(1), live=True, capacity=2)
    assert b.timeout() == pytest.approx(measured)
    for k in range(6):
        fast.put(inp(1, k, 1), None, stop=NEVER)
        if k % 2 == 0:
            slow.put(inp(0, k, 1), None, stop=NEVER)
        time.sleep(0.05)
    want = 0.05 if timeout is None else timeout
    assert b.timeout() == pytest.approx(want, rel=0.5)
