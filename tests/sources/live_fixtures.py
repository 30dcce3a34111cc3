"""Fixtures for the live source tests (imported by tests/sources/test_live_*.py; not a conftest,
whose module name would shadow tests/conftest.py for ``from conftest import ...``): a real detector at low resolution, and a driver that runs
:meth:`LiveSource.produce` in a thread the way the pipeline's source worker does."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import pytest


@pytest.fixture(scope="session")
def small_detector():
    """The bundled YOLOv3-tiny on the CPU at 128x128 (real model, cheap preprocessing)."""
    from vidpipe.api import build_detector

    return build_detector("yolov3-tiny", device="cpu", imgsz=128)


@dataclass
class LiveRun:
    """A :class:`~vidpipe.sources.live.LiveSource` producing in a background thread.

    ``frames``: the FrameMeta of every chunk with the monotonic time it was yielded; ``error``:
    what ``produce`` raised; ``returned_at``: ``time.monotonic()`` when it returned."""

    source: object
    state: object
    stop: threading.Event
    frames: list = field(default_factory=list)
    shapes: list = field(default_factory=list)
    inputs: list = field(default_factory=list)  # the first few ModelInputs (keep_inputs=)
    error: BaseException | None = None
    returned_at: float | None = None
    thread: threading.Thread | None = None

    def wait_frames(self, n: int, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if len(self.frames) >= n or self.returned_at is not None:
                return len(self.frames) >= n
            time.sleep(0.02)
        return False

    def wait_for(self, check, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if check():
                return True
            time.sleep(0.02)
        return bool(check())

    def close(self, timeout: float = 5.0) -> float:
        """Set the stop flag; returns seconds until ``produce`` returned."""
        t0 = time.monotonic()
        self.stop.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "produce did not return after stop"
        return (self.returned_at or time.monotonic()) - t0


@pytest.fixture
def run_live(small_detector):
    """``run_live(location_or_spec, options=LiveOptions(...), detector=None, keep_inputs=0,
    consume_s=0.0 (seconds the consumer spends per chunk), **PipelineConfig_kwargs) -> LiveRun``, started; every run is stopped at teardown."""
    from vidpipe.pipeline_config import PipelineConfig, SourceState
    from vidpipe.sources.base import SourceContext
    from vidpipe.sources.live import LiveSource
    from vidpipe.sources.options import LiveOptions
    from vidpipe.sources.spec import SourceSpec
    from vidpipe.stats import PipelineStats

    runs: list[LiveRun] = []

    def start(location, options=None, *, detector=None, keep_inputs: int = 0, consume_s: float = 0.0,
              **config) -> LiveRun:
        options = options or LiveOptions()
        spec = location if isinstance(location, SourceSpec) else SourceSpec("live", str(location))
        source = LiveSource(spec, options)
        state = SourceState(spec, len(runs))
        stop = threading.Event()
        det = detector if detector is not None else small_detector
        ctx = SourceContext(det, PipelineConfig(live=options, **config), stop, PipelineStats())
        run = LiveRun(source, state, stop)

        def body() -> None:
            try:
                for inp, ready in source.produce(state, ctx):
                    assert (ready is None) == (det.device.type == "cpu")
                    run.shapes.append(tuple(inp.tensor.shape))
                    run.inputs.append(inp) if len(run.inputs) < keep_inputs else None
                    run.frames.append((inp.frames[0], time.monotonic()))
                    if consume_s:
                        time.sleep(consume_s)  # a slow consumer
            except BaseException as exc:  # noqa: BLE001 - recorded for the test
                run.error = exc
            finally:
                run.returned_at = time.monotonic()

        run.thread = threading.Thread(target=body, daemon=True)
        runs.append(run)
        run.thread.start()
        return run

    yield start
    for run in runs:
        run.stop.set()
    for run in runs:
        run.thread.join(5)
