"""The stage chain: per stream, in order, results handed on in the batch's order; reset on a
new connection and on remove; reports in the summary and meta; bad stages rejected."""

from __future__ import annotations

import dataclasses
import json

import pytest

import vidpipe
from vidpipe.errors import ConfigError
from vidpipe.stages import StageRunner
from vidpipe.types import Detections, FrameMeta, FrameResult


class Recorder:
    """A real stage: records what it saw and tags every result with its frame count so far."""

    name = "recorder"
    needs_frames = False

    def __init__(self) -> None:
        self.seen: list[tuple[int, int]] = []
        self.resets: list[int] = []
        self.calls: list[int] = []
        self.closed = 0

    def process(self, results):
        sids = {r.meta.stream_id for r in results}
        assert len(sids) == 1, "a stage gets one stream at a time"
        self.calls.append(len(results))
        self.seen.extend((r.meta.stream_id, r.meta.index) for r in results)
        return [dataclasses.replace(r, names=("tagged",)) for r in results]

    def reset(self, stream_id):
        self.resets.append(stream_id)

    def report(self):
        return {"frames": len(self.seen)}

    def close(self):
        self.closed += 1


def _result(sid: int, index: int, connection: int = 0) -> FrameResult:
    import torch

    meta = FrameMeta(f"s{sid}", sid, index, None, 10, 10, connection=connection)
    dets = Detections(torch.zeros((0, 4)), torch.zeros(0), torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long))
    return FrameResult(meta=meta, detections=dets)


def test_runner_groups_by_stream_keeps_batch_order_and_resets_on_new_connection():
    rec = Recorder()
    runner = StageRunner([rec])
    batch = [_result(0, 0), _result(1, 0), _result(0, 1), _result(1, 1)]
    out = runner(batch)
    assert [(r.meta.stream_id, r.meta.index) for r in out] == [(0, 0), (1, 0), (0, 1), (1, 1)]
    assert all(r.names == ("tagged",) for r in out)
    assert sorted(rec.calls) == [2, 2]
    assert rec.seen.index((0, 0)) < rec.seen.index((0, 1))
    runner([_result(1, 2)])
    assert rec.resets == []
    runner([_result(1, 0, connection=1)])  # stream 1 reconnected
    assert rec.resets == [1]
    assert runner.reports() == {"recorder": {"frames": 6}}
    runner.close()
    runner.close()
    assert rec.closed == 1


def test_runner_rejects_non_stages_and_duplicate_names():
    with pytest.raises(ConfigError, match="not a Stage"):
        StageRunner([object()])
    with pytest.raises(ConfigError, match="two stages are named 'recorder'"):
        StageRunner([Recorder(), Recorder()])


def test_stages_run_in_a_real_detection_and_report_in_the_summary_and_meta(make_clip, tmp_path):
    a = make_clip(frames=12).path
    b = make_clip(frames=7).path
    rec = Recorder()
    run = vidpipe.detect([str(a), str(b)], device="cpu", batch_size=5, stages=[rec])
    got = [(r.meta.stream_id, r.meta.index, r.names) for r in run]
    assert len(got) == 19 and all(n == ("tagged",) for *_, n in got)
    for sid, n in ((0, 12), (1, 7)):
        assert [i for s, i in rec.seen if s == sid] == list(range(n))
    assert rec.closed == 1
    summary = run.summary()
    assert summary.stages == {"recorder": {"frames": 19}}
    d = summary.to_dict()
    assert d["recorder"] == {"frames": 19} and d["stages"] == {"recorder": {"frames": 19}}
    json.dumps(d)


def test_each_stage_is_timed_under_its_name_in_the_run_stats(make_clip):
    import time as _time

    class Slow:
        name = "slow"
        needs_frames = False

        def process(self, results):
            _time.sleep(0.002 * len(results))
            return results

        def reset(self, stream_id):
            pass

        def report(self):
            return {}

        def close(self):
            pass

    clip = make_clip(frames=8).path
    run = vidpipe.detect(str(clip), device="cpu", decoder="pyav", batch_size=4, stages=[Slow()])
    n = sum(1 for _ in run)
    ms = run.get_stats()["stages_ms_per_frame"]
    assert n > 0
    assert ms["slow"] >= 2.0  # the stage's own time, per frame
    assert ms["stages"] >= ms["slow"]


def test_a_stage_may_not_take_a_pipeline_step_name():
    class Named:
        name = "decode"
        needs_frames = False

        def process(self, results):
            return results

        def reset(self, stream_id):
            pass

        def report(self):
            return {}

        def close(self):
            pass

    with pytest.raises(ConfigError, match="'decode' names a step of the pipeline"):
        StageRunner([Named()])


def test_the_text_summary_lists_each_stage_in_ms_per_frame(make_clip):
    clip = make_clip(frames=6).path
    run = vidpipe.detect(str(clip), device="cpu", batch_size=3, stages=[Recorder()])
    list(run)
    text = run.summary().format_text()
    line = next(li for li in text.splitlines() if li.startswith("ms per frame: "))
    assert "decode" in line and "model" in line and "recorder" in line


def test_a_stage_with_process_batch_gets_every_stream_of_a_batch_in_one_call(make_clip):
    calls = []

    class Batched(Recorder):
        name = "batched"

        def process_batch(self, groups):
            calls.append([[(r.meta.stream_id, r.meta.index) for r in g] for g in groups])
            return [self.process(g) for g in groups]

    a, b = make_clip(frames=6).path, make_clip(frames=6).path
    run = vidpipe.detect([str(a), str(b)], device="cpu", batch_size=12, stages=[Batched()])
    got = [(r.meta.stream_id, r.meta.index) for r in run]
    assert sorted(got) == [(s, i) for s in (0, 1) for i in range(6)]
    assert sum(len(g) for c in calls for g in c) == 12
    for c in calls:  # one call per batch, each group one stream's frames in order
        assert len({g[0][0] for g in c}) == len(c)
        assert all([i for _, i in g] == sorted(i for _, i in g) for g in c)
    assert any(len(c) == 2 for c in calls)  # both streams in one call at least once


class Elsewhere(Recorder):
    """A real stage that works on a thread of its own (``submit``): each batch takes ``delay`` s;
    records when each batch was handed over and when its result was taken."""

    name = "elsewhere"

    def __init__(self, delay: float = 0.0) -> None:
        super().__init__()
        from concurrent.futures import ThreadPoolExecutor

        self.delay = delay
        self.pool = ThreadPoolExecutor(1)
        self.events: list[tuple[str, int]] = []  # ("submit" | "result", first frame index)

    def warm_up(self):
        self.events.append(("warm", -1))

    def submit(self, groups):
        import time

        first = groups[0][0].meta.index
        self.events.append(("submit", first))

        def work():
            time.sleep(self.delay)
            return [self.process(g) for g in groups]

        future = self.pool.submit(work)
        outer = self

        class Pending:
            def result(self):
                outer.events.append(("result", first))
                return future.result()

        return Pending()

    def close(self):
        super().close()
        self.pool.shutdown()


def test_a_stage_that_works_elsewhere_overlaps_the_next_batch_and_keeps_order(make_clip):
    """The run hands the stage batches N+1 and N+2 before it takes batch N's result; every frame
    comes out once, in order, through the later stages too; the stage's time shows under its name."""
    clip = make_clip(frames=20).path
    slow, after = Elsewhere(delay=0.05), Recorder()
    run = vidpipe.detect(str(clip), device="cpu", batch_size=4, stages=[slow, after])
    got = [(r.meta.index, r.names) for r in run]
    assert got == [(i, ("tagged",)) for i in range(20)]
    assert after.seen == [(0, i) for i in range(20)]
    assert slow.events[0] == ("warm", -1) and slow.events.count(("warm", -1)) == 1  # before any batch
    submits = [i for kind, i in slow.events if kind == "submit"]
    assert submits == [0, 4, 8, 12, 16]
    # batches N+1 and N+2 were handed over before batch N's result was taken (a file:
    # pipeline.STAGED_BATCHES), at least once, and never more than three were out at once
    order = slow.events
    assert any(order.index(("submit", n + 8)) < order.index(("result", n)) for n in (0, 4, 8))
    out = [sum(1 if k == "submit" else -1 for k, _ in order[: j + 1] if k != "warm") for j in range(len(order))]
    assert max(out) == 3
    assert "elsewhere" in run.get_stats()["stages_ms_per_frame"] and slow.closed == 1


class DoneAtOnce(Elsewhere):
    """A stage with ``submit`` that did the work already (``done``: the tracker with its trackers
    inline)."""

    name = "done-at-once"

    def submit(self, groups):
        first = groups[0][0].meta.index
        self.events.append(("submit", first))
        out = [self.process(g) for g in groups]
        outer = self

        class Done:
            done = True

            def result(self):
                outer.events.append(("result", first))
                return out

        return Done()


def test_a_stage_done_in_submit_is_not_held_back(make_clip):
    """Holding a batch back only adds latency when the stage did the work in submit: the run
    takes each batch's result before it hands over the next one; frames in order, once."""
    clip = make_clip(frames=20).path
    stage, after = DoneAtOnce(), Recorder()
    run = vidpipe.detect(str(clip), device="cpu", batch_size=4, stages=[stage, after])
    assert [r.meta.index for r in run] == list(range(20))
    assert after.seen == [(0, i) for i in range(20)]
    order = [e for e in stage.events if e[0] != "warm"]
    assert order == [(k, i) for i in (0, 4, 8, 12, 16) for k in ("submit", "result")]


def test_the_inline_tracker_is_not_held_back_and_the_helper_is(make_clip):
    """TrackerStage: inline trackers track in submit (done), a helper process's batch is not done."""
    from vidpipe.track import TrackerStage

    clip = make_clip(frames=8).path
    for worker, done in (("inline", True), ("process", False)):
        stage = TrackerStage(worker=worker)
        results = list(vidpipe.detect(str(clip), device="cpu", batch_size=4))
        pending = stage.submit([results[:4]])
        assert getattr(pending, "done", False) is done
        assert [len(g) for g in pending.result()] == [4]
        stage.close()


def test_with_a_live_stream_only_one_batch_waits_in_the_stage(make_clip):
    """Each batch left in a stage working elsewhere is a batch of latency: with a live stream (a
    file played in real time) the run takes batch N's result before it hands over N+2."""
    from vidpipe.sources.options import LiveOptions

    clip = make_clip(frames=30, fps=30).path
    slow = Elsewhere(delay=0.02)
    run = vidpipe.detect(str(clip), device="cpu", batch_size=2, stages=[slow], live=LiveOptions(realtime=True))
    got = [r.meta.index for r in run]
    order = [e for e in slow.events if e[0] != "warm"]
    submits = [i for kind, i in order if kind == "submit"]
    assert len(submits) >= 4 and got == sorted(got)
    for n, later in zip(submits, submits[2:]):
        if ("result", n) in order:
            assert order.index(("result", n)) < order.index(("submit", later)), order
    out = [sum(1 if k == "submit" else -1 for k, _ in order[: j + 1]) for j in range(len(order))]
    assert max(out) == 2, order


def test_a_stage_that_works_elsewhere_is_done_when_stop_is_called(make_clip):
    """stop() delivers the batches already detected, the one still in the stage included."""
    clip = make_clip(frames=40).path
    slow = Elsewhere(delay=0.02)
    run = vidpipe.detect(str(clip), device="cpu", batch_size=4, stages=[slow])
    got = []
    for r in run:
        got.append(r.meta.index)
        if r.meta.index == 5:
            run.stop()
    assert got == list(range(len(got))) and 8 <= len(got) < 40
    assert [i for kind, i in slow.events if kind == "result"][-1] == got[-1] - 3


def test_a_reconnect_resets_each_stage_after_the_batches_still_in_the_stages():
    """Batch 1 (connection 0) is still in a stage that works elsewhere when batch 2 (connection 1,
    a live reconnect) is submitted: the stage after it must see batch 1's frames, then the reset,
    then batch 2's; and a reset asked for meanwhile (a stream removed) waits the same way."""
    log = []

    class Logged(Recorder):
        def process(self, results):
            log.append(("frames", tuple((r.meta.index, r.meta.connection) for r in results)))
            return super().process(results)

        def reset(self, stream_id):
            log.append(("reset", stream_id))
            super().reset(stream_id)

    slow, after = Elsewhere(delay=0.05), Logged()
    runner = StageRunner([slow, after])
    first = runner.submit([_result(0, 0), _result(0, 1)])
    second = runner.submit([_result(0, 2, connection=1), _result(0, 3, connection=1)])
    runner.reset(7)  # asked while both batches are in the stages
    assert log == [] and runner.working(first) and runner.working(second)
    runner.complete(first)
    runner.complete(second)
    assert log == [("frames", ((0, 0), (1, 0))), ("reset", 0), ("frames", ((2, 1), (3, 1))), ("reset", 7)]
    assert slow.resets == [0, 7] and slow.seen == [(0, 0), (0, 1), (0, 2), (0, 3)]
    runner.reset(8)  # nothing in the stages: at once
    assert log[-1] == ("reset", 8)
    slow.close()
