"""A run of video files on a GPU starts their workers during its warm-up, once the model's CUDA
graph is captured (``DetectionRun``): the decoder's NVDEC sessions start and decode ahead beside
the rest of the warm-up. The capture itself comes first and alone.

The run's clock starts with the decode, so its seconds and rate count the rest of the warm-up.
A run whose decode overlapped its warm-up gives the detections of a run that started its worker
after it (``max_gpu_memory`` keeps that order), with no capture falling back to eager; a warm-up
that fails stops the workers started during it."""

from __future__ import annotations

import logging
import threading
import time

import pytest
import torch

import vidpipe

pytestmark = [pytest.mark.gpu, pytest.mark.nvdec]


@pytest.fixture(autouse=True)
def _needs_pynvvideocodec():
    pytest.importorskip("PyNvVideoCodec")
    yield
    from vidpipe.decode.nvdec_pool import clear

    clear()  # pooled sessions would make ``auto`` pick NVDEC for the bundled clip in later tests


def _results(run):
    return [
        (r.meta.index, r.detections.boxes.cpu(), r.detections.scores.cpu(), r.detections.class_ids.cpu()) for r in run
    ]


def test_a_file_decoded_beside_the_warm_up_gives_the_same_detections(bikes_path, monkeypatch, caplog):
    from vidpipe.decode.nvdec import NvdecDecoder
    from vidpipe.pipeline_infer import Inference

    marks: dict[str, list[float]] = {"warm_end": [], "first_batch": [], "captured": []}
    warm_up, batches, accelerated = Inference.warm_up, NvdecDecoder.batches, Inference._accelerated

    def capture(self):
        runner = accelerated(self)
        marks["captured"].append(time.perf_counter())
        return runner

    def slow_warm_up(self, **kwargs):
        warm_up(self, **kwargs)
        time.sleep(1.0)  # a fresh process's warm-up is this long: the decode must have begun by its end
        marks["warm_end"].append(time.perf_counter())

    def first_batch(self, batch_size):
        for i, b in enumerate(batches(self, batch_size)):
            if i == 0:
                marks["first_batch"].append(time.perf_counter())
            yield b

    monkeypatch.setattr(Inference, "_accelerated", capture)
    monkeypatch.setattr(Inference, "warm_up", slow_warm_up)
    monkeypatch.setattr(NvdecDecoder, "batches", first_batch)
    caplog.set_level(logging.WARNING, logger="vidpipe")
    with vidpipe.detect(str(bikes_path), device="cuda", decoder="nvdec") as run:  # real footage: people, bicycles
        early = _results(run)
    # the run's clock (its seconds and rate) starts with the decode, inside the warm-up
    assert marks["captured"][0] <= run.started_at < marks["first_batch"][0] < marks["warm_end"][0]
    assert run.seconds > marks["warm_end"][0] - run.started_at  # the warm-up's last second is in it
    with vidpipe.detect(str(bikes_path), device="cuda", decoder="nvdec", max_gpu_memory="32GiB") as run:
        late = _results(run)
    assert marks["captured"][0] < marks["first_batch"][0] < marks["warm_end"][0], "not decoded during the warm-up"
    assert marks["first_batch"][1] > marks["warm_end"][1], "with max_gpu_memory the worker starts after it"
    assert not [r for r in caplog.records if "running eagerly" in r.getMessage()]
    assert [i for i, *_ in early] == list(range(250)) and sum(len(b) for _, b, *_ in early) > 100
    assert len(early) == len(late)
    for (i, b1, s1, c1), (j, b2, s2, c2) in zip(early, late):
        assert i == j and torch.equal(c1, c2), f"frame {i}"
        torch.testing.assert_close(b1, b2)
        torch.testing.assert_close(s1, s2)


def test_a_failed_warm_up_stops_the_workers_started_before_it(make_clip, monkeypatch):
    from vidpipe.pipeline_infer import Inference

    clip = make_clip(".mp4", frames=300, gop=30, width=1920, height=1080)

    def broken(self, *, captured=None, **kwargs):
        assert captured is not None, "a run of one file on a GPU starts its worker during the warm-up"
        captured()
        time.sleep(0.5)  # the worker is decoding by now
        raise RuntimeError("warm-up failed")

    monkeypatch.setattr(Inference, "warm_up", broken)
    run = vidpipe.detect(str(clip.path), device="cuda", decoder="nvdec")
    with pytest.raises(RuntimeError, match="warm-up failed"):
        next(iter(run))
    assert not [t for t in threading.enumerate() if t.name.startswith("vidpipe-src")], "a worker outlived its run"
    assert run.summary().sources[0].status in ("partial", "failed", "skipped")


def test_the_files_scan_runs_during_the_capture_and_its_decoder_plans_from_it(make_clip, monkeypatch, caplog):
    """The worker starts before the capture: the file's packet scan (host work) runs beside it,
    the decode (CUDA work) after it, from that scan; the run's clock starts at the capture's end."""
    import av

    from vidpipe.decode import parallel, segments
    from vidpipe.pipeline_infer import Inference

    clip = make_clip(".mp4", frames=300, gop=30, width=1920, height=1080)
    scans: list[tuple[str, float, float]] = []
    captured: list[float] = []
    scan_stream, accelerated = segments.scan_stream, Inference._accelerated

    def timed_scan(source):
        t0 = time.perf_counter()
        try:
            return scan_stream(source)
        finally:
            scans.append((threading.current_thread().name, t0, time.perf_counter()))

    def capture(self):
        runner = accelerated(self)
        time.sleep(0.5)  # a longer capture: the scan ends inside it
        captured.append(time.perf_counter())
        return runner

    monkeypatch.setattr(segments, "scan_stream", timed_scan)
    monkeypatch.setattr(parallel, "scan_stream", timed_scan)
    monkeypatch.setattr(Inference, "_accelerated", capture)
    caplog.set_level(logging.WARNING, logger="vidpipe")
    with vidpipe.detect(str(clip.path), device="cuda", decoder="nvdec") as run:
        frames = [r.meta.index for r in run]
    with av.open(str(clip.path)) as c:
        expected = sum(1 for _ in c.decode(video=0))
    assert frames == list(range(expected))
    assert len(scans) == 1, "the decoder scanned the file again"
    thread, _, scanned = scans[0]
    assert thread == "vidpipe-src0" and scanned < captured[0] <= run.started_at
    assert not [r for r in caplog.records if "running eagerly" in r.getMessage()]
