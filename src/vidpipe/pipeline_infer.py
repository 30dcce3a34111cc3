"""The model side of a :class:`~vidpipe.pipeline.DetectionRun`: batches in, results out, one
batch in flight.

:meth:`Inference.launch` joins a batch's chunks and queues the model on the run's *model stream*
(after waiting on each chunk's ready event: its worker preprocessed it on the worker's own
stream); :meth:`Inference.finish` runs the head, NMS and box mapping of a launched batch on a
second CUDA stream (the *post stream*) and hands the detections to the caller's current stream.
The consumer launches batch N+1 before finishing batch N, so the GPU runs one while the host
waits for the other. The caller's stream carries none of the model's work: reading batch N's
results there (``.cpu()``, a tracker's host copy, the caller's own kernels) waits for batch N's
post-processing only, not for batch N+1's model queued meanwhile (when the model ran on the
caller's stream, each such read held the host until the next batch's model was done; on an H200
with YOLOv3-tiny, 0.1 ms a frame, that made no measurable difference to the rate). On the CPU
the same calls run in order, without streams or events.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from vidpipe.types import Detections, FrameResult, ModelInput

if TYPE_CHECKING:
    from vidpipe.batching.queues import QueuedChunk
    from vidpipe.models.detector import Detector
    from vidpipe.pipeline_config import PipelineConfig
    from vidpipe.stats import PipelineStats

logger = logging.getLogger("vidpipe.pipeline")

__all__ = ["Inference", "STREAM_PRIORITY"]

#: CUDA stream priority per role (lower: sooner; PyTorch maps it into the device's range). The
#: run's thread waits on the post-processing (NMS's host synchronisations) while the next batch's
#: model is queued on the model stream: at one priority the GPU schedules the model's blocks
#: first and the run's thread waits behind them. Measured on an H200, 1080p crowded footage
#: (``docs/bench/h200/post-priority``): post-processing 0.14 -> 0.08 ms a frame of the run's
#: thread, the command's rate +24% untracked and +26% tracked.
STREAM_PRIORITY: "Mapping[str, int]" = MappingProxyType({"post": -1, "model": 0})


@dataclass
class _InFlight:
    """A batch whose model is queued: its input, raw output and the event after the model."""

    inp: ModelInput
    raw: Any
    done: Any


def _warm_preprocessing(device: Any, detector: "Detector") -> None:
    """Compile the fused NV12 preprocessing kernels (Triton; or load them from its cache) before
    the clock starts; a failure here only means the first NV12 batch pays for it."""
    try:
        import torch

        from vidpipe.ops import triton_kernels
        from vidpipe.ops.fused import yuv_letterbox
        from vidpipe.types import ColorSpec, FrameBatch, FrameMeta

        triton_kernels.prepare_cache_key()  # or wait for vidpipe.prewarm's thread computing it
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


def _record_images(inp: ModelInput, stream: Any) -> None:
    """The kept frames of a chunk (made on a worker's stream) are read on the consumer's stream
    from now on: their memory must not be reused by the worker's stream before that is done."""
    if inp.images is None:
        return
    rows = inp.images if isinstance(inp.images, tuple) else (inp.images,)
    for t in rows:
        t.record_stream(stream)


class Inference:
    """The detector of a run, its CUDA-graph twin, the out-of-memory back-off and the post stream.

    Args:
        detector: the run's detector (its device is the run's).
        config: the run's config (``batch_size``, ``accel``, ``results_on_host``).
        stats: where stage times go (``model``, ``postprocess``, ``d2h``; ``preprocess`` of
            pending frames).
    """

    def __init__(self, detector: "Detector", config: "PipelineConfig", stats: "PipelineStats") -> None:
        self.detector = detector
        self.config = config
        self.stats = stats
        self.device = detector.device
        self.batch_size = config.batch_size
        self._runner = detector  # what the consumer calls: the detector, or its CUDA-graph twin
        self._twin_key: tuple[Any, ...] | None = None  # set while a twin is borrowed
        self._call_lock = threading.Lock()  # a model call and release() never overlap
        self._forward = self._oom_guarded(detector)
        self._post_stream: Any = None  # CUDA stream of head + NMS + device->host copies
        self._model_stream: Any = None  # CUDA stream of the preprocessing of pending frames and the model
        self._to_input: Any = None  # Preprocessor of pending frames, made at the first
        self.warmup_s = 0.0

    @property
    def batch_limit(self) -> int | None:
        """The model's batch limit after an out-of-memory back-off (``None``: none happened)."""
        return self._forward.limit

    def warm_up(self, *, nv12: bool = True, captured: "Callable[[], None] | None" = None) -> None:
        """On a GPU: the CUDA graph, cuDNN and (``nv12``: a source may deliver NVDEC's frames)
        the fused NV12 preprocessing kernels, before the clock starts (``warmup_s``); nothing on
        the CPU. The NV12 kernels (Triton) took about 1 s in a fresh process on an H200, from
        Triton's cache too, 0.7 s of it Triton's key of its installation: :mod:`vidpipe.prewarm`
        computes that beside the model's load now (the warm-up went from 1.55-1.76 s to
        0.82-1.06 s). A run of PyAV sources skips them; an NVDEC run that compiled them at its
        first batch instead took 1 s longer (its decode threads and the compile contend). They
        warm up in a thread beside the detector's first calls (model, head, NMS): on an H200 the
        model's first launch then came 0.34-0.47 s after the run's clock started, against
        0.45-0.73 s one after the other (``docs/bench/h200/late-children``).

        ``captured``: called once the CUDA graph is captured (or found captured), before the
        rest of the warm-up: the run starts its file workers there, whose decode must not
        overlap the capture (NVDEC's threads invalidated it, on an H200: a thread-local capture
        failed too) but may overlap the rest. Called on the CPU too, at once."""
        if self.device.type != "cuda":
            if captured is not None:
                captured()
            return
        t0 = time.perf_counter()
        self._runner = self._accelerated()
        if captured is not None:
            captured()
        self._forward = self._oom_guarded(self._runner)
        # the NV12 kernels in a thread beside the detector's first calls (both mostly load code
        # onto the GPU, and release the GIL there): the run's first batch waits for both
        side = None
        if nv12:
            side = threading.Thread(target=_warm_preprocessing, args=(self.device, self.detector),
                                    name="vidpipe-nv12-warm-up", daemon=True)  # fmt: skip
            side.start()
        try:
            self._runner.warmup(self.batch_size)
        except Exception as exc:  # noqa: BLE001 - out of memory: the first batches back off instead
            from vidpipe.models.backends.common import is_oom

            if not is_oom(exc):
                raise
            import torch

            del exc
            torch.cuda.empty_cache()
            logger.warning("warm-up at batch %d ran out of GPU memory; the model backs off on the first batches",
                           self.batch_size)  # fmt: skip
        finally:
            if side is not None:
                side.join()
        self.warmup_s = time.perf_counter() - t0

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

        def capture() -> "Detector":
            fast = accelerate(model, "auto", batch_size=self.batch_size)
            return self.detector if fast is model else Detector(fast, config=self.detector.config)

        self._twin_key = (self.batch_size, self.config.accel)
        return self.detector.twins.take(self._twin_key, capture)

    def release(self) -> None:
        """Give the borrowed CUDA-graph twin back to the detector for its next run (its memory
        stays with the detector, which keeps a bounded number: :mod:`vidpipe.models.twins`);
        later calls of this run run the model eagerly. Safe from any thread: it waits for a
        model call in progress to be queued and for the GPU to finish it. Idempotent."""
        with self._call_lock:
            for role, stream in (("post", self._post_stream), ("model", self._model_stream)):
                if stream is not None:
                    self.detector.cuda_streams.give((self.device, role), stream)
            self._post_stream = self._model_stream = None
            key, self._twin_key = self._twin_key, None
            if key is None or self._runner is self.detector:
                return
            if self.device.type == "cuda":
                import torch

                try:
                    torch.cuda.synchronize(self.device)  # no replay may still use the graph's buffers
                except Exception:  # noqa: BLE001 - a broken context: keep the graph, it dies with the run
                    logger.debug("synchronize before giving the CUDA graph back failed", exc_info=True)
                    return
            self.detector.twins.give(key, self._runner)
            limit = self._forward.limit
            self._runner = self.detector
            self._forward = self._oom_guarded(self.detector)
            self._forward.limit = limit

    def launch(self, chunks: "list[QueuedChunk]", torch: Any) -> "_InFlight":
        """Join the chunks into one model input and queue the model on it (the model stream)."""
        from vidpipe.batching.pending import PendingFrame, materialize

        cuda = self.device.type == "cuda"
        parts = [c.inp for c in chunks]
        scope: Any = contextlib.nullcontext()
        if cuda:
            ms = self._model_stream = self._stream_for(self._model_stream, "model", torch)
            cur = torch.cuda.current_stream(self.device)
            for c in chunks:
                if c.ready is not None:
                    ms.wait_event(c.ready)
                if not isinstance(c.inp, PendingFrame):
                    c.inp.tensor.record_stream(ms)
                    _record_images(c.inp, ms)
                    _record_images(c.inp, cur)  # the caller reads the kept frames on its stream
            scope = torch.cuda.stream(ms)
        pending = sum(isinstance(p, PendingFrame) for p in parts)
        if pending and self._to_input is None:
            from vidpipe.ops.preprocess import Preprocessor

            self._to_input = Preprocessor(self.detector, self.config)
        with scope:
            t0 = time.perf_counter()
            inp = materialize(parts, self._to_input)  # frames queued as decoded are preprocessed here, together
            if pending:
                self.stats.add("preprocess", time.perf_counter() - t0, pending)
                if cuda:
                    _record_images(inp, cur)  # kept frames made on the model stream, read on the caller's
            n = len(inp)
            timer = self.stats.time_gpu("model", n, ms) if cuda else self.stats.time("model", n)
            with timer:
                with self._call_lock:
                    raw = self._forward(inp.tensor)
            done = None
            if cuda:
                done = torch.cuda.Event()
                done.record(ms)
        return _InFlight(inp, raw, done)

    def _stream_for(self, stream: Any, role: str, torch: Any) -> Any:
        """``stream``, or one of the detector's for ``role`` (kept across runs, each stream in one
        role: see :mod:`vidpipe.models.twins`), at that role's priority (:data:`STREAM_PRIORITY`)."""
        if stream is None:
            priority = STREAM_PRIORITY.get(role, 0)
            stream = self.detector.cuda_streams.take(
                (self.device, role), lambda: torch.cuda.Stream(self.device, priority=priority)
            )
        return stream

    def finish(self, job: "_InFlight", torch: Any) -> Iterator[list[FrameResult]]:
        """Head, NMS and box mapping of a launched batch (on the post stream), then results."""
        inp, n = job.inp, len(job.inp)
        with self.stats.time("postprocess", n):
            if job.done is not None:
                post = self._post_stream = self._stream_for(self._post_stream, "post", torch)
                post.wait_event(job.done)
                for t in (*_tensors(job.raw), inp.tensor, inp.scale, inp.pad):
                    t.record_stream(post)
                if self.config.results_on_host:
                    with torch.cuda.stream(post):
                        per_frame = self._to_host(job)
                else:  # GPU results: handed to the caller's stream safely
                    with torch.cuda.stream(post):
                        dets = self._runner.postprocess(job.raw, inp)
                    cur = torch.cuda.current_stream(self.device)
                    cur.wait_stream(post)
                    for t in (dets.boxes, dets.scores, dets.class_ids, dets.frame):
                        t.record_stream(cur)
                    per_frame = dets.split(n, by_frame=True)  # NMS's order, kept by the mapping
            else:  # the CPU: the results are on the host already
                per_frame = self._runner.postprocess(job.raw, inp).split(n, by_frame=True)
        names = tuple(self.detector.names)
        if inp.images is None:
            yield [FrameResult(meta=meta, detections=d, names=names) for meta, d in zip(inp.frames, per_frame)]
            return
        # kept frames: each result holds its row (a view); the frame lives as long as it is referenced
        yield [
            FrameResult(meta=meta, detections=d, names=names, image=inp.images[i])
            for i, (meta, d) in enumerate(zip(inp.frames, per_frame))
        ]

    def _to_host(self, job: "_InFlight") -> "list[Detections]":
        """``results_on_host`` on a GPU: head and NMS on the device, then the batch's results per
        frame on the CPU (:func:`~vidpipe.post.host.results_on_host`: one copy, the letterbox
        undone on the host, where :meth:`Detector.postprocess` undoes it on the device)."""
        from vidpipe.post.host import results_on_host

        dets = self._runner.select(job.raw, job.inp)
        with self.stats.time("d2h", len(job.inp)):
            per_frame, nbytes = results_on_host(dets, job.inp)
        self.stats.d2h_bytes += nbytes
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("%d frames -> %d detections", len(job.inp), len(dets))
        return per_frame
