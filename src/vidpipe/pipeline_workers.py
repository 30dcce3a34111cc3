"""The worker thread of one source of a :class:`~vidpipe.pipeline.DetectionRun`.

It waits for one of the run's ``max_open_sources`` slots (finite sources only: files and image
folders; a live source starts at once and never holds a slot), where the run started it before
its CUDA graph's capture runs the source's host work (``prepare``) and waits for the capture's
end (``SourceContext.gpu_free``), then runs the source's ``produce`` and
puts each chunk on the source's own queue, then records how the source ended in its
:class:`~vidpipe.pipeline_config.SourceState`: ``ok`` (read to its end), ``partial`` (an error
after some frames) or ``failed`` (an error before any). A removed source keeps ``removed``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from vidpipe.errors import VidpipeError
from vidpipe.pipeline_config import SOURCE_ERROR_LOG
from vidpipe.sources.base import SourceContext

if TYPE_CHECKING:
    from vidpipe.batching.queues import SourceQueue
    from vidpipe.models.detector import Detector
    from vidpipe.pipeline_config import PipelineConfig, SourceState
    from vidpipe.sources.base import Source
    from vidpipe.stats import PipelineStats

logger = logging.getLogger("vidpipe.pipeline")

__all__ = ["SourceWorker"]

_POLL_S = 0.1


class SourceWorker:
    """One source, its queue and its thread (started by :meth:`start`)."""

    def __init__(
        self,
        source: "Source",
        state: "SourceState",
        queue: "SourceQueue",
        *,
        detector: "Detector",
        config: "PipelineConfig",
        stats: "PipelineStats",
        slots: threading.Semaphore,
        on_start: "Callable[[SourceState], None] | None" = None,
        gpu_submit: "threading.Lock | None" = None,
        inputs: int = 1,
        files_at_once: int = 1,
        warm: threading.Event | None = None,
        gpu_free: threading.Event | None = None,
    ) -> None:
        self.source = source
        self.state = state
        self.queue = queue
        self.live = bool(source.live)
        self.stop = threading.Event()  # this source's stop: the run's stop, close, or removal
        self._slots = slots
        self._on_start = on_start
        self._ctx = SourceContext(detector=detector, config=config, stop=self.stop, stats=stats, gpu_submit=gpu_submit,
                                  inputs=inputs, files_at_once=files_at_once, warm=warm,
                                  gpu_free=gpu_free)  # fmt: skip
        self.thread = threading.Thread(target=self._run, name=f"vidpipe-src{state.stream_id}", daemon=True)

    def start(self) -> None:
        """Start the thread (once: a later call does nothing)."""
        if self.thread.ident is None:
            self.thread.start()

    def _acquire_slot(self) -> bool:
        """Wait for a slot (finite sources); ``False`` when stopped first."""
        if self.live:
            return True
        while not self.stop.is_set():
            if self._slots.acquire(timeout=_POLL_S):
                return True
        return False

    def _run(self) -> None:
        state = self.state
        try:
            if not self._acquire_slot():
                return  # stopped before it started: "pending" becomes "skipped" at close
            try:
                self._produce()
            finally:
                if not self.live:
                    self._slots.release()
        finally:
            self.queue.finish()
            state.finished = True

    def _ready_for_gpu(self) -> bool:
        """Before the run's CUDA graph is captured (``gpu_free`` not set): the source's host
        work (its ``prepare``, if it has one) meanwhile, then wait. ``False``: stopped first."""
        free = self._ctx.gpu_free
        if free is None or free.is_set():
            return True
        prepare = getattr(self.source, "prepare", None)
        if prepare is not None:
            try:
                prepare(self.state, self._ctx)
            except Exception:  # noqa: BLE001 - produce opens the input itself and reports what fails
                logger.debug("%s: preparing failed", self.state.spec.name, exc_info=True)
        while not free.wait(_POLL_S):
            if self.stop.is_set():
                return False
        return True

    def _produce(self) -> None:
        state = self.state
        if not self._ready_for_gpu() or self.stop.is_set():
            return
        if state.status == "pending":
            state.status = "running"
        if self._on_start is not None:
            self._on_start(state)
        name = state.spec.name
        try:
            deliver = getattr(self.source, "deliver", None)
            if deliver is not None:  # the source puts its chunks on the queue from threads of its own
                deliver(state, self._ctx, self.queue)
            else:
                for inp, ready in self.source.produce(state, self._ctx):
                    if not self.queue.put(inp, ready, stop=self.stop):
                        state.stopped = True
                        break
        except VidpipeError as exc:
            self._failed(str(exc))
            logger.error("%s", exc, exc_info=logger.isEnabledFor(logging.DEBUG), extra=SOURCE_ERROR_LOG)
        except Exception as exc:  # noqa: BLE001 - one broken source must not stop the others
            self._failed(f"{name}: unexpected {type(exc).__name__}: {exc}")
            logger.error("source %s failed", name, exc_info=True, extra=SOURCE_ERROR_LOG)
        else:
            if state.status == "running":
                state.status = "ok"

    def _failed(self, error: str) -> None:
        state = self.state
        if state.status == "removed":
            return
        state.status = "partial" if state.produced else "failed"
        state.error = error
