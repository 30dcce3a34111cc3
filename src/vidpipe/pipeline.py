"""Stage wiring: source workers -> bounded queue -> batched inference -> per-frame results.

Threads:

- one *source worker* per open input (at most ``max_open_sources`` at a time) demuxes, decodes and
  preprocesses its frames into :class:`~vidpipe.types.ModelInput` chunks, on its own CUDA stream
  when the device is a GPU, and puts them on one bounded queue (backpressure: a file never drops a
  frame, a worker simply waits);
- the *consumer* (the thread iterating :class:`DetectionRun`) merges chunks from any sources into
  batches of ``batch_size``, runs the detector and yields one :class:`~vidpipe.types.FrameResult`
  per frame. Per source, results come out in frame order because each source has one worker and
  the queue is FIFO.

A failing source is recorded (status ``failed`` or ``partial``) and never stops the others. Closing
the run (or leaving a ``with`` block, or Ctrl-C) stops the workers and joins them.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vidpipe.errors import VidpipeError
from vidpipe.pipeline_config import SOURCE_ERROR_LOG, PipelineConfig, SourceState
from vidpipe.stats import PipelineStats
from vidpipe.types import FrameResult, ModelInput

if TYPE_CHECKING:
    import torch

    from vidpipe.models.detector import Detector
    from vidpipe.sources.spec import SourceSpec
    from vidpipe.summary import RunSummary

logger = logging.getLogger(__name__)

__all__ = ["DetectionRun", "PipelineConfig", "SourceState", "SOURCE_ERROR_LOG"]


@dataclass
class _Chunk:
    stream_id: int
    inp: ModelInput
    ready: Any = None  # torch.cuda.Event recorded on the worker's stream, or None


@dataclass
class _InFlight:
    """A batch whose model is queued: its input, raw output and the event after the model."""

    inp: ModelInput
    raw: Any
    done: Any


def _warm_preprocessing(device: Any, detector: "Detector") -> None:
    """Compile the fused NV12 preprocessing kernels (Triton) before the clock starts; a failure
    here only means the first real batch pays for it."""
    try:
        import torch

        from vidpipe.ops.fused import yuv_letterbox
        from vidpipe.types import ColorSpec, FrameBatch, FrameMeta

        nv12 = torch.full((1, 96, 64), 128, dtype=torch.uint8, device=device)
        batch = FrameBatch(nv12, (FrameMeta("<warm-up>", 0, 0, None, 64, 64),), "nv12", ColorSpec("bt709", "limited"))
        yuv_letterbox(batch, detector.input_size, dtype=detector.dtype)
    except Exception as exc:  # noqa: BLE001 - warm-up is an optimisation
        logger.debug("preprocessing warm-up failed: %s", exc)


def _tensors(obj: Any) -> list:
    """The tensors inside a model's raw output (a tensor, or nested tuples/lists/dicts)."""
    if hasattr(obj, "record_stream"):
        return [obj]
    if isinstance(obj, dict):
        obj = list(obj.values())
    if isinstance(obj, (list, tuple)):
        return [t for item in obj for t in _tensors(item)]
    return []


@dataclass
class _Done:
    stream_id: int


class DetectionRun:
    """An iterable of :class:`FrameResult` over several inputs, with a summary at the end.

    Create it with :func:`vidpipe.detect`. Iterate it once, frame by frame or with
    :meth:`batches`; results of one source are in frame order, sources interleave. ``states``
    tracks each source; :meth:`stop` ends the run early keeping the batch being detected,
    ``close()`` ends it at once. The per-source counts are the results handed to the caller.
    """

    def __init__(
        self,
        specs: "Sequence[SourceSpec]",
        detector: "Detector",
        config: PipelineConfig,
        *,
        failed: "Sequence[tuple[str, str]]" = (),
    ) -> None:
        self.detector = detector
        self._runner = detector  # what the consumer calls: the detector, or its CUDA-graph twin
        self._forward = self._oom_guarded(detector)
        self._post_stream: Any = None  # CUDA stream of head + NMS + device->host copies
        self.config = config
        self.device: "torch.device" = detector.device
        self.states = [SourceState(spec=s, stream_id=i) for i, s in enumerate(specs)]
        #: inputs rejected before the run (missing path, empty folder, ...): (input, reason)
        self.failed_inputs = tuple(failed)
        self._queue: queue.Queue = queue.Queue(maxsize=config.queue_depth * config.max_open_sources)
        self._stop = threading.Event()
        self._slots = threading.Semaphore(config.max_open_sources)
        self._threads: list[threading.Thread] = []
        self._started = False
        self._closed = False
        self.started_at: float | None = None
        self.finished_at: float | None = None
        self.stats = PipelineStats(self.device)
        self.batch_size = config.batch_size
        self.warmup_s = 0.0

    # ------------------------------------------------------------------ workers
    def _put(self, item: object) -> bool:
        """Put with backpressure; give up (False) once the run is stopping."""
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run_source(self, state: SourceState) -> None:
        from vidpipe.producers import produce_chunks

        with self._slots:
            if self._stop.is_set():
                self._put(_Done(state.stream_id))
                return
            state.status = "running"
            try:
                for chunk_inp, ready in produce_chunks(
                    state, detector=self.detector, config=self.config, stop=self._stop, stats=self.stats
                ):
                    if not self._put(_Chunk(state.stream_id, chunk_inp, ready)):
                        state.stopped = True
                        break
                    state.produced += len(chunk_inp)
            except VidpipeError as exc:
                state.status = "partial" if state.produced else "failed"
                state.error = str(exc)
                logger.error("%s", exc, exc_info=logger.isEnabledFor(logging.DEBUG), extra=SOURCE_ERROR_LOG)
            except Exception as exc:  # noqa: BLE001 - one broken source must not stop the others
                state.status = "partial" if state.produced else "failed"
                state.error = f"{state.spec.location}: unexpected {type(exc).__name__}: {exc}"
                logger.error("source %s failed", state.spec.location, exc_info=True, extra=SOURCE_ERROR_LOG)
            else:
                if state.status == "running":
                    state.status = "ok"
            finally:
                self._put(_Done(state.stream_id))

    def _start(self) -> None:
        self._started = True
        if self.device.type == "cuda":  # the clock starts warm: context, cuDNN, lazy init done
            t0 = time.perf_counter()
            self._runner = self._accelerated()
            self._forward = self._oom_guarded(self._runner)
            self._runner.warmup(self.batch_size)
            _warm_preprocessing(self.device, self.detector)
            self.warmup_s = time.perf_counter() - t0
        self.started_at = time.perf_counter()
        self.stats.start()
        for state in self.states:
            t = threading.Thread(
                target=self._run_source, args=(state,), name=f"vidpipe-src{state.stream_id}", daemon=True
            )
            self._threads.append(t)
            t.start()

    @staticmethod
    def _oom_guarded(detector: "Detector") -> Any:
        """The model forward, run in smaller slices after an out-of-memory error (said once,
        kept for the rest of the run: :class:`vidpipe.models.backends.OomBackoff`)."""
        from vidpipe.models.backends.batching import OomBackoff

        return OomBackoff(detector.forward, name=detector.model.info.name)

    def _accelerated(self) -> "Detector":
        """The detector with its model behind a CUDA graph at the run's batch size
        (``config.accel == "auto"``), captured before any worker thread uses the GPU."""
        if self.config.accel == "none":
            return self.detector
        from vidpipe.models.backends.accel import AcceleratedModel, accelerate
        from vidpipe.models.detector import Detector

        model = self.detector.model
        if isinstance(model, AcceleratedModel):
            return self.detector
        fast = accelerate(model, "auto", batch_size=self.batch_size)
        if fast is model:
            return self.detector
        return Detector(fast, config=self.detector.config)

    # ------------------------------------------------------------------ consumer
    def __iter__(self) -> Iterator[FrameResult]:
        for batch in self._run():
            for r in batch:
                self._count((r,))
                yield r

    def batches(self) -> Iterator[list[FrameResult]]:
        """The results batch by batch (one list per model call, in order per source), instead
        of frame by frame. Iterate either this or the run itself, once."""
        for batch in self._run():
            self._count(batch)
            yield batch

    def _count(self, results: "Sequence[FrameResult]") -> None:
        """Account results as delivered, right before they are handed over: the per-source
        counts are exactly the frames the caller received."""
        for r in results:
            st = self.states[r.meta.stream_id]
            st.frames += 1
            st.detections += len(r.detections)
            self.stats.frames += 1
            self.stats.detections += len(r.detections)

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

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def _consume(self) -> Iterator[list[FrameResult]]:
        """Batches in, results out, one batch in flight: batch N+1's model is queued on the GPU
        before batch N is post-processed (head, NMS with its host sync, device->host copy) on a
        second CUDA stream, so the GPU runs one while the host waits for the other."""
        import torch

        pending = len(self.states)
        parts: list[_Chunk] = []
        buffered = 0
        in_flight: _InFlight | None = None
        while pending or parts:
            if self._stop.is_set():  # stop(): deliver the batch in flight, drop the rest
                break
            item = None
            if pending:
                try:
                    # Wait briefly for more chunks to fill a batch; flush what we have on a lull.
                    item = self._queue.get(timeout=0.05 if (parts or in_flight) else 0.5)
                except queue.Empty:
                    if in_flight is not None:  # nothing new: finish the batch in flight
                        done, in_flight = in_flight, None
                        yield from self._finish(done, torch)
                    if not parts:
                        continue
            if isinstance(item, _Done):
                pending -= 1
                self.states[item.stream_id].finished = True
            elif isinstance(item, _Chunk):
                parts.append(item)
                buffered += len(item.inp)
            full = buffered >= self.batch_size
            if parts and (full or item is None or not pending):
                take, parts, buffered = self._split_batch(parts)
                launched = self._launch(take, torch)
                if in_flight is not None:
                    yield from self._finish(in_flight, torch)
                in_flight = launched
        if in_flight is not None:
            yield from self._finish(in_flight, torch)

    def _split_batch(self, parts: list[_Chunk]) -> tuple[list[_Chunk], list[_Chunk], int]:
        """Take whole chunks of the first chunk's input shape, up to ``batch_size`` frames.

        Chunks of another shape (sources of another aspect ratio) wait for a later batch; the
        order within each source is kept because a source's chunks all share one shape.
        """
        shape = parts[0].inp.tensor.shape[1:]
        take, rest, n = [], [], 0
        for c in parts:
            if c.inp.tensor.shape[1:] == shape and (not take or n + len(c.inp) <= self.batch_size):
                take.append(c)
                n += len(c.inp)
            else:
                rest.append(c)
        return take, rest, sum(len(c.inp) for c in rest)

    def _launch(self, chunks: list[_Chunk], torch: Any) -> "_InFlight":
        """Join the chunks into one model input and queue the model on it (current stream)."""
        from vidpipe.ops.preprocess import concat_inputs

        cuda = self.device.type == "cuda"
        if cuda:
            cur = torch.cuda.current_stream(self.device)
            for c in chunks:
                if c.ready is not None:
                    cur.wait_event(c.ready)
                c.inp.tensor.record_stream(cur)
        inp = concat_inputs([c.inp for c in chunks])
        n = len(inp)
        timer = self.stats.time_gpu("model", n, cur) if cuda else self.stats.time("model", n)
        with timer:
            raw = self._forward(inp.tensor)
        done = None
        if cuda:
            done = torch.cuda.Event()
            done.record(cur)
        return _InFlight(inp, raw, done)

    def _post_stream_for(self, torch: Any) -> Any:
        if self._post_stream is None:
            self._post_stream = torch.cuda.Stream(self.device)
        return self._post_stream

    def _finish(self, job: "_InFlight", torch: Any) -> Iterator[list[FrameResult]]:
        """Head, NMS and box mapping of a launched batch (on the post stream), then results."""
        inp, n = job.inp, len(job.inp)
        with self.stats.time("postprocess", n):
            if job.done is not None:
                post = self._post_stream_for(torch)
                post.wait_event(job.done)
                for t in (*_tensors(job.raw), inp.tensor, inp.scale, inp.pad):
                    t.record_stream(post)
                with torch.cuda.stream(post):
                    dets = self._postprocess(job, torch)
                if dets.device.type == "cuda":  # hand GPU results to the caller's stream safely
                    cur = torch.cuda.current_stream(self.device)
                    cur.wait_stream(post)
                    for t in (dets.boxes, dets.scores, dets.class_ids, dets.frame):
                        t.record_stream(cur)
            else:
                dets = self._postprocess(job, torch)
        per_frame = dets.split(n)
        names = tuple(self.detector.names)
        yield [FrameResult(meta=meta, detections=d, names=names) for meta, d in zip(inp.frames, per_frame)]

    def _postprocess(self, job: "_InFlight", torch: Any):
        dets = self._runner.postprocess(job.raw, job.inp)
        if self.config.results_on_host and dets.device.type != "cpu":
            with self.stats.time("d2h", len(job.inp)):
                self.stats.d2h_bytes += sum(
                    t.numel() * t.element_size() for t in (dets.boxes, dets.scores, dets.class_ids, dets.frame)
                )
                dets = dets.cpu()
        return dets

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Stop the workers and wait for them (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        # Drain so blocked workers can see the stop flag.
        try:
            while True:
                self._queue.get_nowait()
        except queue.Empty:
            pass
        for t in self._threads:
            t.join(timeout=10)
            if t.is_alive():
                logger.warning("worker %s did not stop within 10 s", t.name)
        for st in self.states:
            if st.status == "pending":
                st.status = "skipped"
                st.error = st.error or f"{st.spec.location}: the run stopped before this input started"
            elif st.status == "running" or (st.status == "ok" and (st.stopped or st.frames < st.produced)):
                # "ok" means the worker read its input to the end; the source is complete when,
                # in addition, every frame it produced was yielded (whether or not the consumer
                # got to the worker's end marker).
                st.status = "partial"
                st.error = st.error or f"{st.spec.location}: the run stopped after {st.frames} frames"
        self.finished_at = time.perf_counter()

    def summary(self, *, outputs: "Sequence[str]" = ()) -> "RunSummary":
        """What the run did so far: per-source status, counts, fps, backends, device->host bytes."""
        from vidpipe.summary import RunSummary, SourceSummary

        sources = [
            SourceSummary(source=src, kind="unknown", status="failed", error=reason)
            for src, reason in self.failed_inputs
        ]
        for st in self.states:
            status = st.status if st.status in ("ok", "partial", "failed", "skipped") else "partial"
            sources.append(
                SourceSummary(
                    source=st.spec.location,
                    kind=st.spec.kind,
                    status=status,
                    frames=st.frames,
                    detections=st.detections,
                    decoder=st.decoder,
                    decoder_reason=st.decoder_reason,
                    error=st.error,
                    extra=st.extra,
                )
            )
        info = self.detector.model.info
        decoders = sorted({st.decoder for st in self.states if st.decoder})
        backends = {
            "decode": ",".join(decoders) or "none",
            "model": f"{info.format}-{str(self.detector.dtype).removeprefix('torch.')}",
            "postprocess": self.device.type,
        }
        seconds = self.seconds
        frames = self.stats.frames
        stats = {
            **self.get_stats(),
            "batch_size": self.batch_size,
            "model_batch_limit": self._forward.limit,  # set after an out-of-memory back-off
            "warmup_s": self.warmup_s,
        }
        return RunSummary(
            sources=tuple(sources),
            frames=frames,
            detections=self.stats.detections,
            seconds=seconds,
            fps=frames / seconds if seconds > 0 else 0.0,
            device=str(self.device),
            model=info.name,
            backends=backends,
            outputs=tuple(outputs),
            skipped=tuple(
                {"source": st.spec.location, **item} for st in self.states for item in st.extra.get("skipped", ())
            ),
            stats=stats,
        )

    def get_stats(self) -> dict[str, Any]:
        """Live statistics: fps, per-stage ms per frame, CPU %, GPU memory, NVDEC/GPU utilisation,
        device->host bytes per frame (see :class:`vidpipe.stats.PipelineStats`)."""
        return self.stats.snapshot()

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
