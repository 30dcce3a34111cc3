""":class:`TrackerStage`: ByteTrack as a pipeline stage (``vidpipe.detect(..., track=True)``,
``vidpipe detect --track``).

One tracker per stream (ByteTrack, compiled or numpy: :class:`~vidpipe.track.book.TrackBook`),
created on the stream's first frame
and dropped by :meth:`TrackerStage.reset` (a live reconnect, a stream removed); ids keep counting
up per stream across resets, so an id in a stream's table always means one track.

Time: a frame's time is its capture time (``meta.captured_mono``, live streams), else its
timestamp (``meta.pts``), else its index / ``nominal_fps``; the Kalman filter predicts over the
real interval and ``track_buffer`` is in seconds, so dropped live frames and ``frame_skip`` do
not age tracks wrongly.

Where: ``worker="auto"`` runs the trackers on the run's thread when they are compiled
(:mod:`vidpipe.track.compiled`: microseconds a frame), and the numpy trackers in a helper
process on a machine with CUDA (:mod:`vidpipe.track.process`), inline elsewhere. A helper
process is handed batches N+1 and N+2 (N+1 only with a live stream:
:data:`vidpipe.pipeline.STAGED_BATCHES`) before the run takes batch N's ids
(:meth:`TrackerStage.submit`), so its tracking overlaps the detection of the next ones; inline,
``submit`` tracks the batch at once and says so (``done``), and the run passes it on without
holding it back (on the CPU VM the first result of ``vidpipe detect bikes.mp4 --track`` came
2.5-3 s sooner).

Cost: per stream and batch the detections of its frames are packed and copied to the host once
(embeddings included) into a :class:`~vidpipe.track.book.PackedFrames` (one ``torch.cat`` a
column), the tracker runs on the host, and the ids go back to the detections' device in one
copy; each result gets ``detections.track_ids`` ``(N,)`` int64 on that device (``-1``: not in a
confirmed track). Rate of the stage (32-frame batches of CPU tensors, one stream, inline; ``vidpipe
bench track`` prints it), on a 2-core AMD EPYC VM: about 143,000 frames/s with 5 detections a frame
compiled (8,100 numpy), 98,000 with 20 (6,300), 19,000 with 100 (2,600). In a real run on an H100
host the stage took 0.026-0.036 ms a frame of the run's thread (the GIL shared with the run's
other threads triples its cost alone), tracked runs 0.89-0.97x the untracked rate
(``docs/bench/h200/track-compiled``; the numpy tracker in its helper process: 0.77-0.86x on crowded
footage, where one core running numpy was the limit); since the post-processing's CUDA stream
outranks the model's, the run's thread has room for it: 0.96-1.01x on an H200
(``docs/bench/h200/post-priority``).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from vidpipe.errors import ConfigError
from vidpipe.track.book import PackedFrames, TrackBook
from vidpipe.track.compiled import Engine
from vidpipe.track.config import TrackConfig
from vidpipe.track.process import TrackerProcess, TrackerProcessError
from vidpipe.types import replace_unchecked

if TYPE_CHECKING:
    import numpy as np

    from vidpipe.track.book import StreamIds
    from vidpipe.types import FrameMeta, FrameResult

__all__ = ["PendingTracks", "TrackerStage", "frame_time"]

logger = logging.getLogger(__name__)


def frame_time(meta: "FrameMeta", nominal_fps: float) -> float:
    """The frame's time in seconds on the clock its stream keeps (see the module docstring)."""
    if meta.captured_mono is not None and math.isfinite(meta.captured_mono):
        return float(meta.captured_mono)
    if meta.pts is not None and math.isfinite(meta.pts):  # (a corrupt stream's NaN or inf: not a time)
        return float(meta.pts)
    return meta.index / nominal_fps


class TrackerStage:
    """A :class:`~vidpipe.stages.Stage` named ``"track"`` that sets ``detections.track_ids``.

    Args:
        config: the tracker's options (:class:`~vidpipe.track.TrackConfig`); or as keywords
            (``TrackerStage(track_buffer=2.0)``).
        streams: track only these stream ids (``None``: every stream); the others' results pass
            through untouched (``track_ids`` stays ``None``).
        worker: where the trackers run. ``"process"``: a helper process
            (:mod:`vidpipe.track.process`): the run's thread only packs each batch's detections
            and the tracking of batch N overlaps the detection of the next ones (the run hands
            the stage batch N+1, for files N+2 too, before it waits for N's ids, through
            :meth:`submit`); ``"inline"``:
            on the thread that iterates the run; ``"auto"`` (default): inline with the compiled
            trackers (a frame costs them microseconds, less than the messages to a helper cost;
            measured in ``docs/bench/h200/track-compiled``), a process with the numpy ones on a
            machine with CUDA (where a run delivers thousands of frames per second).
            The helper process starts with the stage (before the run: its start overlaps the
            run's warm-up). One that fails to start or dies is logged once; the trackers then run
            inline (tracks start over, ids go on counting).
        engine: the trackers' implementation (:func:`~vidpipe.track.compiled.resolve_engine`):
            ``"auto"`` (default) compiled with numba where it is installed, else numpy; ``"compiled"``;
            ``"numpy"`` (the reference :class:`~vidpipe.track.bytetrack.ByteTrack`).
    """

    name = "track"
    needs_frames = False

    def __init__(
        self,
        config: TrackConfig | None = None,
        *,
        streams: "set[int] | None" = None,
        worker: Literal["auto", "process", "inline"] = "auto",
        engine: "Engine" = "auto",
        **options: Any,
    ) -> None:
        if config is None:
            config = TrackConfig(**options)
        elif options:
            config = dataclasses.replace(config, **options)
        if worker not in ("auto", "process", "inline"):
            raise ConfigError(f"invalid worker={worker!r}; expected 'auto', 'process' or 'inline'")
        self.config = config
        self.streams = streams
        self.worker = worker
        self._book = TrackBook(config, engine=engine)  # the trackers when they run inline
        self._child: "TrackerProcess | None" = None
        self._mode: str | None = None  # "process" or "inline", decided when made (or "inline" after a failure)
        self._resets_due: list[int] = []  # streams the child must forget before the next request
        self._next_id: dict[int, int] = {}  # ids continue after a reset
        self._started: dict[int, int] = {}  # confirmed tracks per stream, resets included
        self._active: dict[int, int] = {}
        self._frames: dict[int, int] = {}
        self._resets: dict[int, int] = {}
        self._where()  # a helper process starts now: ready by the first frames (it overlaps the run's warm-up)

    # ------------------------------------------------------------------ Stage
    def process(self, results: "Sequence[FrameResult]") -> "Sequence[FrameResult]":
        return self.submit([results]).result()[0]

    def submit(self, groups: "Sequence[Sequence[FrameResult]]") -> "PendingTracks":
        """Start tracking every stream's group of a batch (see
        :meth:`~vidpipe.stages.runner.StageRunner.submit`); the handle's ``result()`` gives the
        groups back with ``track_ids``."""
        fps = self.config.nominal_fps
        emb = self.config.appearance_weight > 0
        packed = [
            (i, *_pack(g, fps, with_embeddings=emb))
            for i, g in enumerate(groups)
            if g and (self.streams is None or g[0].meta.stream_id in self.streams)
        ]
        seq = None
        if packed and self._where() == "process":
            assert self._child is not None
            resets, self._resets_due = self._resets_due, []
            try:
                seq = self._child.request(resets, [(p, self._next_id.get(p.stream_id, 1)) for _, p, _ in packed])
            except TrackerProcessError as exc:
                self._fall_back(exc)
        pending = PendingTracks(self, groups, packed, seq)
        if seq is None:  # inline: tracked now, so the run need not hold the batch back (``done``)
            pending.done_groups = self._finish(pending)
        return pending

    def warm_up(self) -> None:
        """Wait until the helper process is ready (the run calls this before its clock starts;
        a process that failed to start leaves the trackers inline, said once)."""
        if self._child is not None:
            try:
                self._child.wait_started()
            except TrackerProcessError as exc:
                self._fall_back(exc)

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until the trackers run in their final form (compiled, or numpy for good); a run
        need not: the numpy trackers track meanwhile and hand over (see
        :class:`~vidpipe.track.book.TrackBook`). For measuring the compiled trackers' rate."""
        return self._book.wait_built(timeout)

    def _finish(self, pending: "PendingTracks") -> "list[Sequence[FrameResult]]":
        out: "list[StreamIds] | None" = None
        if pending.seq is not None and self._child is not None:
            try:
                out = self._child.reply(pending.seq)
            except TrackerProcessError as exc:
                self._fall_back(exc)
        if out is None:
            out = [self._book.track(p, first_id=self._next_id.get(p.stream_id, 1)) for _, p, _ in pending.packed]
        groups: list[Sequence[FrameResult]] = list(pending.groups)
        for (i, p, device), got in zip(pending.packed, out):
            sid = p.stream_id
            self._started[sid] = self._started.get(sid, 0) + got.started
            self._next_id[sid] = got.next_id
            self._active[sid] = got.active
            self._frames[sid] = self._frames.get(sid, 0) + len(groups[i])
            groups[i] = _attach(groups[i], got.ids, p.counts.tolist(), device)
        return groups

    def _where(self) -> str:
        """``"process"`` or ``"inline"``: decided once, when the stage is made."""
        if self._mode is None:
            self._mode = "inline"
            if self.worker == "process" or (self.worker == "auto" and self._book.engine == "numpy" and _has_cuda()):
                try:
                    self._child = TrackerProcess(self.config, engine=self._book.engine)
                    self._mode = "process"
                except Exception as exc:  # noqa: BLE001 - tracking goes on inline
                    logger.warning("the tracker process did not start (%s); tracking runs on the run's thread", exc)
            if self._mode == "inline":  # compiled (or loaded) while the run warms up and starts
                self._book.start_building()
        return self._mode

    def _fall_back(self, exc: BaseException) -> None:
        """The helper process failed: track inline from now on (tracks start over)."""
        logger.warning("%s; tracking goes on in the run's process (tracks start over, ids go on counting)", exc)
        child, self._child, self._mode = self._child, None, "inline"
        self._resets_due = []
        if child is not None:
            child.close()
        self._book.start_building()

    def reset(self, stream_id: int) -> None:
        self._book.reset(stream_id)
        if self._mode == "process":
            self._resets_due.append(stream_id)
        if stream_id in self._frames:
            self._resets[stream_id] = self._resets.get(stream_id, 0) + 1
            self._active[stream_id] = 0
            logger.debug("tracks of stream %d reset", stream_id)

    def report(self) -> Mapping[str, Any]:
        """``{"tracks": total confirmed, "worker": "process" | "inline", "engine": "compiled" |
        "numpy", "streams": {"<id>":
        {"tracks", "active", "frames", "resets"}}}``."""
        streams = {
            str(sid): {
                "tracks": self._started.get(sid, 0),
                "active": self._active.get(sid, 0),
                "frames": self._frames[sid],
                "resets": self._resets.get(sid, 0),
            }
            for sid in sorted(self._frames)
        }
        if not streams:
            return {}
        return {"tracks": sum(s["tracks"] for s in streams.values()), "worker": self._mode,
                "engine": self._book.engine, "streams": streams}  # fmt: skip

    def active_tracks(self, stream_id: int) -> int:
        """Confirmed tracks followed now in ``stream_id`` (for live status tables)."""
        return self._active.get(stream_id, 0)

    def close(self) -> None:
        child, self._child = self._child, None
        if child is not None:
            child.close()
        self._book = TrackBook(self.config, engine=self._book.engine)


class PendingTracks:
    """A batch being tracked (:meth:`TrackerStage.submit`): in the helper process, or tracked
    already (``done``: inline trackers, which take microseconds a frame)."""

    def __init__(self, stage: TrackerStage, groups: "Sequence[Sequence[FrameResult]]",
                 packed: "list[tuple[int, PackedFrames, Any]]", seq: int | None) -> None:  # fmt: skip
        self.stage, self.groups, self.packed, self.seq = stage, groups, packed, seq
        self.done_groups: "list[Sequence[FrameResult]] | None" = None

    @property
    def done(self) -> bool:
        """``result()`` will not wait (see :class:`~vidpipe.stages.base.PendingGroups`)."""
        return self.done_groups is not None

    def result(self) -> "list[Sequence[FrameResult]]":
        if self.done_groups is not None:
            return self.done_groups
        return self.stage._finish(self)


def _has_cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def _pack(results: "Sequence[FrameResult]", nominal_fps: float, *, with_embeddings: bool) -> "tuple[PackedFrames, Any]":
    """One stream's consecutive results as :class:`~vidpipe.track.book.PackedFrames` (one host
    copy), and the detections' device (``None``: several, or none with detections)."""
    import numpy as np

    rows, counts, emb, device = _to_host(results, with_embeddings=with_embeddings)
    times = np.array([frame_time(r.meta, nominal_fps) for r in results], dtype=np.float64)
    return PackedFrames(results[0].meta.stream_id, times, np.asarray(counts, dtype=np.int64), rows, emb), device


def _to_host(results: "Sequence[FrameResult]", *, with_embeddings: bool) -> "tuple[np.ndarray, list[int], np.ndarray | None, Any]":
    """The detections of ``results`` as one ``(N, 6)`` float32 host array (x1, y1, x2, y2,
    score, class) and their ``(N, D)`` embeddings, in frame order, with one device->host copy;
    and the device they are on (``None``: several, or no detections).

    A column is one ``torch.cat`` of the frames' tensors (a batch's frames are views of one
    tensor): three torch calls a batch, where a numpy view per frame and column cost about four
    times as much on the run's thread."""
    import numpy as np
    import torch

    counts = [r.detections.boxes.shape[0] for r in results]
    total = sum(counts)
    if total == 0:
        return np.zeros((0, 6), np.float32), counts, None, None
    dets = [r.detections for r, c in zip(results, counts) if c]
    embs = None
    if with_embeddings and any(r.embeddings is not None for r in results):
        got = [r.embeddings for r, c in zip(results, counts) if c]
        if all(e is not None and e.ndim == 2 and e.shape[0] == len(d) for e, d in zip(got, dets)):
            dims = {int(e.shape[1]) for e in got}  # type: ignore[union-attr]
            if len(dims) == 1:
                embs = got
    try:
        boxes = torch.cat([d.boxes for d in dets]).detach()
        dev = boxes.device
    except RuntimeError:  # one stream's results on several devices (a caller's own)
        boxes = torch.cat([d.boxes.detach().cpu() for d in dets])
        dets = [d.cpu() for d in dets]
        embs = None if embs is None else [e.cpu() for e in embs]  # type: ignore[union-attr]
        dev = None
    scores = torch.cat([d.scores for d in dets]).detach()
    classes = torch.cat([d.class_ids for d in dets])
    if boxes.device.type == "cpu" and embs is None and boxes.dtype == scores.dtype == torch.float32:
        rows = np.empty((total, 6), np.float32)
        rows[:, :4] = boxes.numpy()
        rows[:, 4] = scores.numpy()
        rows[:, 5] = classes.numpy()
        return rows, counts, None, dev
    cols = [boxes.float(), scores.float()[:, None], classes.float()[:, None]]  # classes: exact below 2**24
    if embs is not None:
        cols.append(torch.cat([e.to(boxes.device) for e in embs]).detach().float())  # type: ignore[union-attr]
    packed = torch.cat(cols, dim=1).cpu().numpy()  # the one host copy
    return packed[:, :6], counts, (packed[:, 6:] if embs is not None else None), dev


def _attach(results: "Sequence[FrameResult]", ids: "np.ndarray", counts: list[int], device: Any = None) -> "list[FrameResult]":
    """Each result with ``detections.track_ids`` on its detections' device: views of one host
    tensor where they are on the host, else one copy per device and one split.

    The ids are ``(N,)`` int64 on the detections' device by construction here, so they are set
    without :meth:`~vidpipe.types.Detections.with_track_ids`'s checks (two thirds of this
    function's time on the run's thread)."""
    import torch

    devices = {device} if device is not None else {r.detections.device for r in results}
    if len(devices) == 1:
        dev = devices.pop()
        host = torch.from_numpy(ids)
        parts: Sequence[torch.Tensor] = (host if dev.type == "cpu" else host.to(dev)).split(counts)
    else:  # results of one stream on several devices (a caller's own): per device
        starts = list(itertools.accumulate([0, *counts[:-1]]))
        host = torch.from_numpy(ids)
        on = {dev: host if dev.type == "cpu" else host.to(dev) for dev in devices}
        parts = [on[r.detections.device][a : a + c] for r, a, c in zip(results, starts, counts)]
    return [replace_unchecked(r, detections=replace_unchecked(r.detections, track_ids=part))
            for r, part in zip(results, parts)]  # fmt: skip
