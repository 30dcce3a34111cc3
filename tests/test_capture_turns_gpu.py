"""NVDEC driver calls of a side thread and a CUDA graph's capture take turns
(:mod:`vidpipe._capture_turns`). Without them, a ``GetDecoderCaps`` made while the model's graph
was captured failed (error 900) and invalidated the capture, which fell back to eager (measured
on an H200): ``vidpipe.detect`` queries the capabilities in a thread beside the model's load
(:mod:`vidpipe.prewarm`), which meets the capture when the model was loaded before the call."""

from __future__ import annotations

import threading
import time

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.nvdec]


@pytest.fixture
def detector():
    pytest.importorskip("PyNvVideoCodec")
    from vidpipe.api import build_detector

    return build_detector("yolov3-tiny", device="cuda")


#: the side thread's pause between two driver calls. Back to back (no pause), its calls held the
#: driver so much that the model's warm-up forwards beside them crawled (one capture took 62 s on
#: an H200); with the pause the driver is still busy with them most of the time (a query takes
#: about 0.2 s, a session start 50 ms), so without the turns a capture meets one
PAUSE_S = 0.02


def _uncached_queries(stop: threading.Event, done: list, errors: list) -> None:
    """Ask the driver for the H.264 capabilities again and again (the process's cache emptied
    before each), as a prewarm thread asks them once."""
    from vidpipe.decode import nvdec_caps

    while not stop.wait(PAUSE_S):
        with nvdec_caps._caps_lock:
            nvdec_caps._caps_cache.clear()
        try:
            caps = nvdec_caps.query_caps(0, "h264", "420", 8)
        except Exception as exc:  # noqa: BLE001 - the test reports it
            errors.append(exc)
            return
        done.append(caps.supported)


def _sessions_started(info, stop: threading.Event, done: list, errors: list) -> None:
    from vidpipe.decode.nvdec_early import pool_sessions

    while not stop.wait(PAUSE_S):
        try:
            done.append(pool_sessions(info, 0, 1))
        except Exception as exc:  # noqa: BLE001 - the test reports it
            errors.append(exc)
            return


@pytest.mark.parametrize("side", ["capability queries", "session starts"])
def test_side_threads_nvdec_calls_never_break_the_models_capture(detector, bikes_path, side, caplog):
    from vidpipe.decode.nvdec_pool import clear
    from vidpipe.decode.probe import probe
    from vidpipe.models.backends.accel import AcceleratedModel, accelerate

    stop, done, errors = threading.Event(), [], []
    if side == "capability queries":
        target, args = _uncached_queries, (stop, done, errors)
    else:
        target, args = _sessions_started, (probe(bikes_path), stop, done, errors)
    worker = threading.Thread(target=target, args=args, daemon=True)
    worker.start()
    try:
        deadline = time.monotonic() + 30
        while not done and not errors and time.monotonic() < deadline:
            time.sleep(0.01)  # the side thread calls the driver by now
        captured = [accelerate(detector.model, "cudagraph", batch_size=8) for _ in range(4)]
    finally:
        stop.set()
        worker.join(timeout=30)
        clear()  # the sessions pooled here
    assert not errors, errors
    assert all(isinstance(m, AcceleratedModel) and m.mode == "cudagraph" for m in captured), "a capture fell back"
    assert not [r for r in caplog.records if "running eagerly" in r.getMessage()]
    assert len(done) >= 2 and all(done)  # the side thread went on between and after the captures
