"""Stage wiring: sources -> per-source bounded queues -> batcher -> batched inference -> results.

Threads:

- one *worker* per source (:mod:`vidpipe.pipeline_workers`) runs its
  :class:`~vidpipe.sources.base.Source` (a file, an image folder, a live stream: made by
  :func:`~vidpipe.sources.factory.make_source`), which decodes and preprocesses frames into
  :class:`~vidpipe.types.ModelInput` chunks on its own CUDA stream when the device is a GPU, and
  puts them on the source's own bounded queue (:mod:`vidpipe.batching.queues`: a file waits when
  it is full, every frame is kept; a live stream drops its oldest chunk, latest wins, counted).
  At most ``max_open_sources`` finite sources run at once; live sources start at once. On a
  GPU the workers start once the model is warm, except in a run of video files: those start as
  soon as its CUDA graph is captured, and open and decode beside the rest of the warm-up
  (:meth:`DetectionRun._decodes_beside_warm_up`);
- the *consumer* (the thread iterating :class:`DetectionRun`) takes batches from the batcher
  (:mod:`vidpipe.batching.batcher`: full, or a deadline, round-robin across sources), runs the
  detector with one batch in flight and yields one :class:`~vidpipe.types.FrameResult` per frame.
  Per source, results come out in frame order.

A failing source is recorded (status ``failed`` or ``partial``) and never stops the others.
Sources can be added and removed while the run goes on. :meth:`DetectionRun.stop` ends the run
keeping the batch being detected; :meth:`DetectionRun.close` (any thread, a ``with`` block, or
Ctrl-C) ends it at once, stops the workers and joins them.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
import os
import threading
import time
from collections.abc import Generator, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from vidpipe.batching.batcher import END, Batcher
from vidpipe.errors import ConfigError, SourceError, VidpipeError
from vidpipe.latency import Meters
from vidpipe.pipeline_config import SOURCE_ERROR_LOG, PipelineConfig, SourceState
from vidpipe.pipeline_infer import Inference
from vidpipe.pipeline_workers import SourceWorker
from vidpipe.sources.live_hub import LiveProcesses
from vidpipe.stats import PipelineStats
from vidpipe.types import FrameResult

if TYPE_CHECKING:
    import torch

    from vidpipe.models.detector import Detector
    from vidpipe.pipeline_infer import _InFlight
    from vidpipe.sources.base import Source
    from vidpipe.sources.spec import SourceSpec
    from vidpipe.stages.base import Stage
    from vidpipe.stages.runner import Ticket
    from vidpipe.summary import RunSummary

logger = logging.getLogger(__name__)

__all__ = ["DetectionRun", "PipelineConfig", "SourceState", "SOURCE_ERROR_LOG"]

#: how long close() waits for all workers together before it warns and leaves them (seconds)
JOIN_TIMEOUT_S = 10.0
#: batches left working in a stage elsewhere (the tracker's helper process) while the next are
#: detected: batch N is delivered once batch N + STAGED_BATCHES is post-processed. Two give the
#: helper a batch's time of slack (an H200, real 1080p street footage with decoder processes:
#: its reply was late for 6% of batches instead of 41%); a run with a live stream, or kept alive
#: for a server, keeps one (each is a batch of latency)
STAGED_BATCHES = 2


class DetectionRun:
    """An iterable of :class:`FrameResult` over several inputs, with a summary at the end.

    Create it with :func:`vidpipe.detect`. Iterate it once, frame by frame or with
    :meth:`batches`; results of one source are in frame order, sources interleave. ``states``
    tracks each source (index = stream id); :meth:`stop` ends the run early keeping the batch
    being detected, :meth:`close` ends it at once. The per-source counts are the results handed
    to the caller.

    Args:
        specs: the inputs: :class:`~vidpipe.sources.spec.SourceSpec` objects, or any object
            satisfying the :class:`~vidpipe.sources.base.Source` protocol.
        failed: inputs rejected before the run (missing path, empty folder, ...): (input, reason).
        keep_alive: iteration does not end when every source is done (a server adding sources
            later): it ends on :meth:`stop` or :meth:`close`.
        stages: steps after detection (:class:`~vidpipe.stages.Stage`: a tracker, line and zone
            counting, ...), run in this order on each stream's results before they are yielded.
            When one has ``needs_frames``, the run keeps the decoded frames
            (``config.keep_frames``, see :class:`PipelineConfig`): ``FrameResult.image``.
        called_mono: ``time.monotonic()`` when the caller asked for the run (``vidpipe.detect``
            passes its start, so ``first_result_s`` counts loading the model); default: now.
    """

    def __init__(
        self,
        specs: "Sequence[SourceSpec | Source]",
        detector: "Detector",
        config: PipelineConfig,
        *,
        failed: "Sequence[tuple[str, str]]" = (),
        keep_alive: bool = False,
        stages: "Sequence[Stage]" = (),
        called_mono: float | None = None,
    ) -> None:
        from vidpipe.pipeline_memory import RunMemory
        from vidpipe.stages.runner import StageRunner

        self.stages = StageRunner(stages, timer=self._time_stage)
        if self.stages.needs_frames and not config.keep_frames:
            # a stage reads FrameResult.image: the sources keep the frames they decode
            config = dataclasses.replace(config, keep_frames=True)
        try:
            self.memory = RunMemory(detector, config, specs)  # max_gpu_memory: may lower the batch
        except BaseException:
            self.stages.close()
            raise
        config = self.memory.adjust(config)
        self.detector = detector
        self.config = config
        self.device: "torch.device" = detector.device
        if config.decoder_processes and self.device.type != "cuda":
            logger.warning("decoder_processes=%d: decoder processes run NVDEC sessions on a GPU; this run decodes on "
                           "the %s with PyAV in threads (the option is ignored)", config.decoder_processes,
                           self.device.type.upper())  # fmt: skip
        self.keep_alive = bool(keep_alive)
        self.failed_inputs = tuple(failed)
        self.states: list[SourceState] = []
        self._workers: dict[int, SourceWorker] = {}
        self._kinds: dict[int, str] = {}
        self._lock = threading.RLock()  # states and workers; the delivery gate of close()
        self._stop = threading.Event()
        self._slots = threading.Semaphore(config.max_open_sources)
        self._gpu_submit = threading.Lock()  # see SourceContext.gpu_submit
        self._warm = threading.Event()  # the GPU warm-up is over: see SourceContext.warm
        self._gpu_free = threading.Event()  # the CUDA graph is captured: see SourceContext.gpu_free
        self._batcher = Batcher(config.batch_size, batch_timeout=config.live.batch_timeout, keep_alive=self.keep_alive)
        self.meters = Meters()
        self._started = False  # iteration began
        self._stages_warmup_s = 0.0
        self._running = False  # workers are started as they are added
        self._closing = False
        self._closed = False  # nothing more is delivered
        self._finalized = threading.Event()
        self.created_mono = time.monotonic()
        # when the caller asked for the run (vidpipe.detect's start: loading the model counts)
        self.called_mono = called_mono if called_mono is not None else self.created_mono
        self.first_result_mono: float | None = None
        self.started_at: float | None = None
        self.finished_at: float | None = None
        self.stats = PipelineStats(self.device)
        self.batch_size = config.batch_size
        self.infer = Inference(detector, config, self.stats)
        self._live = LiveProcesses(config=config, detector=detector, specs=specs)  # started when needed
        self._inputs_given = len(specs)
        self._latency_counts = self.keep_alive  # a live stream or a server: one batch staged (STAGED_BATCHES)
        self._files_given = sum(1 for s in specs if getattr(getattr(s, "spec", s), "kind", None) == "file")
        for spec in specs:
            self._add(spec)

    # ------------------------------------------------------------------ sources
    def _add(self, item: "SourceSpec | Source") -> SourceState:
        from vidpipe.sources.factory import is_live_spec, make_source
        from vidpipe.sources.spec import SourceSpec

        with self._lock:
            if self._closing:
                raise RuntimeError("the run has ended; no source can be added")
            source = None if isinstance(item, SourceSpec) else item
            spec = item if source is None else source.spec
            state = SourceState(spec=spec, stream_id=len(self.states))
            self.states.append(state)
            try:
                source = source if source is not None else make_source(spec, self.config)
            except Exception as exc:  # noqa: BLE001 - one input that cannot be read must not stop the others
                known = isinstance(exc, VidpipeError)
                error = str(exc) if known else f"{spec.name}: unexpected {type(exc).__name__}: {exc}"
                self._kinds[state.stream_id] = "live" if is_live_spec(spec, self.config) else spec.kind
                state.status, state.error, state.finished = "failed", error, True
                logger.error("%s", error, exc_info=not known, extra=SOURCE_ERROR_LOG)
                return state
            live = bool(source.live)
            if live:
                source = self._live.wrap(source, live_inputs=self._live_count() + 1)
                self._latency_counts = True  # (read by the run's thread without the lock)
            self._kinds[state.stream_id] = "live" if live else spec.kind
            capacity = self.config.live.queue_frames if live else self.config.queue_depth
            queue = self._batcher.add_queue(state, live=live, capacity=capacity)
            worker = SourceWorker(
                source, state, queue, detector=self.detector, config=self.config, stats=self.stats,
                slots=self._slots, on_start=lambda st: self.meters.meter(st.stream_id).start(),
                gpu_submit=self._gpu_submit, inputs=max(self._inputs_given, len(self.states)),
                files_at_once=self._files_at_once(), warm=self._warm, gpu_free=self._gpu_free,
            )
            self._workers[state.stream_id] = worker
            if self._stop.is_set():
                worker.stop.set()
            if self._running:
                worker.start()
        return state

    def _files_at_once(self) -> int:
        """Video files this run decodes at the same time: its files given or added so far, at
        most ``max_open_sources`` (they share the decoder processes)."""
        files = sum(1 for k in self._kinds.values() if k == "file")
        return max(1, min(self.config.max_open_sources, max(files, self._files_given)))

    def _live_count(self) -> int:
        return sum(1 for k in self._kinds.values() if k == "live")

    def add_source(self, location: "str | os.PathLike | SourceSpec | Source") -> int:
        """Add one input (a path, URL, :class:`SourceSpec` or :class:`Source`); returns its stream
        id. It starts now when the run is running (else when iteration starts). Thread-safe."""
        from vidpipe.sources.spec import SourceSpec, classify_inputs

        item: Any = location
        if isinstance(location, (str, os.PathLike)):
            specs = classify_inputs([location])
            if len(specs) != 1:
                raise SourceError(
                    f"{specs[0].name if specs else location}: add_source takes one input, this one holds "
                    f"{len(specs)} ({', '.join(s.name for s in specs[:3])}{', ...' if len(specs) > 3 else ''}); "
                    "add them one by one"
                )
            item = specs[0]
        elif not isinstance(location, SourceSpec) and not hasattr(location, "produce"):
            raise ConfigError(f"add_source takes a path, URL, SourceSpec or Source, got {type(location).__name__}")
        return self._add(item).stream_id

    def remove_source(self, stream_id: int) -> None:
        """Stop one input now (its queued frames are discarded, its status becomes
        ``"removed"``); the other inputs are not disturbed. Thread-safe."""
        with self._lock:
            if not isinstance(stream_id, int) or not 0 <= stream_id < len(self.states):
                raise ConfigError(f"remove_source: no stream {stream_id!r}; stream ids are 0 to {len(self.states) - 1}")
            st = self.states[stream_id]
            if st.status == "removed":
                return
            st.status = "removed"
            st.error = st.error or f"{st.spec.name}: removed at run time after {st.frames} frames"
            worker = self._workers.get(stream_id)
        if worker is not None:
            worker.stop.set()
            self._batcher.remove_queue(worker.queue)
        self.stages.reset(stream_id)
        logger.info("%s: removed (stream %d)", st.spec.name, stream_id)

    def kind_of(self, stream_id: int) -> str:
        """``"file"``, ``"images"`` or ``"live"`` (a file played in real time is live)."""
        return self._kinds.get(stream_id, "file")

    @property
    def live_processes(self) -> int:
        """Decoder processes running this run's live streams (0: they run in threads here)."""
        return self._live.processes

    def live_processes_cpu_s(self) -> float:
        """CPU seconds those decoder processes have used so far (0 without them)."""
        return self._live.cpu_seconds()

    @property
    def batch_timeout(self) -> float | None:
        """The batcher's deadline in seconds now (``None``: files only, batches fill up)."""
        return self._batcher.timeout()

    @property
    def model_batch_limit(self) -> int | None:
        """The model's batch limit after an out-of-memory back-off (``None``: none happened)."""
        return self.infer.batch_limit

    @property
    def first_result_s(self) -> float | None:
        """Seconds from the call that made the run (``vidpipe.detect``: the model's loading
        included) to the first result handed over; ``None`` before it."""
        if self.first_result_mono is None:
            return None
        return self.first_result_mono - self.called_mono

    @property
    def warmup_s(self) -> float:
        """Seconds of warm-up: the GPU's (0 on the CPU), then the stages' (a helper process's start
        not yet done). The run's clock (:attr:`seconds`) starts after it, or, where the decode
        starts during it (a run of files on NVDEC, :meth:`_decodes_beside_warm_up`), with the
        decode: then the rest of the warm-up is in the run's seconds too."""
        return self.infer.warmup_s + self._stages_warmup_s

    # ------------------------------------------------------------------ start
    def _start(self) -> None:
        self._started = True
        self.memory.start()  # max_gpu_memory: the allocator's cap, before the CUDA graph is captured
        # a run of files starts its workers before the CUDA graph's capture (their host work meanwhile),
        # and their decode once it is captured (_decodes_beside_warm_up)
        nv12 = self._may_decode_nv12()
        early = self._decodes_beside_warm_up(nv12=nv12)
        try:
            if early:
                self._start_workers()  # they wait for _gpu_free before any CUDA call
            self.infer.warm_up(nv12=nv12, captured=self._start_decode if early else None)  # the clock starts warm
        except BaseException:
            self.close()  # workers started early stop with the run
            raise
        finally:
            self._gpu_free.set()
            self._warm.set()
        t0 = time.perf_counter()
        self.stages.warm_up()  # and the stages' helper processes started (they began when made)
        self._stages_warmup_s = time.perf_counter() - t0
        if self.started_at is None:
            self._start_clock()
        with self._lock:
            self._running = True
        self._start_workers()

    def _start_decode(self) -> None:
        """The workers decode during the warm-up, from the CUDA graph's capture on
        (:meth:`_decodes_beside_warm_up`), and the run's clock starts with them: its seconds and
        rate count the decode from its start (the files' probes and scans, made during the
        capture, do not)."""
        self._start_clock()
        self._gpu_free.set()

    def _start_clock(self) -> None:
        self.started_at = time.perf_counter()
        self.stats.start()

    def _start_workers(self) -> None:
        with self._lock:
            workers = list(self._workers.values())
        for w in workers:
            w.start()  # once: a worker started before the warm-up is left as it is

    def _decodes_beside_warm_up(self, *, nv12: bool) -> bool:
        """Whether the workers start before the GPU warm-up and decode during it, once its CUDA
        graph is captured (:meth:`Inference.warm_up`'s ``captured``): a run of video files on a
        GPU that NVDEC may decode (``nv12``: :meth:`_may_decode_nv12`; the one short file
        ``auto`` reads with PyAV starts after it, its CPU decode would slow the warm-up's thread
        for little). A file's worker probes and scans the file during the capture (host work,
        :meth:`FileSource.prepare <vidpipe.sources.file.FileSource.prepare>`), then opens it,
        starts its decoder's sessions and decodes ahead into its GPU buffers
        beside the rest of the warm-up (the model's first calls, NMS, the NV12 kernels), and
        preprocesses once the warm-up is over (:class:`~vidpipe.sources.base.SourceContext`'s
        ``warm``). Not with ``max_gpu_memory`` (the warm-up's memory is measured alone), nor for
        image folders or live streams (their workers start after it)."""
        if not nv12 or self.config.max_gpu_memory is not None:  # nv12 is False off the GPU
            return False
        with self._lock:
            kinds = set(self._kinds.values())
        return kinds == {"file"}

    def _may_decode_nv12(self) -> bool:
        """Whether a source of this run may deliver NVDEC's NV12 frames (so the fused kernels are
        worth compiling before the clock): not with ``decoder`` ``pyav``/``dali``, nor for image
        folders alone, nor for the one file that ``auto`` reads with PyAV (a short one,
        :mod:`vidpipe.decode.auto_choice`, or one NVDEC cannot decode here); sources added later
        compile them at first use."""
        if self.device.type != "cuda" or self.config.decoder in ("pyav", "dali"):
            return False
        specs = [st.spec for st in self.states]
        if any(s.kind == "live" for s in specs) or self.config.decoder != "auto":
            return True
        files = [s for s in specs if s.kind == "file"]
        if len(files) != 1 or len(specs) != 1:
            return bool(files)
        try:  # the source's own choice (decode.registry), made here once more
            from vidpipe.decode.auto_choice import frames_to_decode
            from vidpipe.decode.probe import probe
            from vidpipe.decode.registry import select_backend

            info = probe(files[0].location)
            frames = frames_to_decode(info, self.config.decode_options(self.states[0].stream_id))
            choice = select_backend(info, self.device, "auto", strict_gpu=self.config.strict_gpu, frames=frames)
            return choice.name == "nvdec"
        except Exception:  # noqa: BLE001 - the source reports a file it cannot read
            return True

    # ------------------------------------------------------------------ consumer
    def __iter__(self) -> Iterator[FrameResult]:
        with contextlib.closing(self._run()) as batches:
            for batch in batches:
                for r in batch:
                    if not self._deliver((r,)):
                        return
                    yield r

    def batches(self) -> Iterator[list[FrameResult]]:
        """The results batch by batch (one list per model call, in order per source), instead
        of frame by frame. Iterate either this or the run itself, once."""
        with contextlib.closing(self._run()) as batches:
            for batch in batches:
                if not self._deliver(batch):
                    return
                yield batch

    def _deliver(self, results: "Sequence[FrameResult]") -> bool:
        """Account results as delivered, right before they are handed over (the per-source
        counts are exactly the frames the caller received); ``False`` once closed."""
        with self._lock:
            if self._closed:
                return False
            self._count(results)
        return True

    def _count(self, results: "Sequence[FrameResult]") -> None:
        if self.first_result_mono is None and results:
            self.first_result_mono = time.monotonic()
        for r in results:
            st = self.states[r.meta.stream_id]
            st.frames += 1
            st.detections += len(r.detections)
            self.stats.frames += 1
            self.stats.detections += len(r.detections)
        self.meters.record(results)

    def _time_stage(self, name: str, seconds: float, frames: int) -> None:
        self.stats.add(name, seconds, frames)

    def _run(self) -> Iterator[list[FrameResult]]:
        if self._started:
            raise RuntimeError("a DetectionRun can be iterated only once")
        self._start()
        try:
            yield from self._consume()
        finally:
            self.close()

    def stop(self) -> None:
        """Ask the run to end early (thread- and signal-handler-safe): the workers stop reading,
        the batch being detected is still yielded, then iteration ends. Sources not read to
        their end are ``partial`` (``skipped`` if never started)."""
        self._stop.set()
        for w in list(self._workers.values()):
            w.stop.set()
        self._batcher.wake()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def _consume(self) -> Iterator[list[FrameResult]]:
        """Batches in, results out, ``config.batches_in_flight`` batches in flight: with 1, batch
        N+1's model is queued on the GPU before batch N is post-processed (head, NMS with its
        host sync, device->host copy) on a second CUDA stream, so the GPU runs one while the host
        waits for the other; with 2, batches N+1 and N+2. The batcher says when the next batch is
        not coming soon: then the oldest batch in flight is finished.

        Then the stages (:class:`~vidpipe.stages.runner.StageRunner`): a stage that works
        elsewhere (the tracker's helper process) is handed batch N and left working while batches
        N+1 and N+2 are detected (N+1 only with a live stream: :data:`STAGED_BATCHES`); batch N is
        yielded after the last of them is post-processed, or as soon as the batcher has nothing
        due, so results stay in order."""
        import torch

        in_flight: "collections.deque[_InFlight]" = collections.deque()  # launched, oldest first
        depth = self.config.batches_in_flight
        staged: "collections.deque[Ticket]" = collections.deque()  # post-processed, stages working elsewhere
        while not self._stop.is_set():  # stop(): deliver the batches in flight, drop the rest
            busy = bool(in_flight) or bool(staged)
            chunks = self._batcher.next(in_flight=busy, stop=self._stop)
            if chunks is END:
                break
            if chunks is None:
                if in_flight:
                    yield from self._finish(in_flight.popleft(), staged, torch)
                elif staged:
                    yield self._complete(staged.popleft())
                continue
            in_flight.append(self.infer.launch(chunks, torch))
            while len(in_flight) > depth:
                yield from self._finish(in_flight.popleft(), staged, torch)
        while in_flight and not self._closed:
            yield from self._finish(in_flight.popleft(), staged, torch)
        while staged and not self._closed:
            yield self._complete(staged.popleft())

    def _finish(
        self, job: "_InFlight", staged: "collections.deque[Ticket]", torch: Any
    ) -> Generator[list[FrameResult], None, None]:
        """Post-process ``job`` and hand it to the stages; yield what is done, in order. Batches
        left working in a stage elsewhere stay in ``staged`` (at most :data:`STAGED_BATCHES`, one
        where latency counts)."""
        for batch in self.infer.finish(job, torch):
            if not self.stages:
                yield batch
                continue
            with self.stats.time("stages", 0):
                ticket = self.stages.submit(batch)
            staged.append(ticket)
            while len(staged) > (1 if self._latency_counts else STAGED_BATCHES):
                yield self._complete(staged.popleft())
            if not self.stages.working(ticket):  # no stage works elsewhere: done already
                while staged:
                    yield self._complete(staged.popleft())

    def _complete(self, ticket: "Ticket") -> list[FrameResult]:
        with self.stats.time("stages", len(ticket.results)):
            return self.stages.complete(ticket)

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """End the run now, from any thread: the iterating thread's loop ends promptly (after
        the model call it may be in), nothing more is delivered, the workers are stopped and
        joined. Idempotent; a second caller does not wait for the first."""
        with self._lock:
            if self._closing:
                return
            self._closing = self._closed = True
            workers = list(self._workers.values())
        self.stop()
        self._batcher.close()
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        for w in workers:
            if w.thread.ident is not None:
                w.thread.join(timeout=max(0.0, deadline - time.monotonic()))
                if w.thread.is_alive():
                    logger.warning("%s: worker %s did not stop within %g s", w.state.spec.name, w.thread.name,
                                   JOIN_TIMEOUT_S)
        for st in list(self.states):
            if st.status == "pending":
                st.status = "skipped"
                st.error = st.error or f"{st.spec.name}: the run stopped before this input started"
            elif st.live_state is not None and st.status in ("running", "ok") and st.error is None:
                # a live stream never ends by itself: the run ending it is its normal end, and
                # the frames still queued then are dropped like any other (latest wins)
                if st.frames_in == 0:
                    st.status = "failed"
                    why = st.extra.get("last_error")
                    st.error = f"{st.spec.name}: no frame received before the run stopped" + (f" ({why})" if why else "")
                else:
                    st.status = "ok"
                    st.extra["ended"] = f"live stream stopped by the run after {st.frames} frames"
            elif st.status == "running" or (st.status == "ok" and (st.stopped or st.frames < st.produced)):
                # "ok" means the worker read its input to the end; the source is complete when,
                # in addition, every frame it produced was yielded.
                st.status = "partial"
                st.error = st.error or f"{st.spec.name}: the run stopped after {st.frames} frames"
        self.stages.close()
        self._live.close()
        self.infer.release()  # the CUDA graph goes back to the detector now, not when the run is collected
        self.memory.stop()
        self.finished_at = time.perf_counter()
        self._finalized.set()

    def summary(self, *, outputs: "Sequence[str]" = ()) -> "RunSummary":
        """What the run did so far: per-source status, counts, fps, backends, device->host bytes;
        live sources add their counters and capture-to-result latency (``extra``). After
        :meth:`close` (from any thread) it waits for the final statuses."""
        from vidpipe.pipeline_report import run_summary

        if self._closing:
            self._finalized.wait(JOIN_TIMEOUT_S + 5)
        return run_summary(self, outputs=outputs)

    def status(self) -> dict[str, Any]:
        """Where every stream stands now (JSON-able, thread-safe, cheap)::

            {"time": UTC epoch s, "uptime_s": float, "stats": get_stats(),
             "streams": [{"stream_id", "source" (credentials masked), "kind" (file|images|live),
                          "status" (pending|running|ok|partial|failed|skipped|removed),
                          "state" (live state or None), "decoder", "frames_in", "frames", "drops",
                          "reconnects", "stalls", "decode_errors", "detections",
                          "fps" (results/s over the last ~5 s),
                          "latency_ms": {"p50", "p99", "count"}}, ...]}
        """
        from vidpipe.pipeline_report import run_status

        return run_status(self)

    def get_stats(self) -> dict[str, Any]:
        """Live statistics: fps, per-stage ms per frame, CPU %, GPU memory, NVDEC/GPU utilisation,
        device->host bytes per frame (see :class:`vidpipe.stats.PipelineStats`), and the
        capture-to-result latency of live results in milliseconds: ``latency_ms`` (p50, p99,
        count; all streams) and ``stream_latency_ms`` (the same per stream id, streams with a
        capture time only)."""
        out = self.stats.snapshot()
        out["latency_ms"] = self.meters.overall().latency()
        per = {str(st.stream_id): self.meters.meter(st.stream_id).latency() for st in list(self.states)}
        out["stream_latency_ms"] = {k: v for k, v in per.items() if v["count"]}
        return out

    @property
    def seconds(self) -> float:
        if self.started_at is None:
            return 0.0
        end = self.finished_at if self.finished_at is not None else time.perf_counter()
        return end - self.started_at

    def __enter__(self) -> "DetectionRun":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
