"""The worker loop of file sources (vidpipe.sources.drive): a run that starts its workers before
its GPU warm-up lets them decode their first batch at once but preprocess only once the warm-up
is over (``warm``); a stop while waiting ends the source, stopped."""

from __future__ import annotations

import threading
import time

import torch

from vidpipe.pipeline_config import SourceState
from vidpipe.sources.drive import drive
from vidpipe.sources.spec import SourceSpec
from vidpipe.stats import PipelineStats


def _state() -> SourceState:
    return SourceState(spec=SourceSpec(kind="file", location="a.mp4"), stream_id=0)


class _Batches:
    """Three batches; records when each was pulled."""

    def __init__(self) -> None:
        self.pulled: list[float] = []

    def __iter__(self):
        for i in range(3):
            self.pulled.append(time.monotonic())
            yield [i, i]


def _run(warm: threading.Event | None, stop: threading.Event, out: list, batches: _Batches, state: SourceState) -> None:
    def to_input(batch):
        out.append((time.monotonic(), batch))
        return batch

    for _ in drive(iter(batches), to_input, device=torch.device("cpu"), stop=stop, stats=PipelineStats(),
                   state=state, warm=warm):  # fmt: skip
        pass


def test_first_batch_decoded_at_once_preprocessed_after_warm_up():
    warm, stop, out, batches, state = threading.Event(), threading.Event(), [], _Batches(), _state()
    t = threading.Thread(target=_run, args=(warm, stop, out, batches, state))
    t.start()
    deadline = time.monotonic() + 5
    while not batches.pulled and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)
    assert len(batches.pulled) == 1, "the first batch is decoded before the warm-up ends, and only it"
    assert out == [], "nothing is preprocessed before the warm-up ends"
    warmed = time.monotonic()
    warm.set()
    t.join(5)
    assert not t.is_alive()
    assert [b for _, b in out] == [[0, 0], [1, 1], [2, 2]]
    assert all(at >= warmed for at, _ in out)
    assert not state.stopped


def test_stop_while_waiting_for_the_warm_up_ends_the_source_stopped():
    warm, stop, out, batches, state = threading.Event(), threading.Event(), [], _Batches(), _state()
    t = threading.Thread(target=_run, args=(warm, stop, out, batches, state))
    t.start()
    time.sleep(0.2)
    stop.set()
    t.join(5)
    assert not t.is_alive(), "a stopped run must not leave a worker waiting for a warm-up that never ends"
    assert out == [] and state.stopped


def test_no_warm_event_or_warm_already_set_does_not_wait():
    for warm in (None, threading.Event()):
        if warm is not None:
            warm.set()
        out, batches, state = [], _Batches(), _state()
        _run(warm, threading.Event(), out, batches, state)
        assert [b for _, b in out] == [[0, 0], [1, 1], [2, 2]] and not state.stopped
