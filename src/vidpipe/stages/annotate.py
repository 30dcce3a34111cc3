"""The ``annotate`` stage: each result's frame rendered (boxes, labels, lines, zones, blur) and
written to a video per stream (:class:`~vidpipe.encode.VideoWriter`: a file, or an RTMP/RTSP
re-stream).

- A stream's writer opens at its first frame: size from the frame, frame rate from the source
  (probed with PyAV; 30 when it cannot be told, e.g. a live URL), the source's audio when it is
  a local file.
- Rendering runs on the run's thread and device (``render(result) -> (3, H, W) uint8``, e.g.
  :class:`vidpipe.draw.Annotator`); encoding runs on each writer's thread. The run waits for
  encoding only when a writer's bounded queue is full: ``report()`` counts those waits
  (``blocked_writes``, ``blocked_ms``).
- Timestamps: the frames' ``pts``; after a live reconnect (:meth:`reset`) the new connection's
  timestamps continue where the last frame ended.
- A frame whose size differs from the stream's first frame (an image folder of mixed sizes) is
  not written and counted (``skipped_size``); its result passes on unchanged.
- A writer that fails mid-run (the server went away, the disk is full) is logged once, its
  stream's video stops, and detection goes on (``report()`` gives the error). A target that
  cannot be opened at all raises (``on_error="raise"``, the CLI: a mistake to report) or is
  logged like a failure (``on_error="log"``, ``vidpipe serve``: the other cameras go on).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from vidpipe._cpus import usable_cpus
from vidpipe.encode.nvenc import NVENC_CODECS
from vidpipe.errors import BackendUnavailableError, ConfigError, SinkError, SourceError
from vidpipe.sources.redact import redact_text

if TYPE_CHECKING:
    import torch

    from vidpipe.encode import VideoWriter
    from vidpipe.types import FrameMeta, FrameResult

__all__ = ["AnnotateStage", "source_fps", "audio_source", "usable_cpus"]

logger = logging.getLogger(__name__)

DEFAULT_FPS = 30.0


def source_fps(source: str) -> float:
    """The frame rate of a local video file (PyAV's probe), else :data:`DEFAULT_FPS`."""
    if "://" in source or not os.path.isfile(source):
        return DEFAULT_FPS
    try:
        from vidpipe.decode.probe import probe

        fps = probe(source).fps
    except Exception:  # noqa: BLE001 - not a video PyAV can describe: the default
        return DEFAULT_FPS
    return float(fps) if fps and 0 < fps <= 1000 else DEFAULT_FPS


def audio_source(source: str) -> str | None:
    """``source`` when it is a local file (whose audio the video may carry), else ``None``."""
    return source if "://" not in source and os.path.isfile(source) else None


@dataclass
class _Stream:
    target: str
    writer: "VideoWriter | None" = None
    size: tuple[int, int] | None = None
    shift: float = 0.0  # added to pts (continuing after a reconnect)
    rebase: bool = False
    last_pts: float | None = None
    render_s: float = 0.0
    frames: int = 0
    skipped_size: int = 0
    threads: str | None = None  # libx264's threads option, as given to the writer
    error: str | None = None
    final: dict = field(default_factory=dict)


class AnnotateStage:
    """Render every result and write it to its stream's video (see the module docstring).

    Args:
        target: where stream ``meta`` goes: ``target(meta) -> str`` (a file path or a live
            URL), or ``None`` to leave that stream out.
        render: ``render(result) -> (3, H, W) uint8 RGB`` tensor, a new one (the frame is not
            modified); e.g. ``vidpipe.draw.Annotator(...)``. When it also has
            ``many(results) -> [tensor, ...]`` (the Annotator does), a batch's frames of every
            stream are rendered in one call.
        codec: the video encoder (``"libx264"``, ``"libx265"``; ``"h264_nvenc"``/``"hevc_nvenc"``:
            NVENC through PyNvVideoCodec, on a thread of this process, frames staying on the GPU;
            not verified on NVENC hardware, see :mod:`vidpipe.encode.nvenc`).
        audio: copy each file source's audio into its video.
        fps: ``fps(source) -> float`` for a stream's nominal rate (default :func:`source_fps`).
        options, queue_frames: passed to each :class:`~vidpipe.encode.VideoWriter`.
        release_frames: hand the results on without their frames (``image=None``), freeing each
            frame at once when no later stage or caller needs the pixels (the CLI's case).
        on_error: a target that cannot be opened: ``"raise"`` its error (ending the run) or
            ``"log"`` it and go on without that stream's video.
        encoder: where each stream's encoder runs: ``"process"`` (a child process per stream,
            :class:`~vidpipe.encode.process.ProcessVideoWriter`: FFmpeg's calls then do not
            compete with the model's thread for the GIL), ``"thread"`` (a thread of this process,
            :class:`~vidpipe.encode.VideoWriter`), ``"auto"``: a process for frames on CUDA (a
            fast run, where the GIL is what limits), a thread on the CPU; NVENC codecs always
            encode on a thread.
        streams: how many streams the stage will encode at once (the run's inputs), so that
            libx264's encoders share the CPU instead of each taking all of it: unless
            ``options`` sets ``threads``, each encoder gets ``max(1, cpus // streams)`` threads
            (``cpus``: the CPUs this process may run on), ``streams`` being the streams opened
            so far (counted when each encoder opens, a batch's new streams together) where
            those are more (streams added while the run goes on), or where ``None``. Measured on an H200 host (16 cores, 16 live
            1080p30 streams, ``preset=ultrafast``): libx264's own choice (1.5 threads a core per
            encoder) gave 329 annotated frames/s, 2 threads each 395, 1 thread each 478 of 480.
        encoder_nice: the encoder processes' niceness (``encoder="process"``; see
            :class:`~vidpipe.encode.process.ProcessVideoWriter`): encoding yields the CPU to
            decoding and detection when both want it, so a short CPU delays video (which has
            queues) rather than detections (whose live frames would be dropped). Measured on the
            host above, 16 streams, two runs each: niceness 0 gave 375 and 474 annotated
            frames/s (1,536 and 80 frames dropped), 10 gave 478 and 480 (5 and 0 dropped).
    """

    name = "annotate"
    needs_frames = True

    def __init__(
        self,
        target: "Callable[[FrameMeta], str | os.PathLike | None]",
        *,
        render: "Callable[[FrameResult], torch.Tensor]",
        codec: str = "libx264",
        audio: bool = True,
        fps: Callable[[str], float] = source_fps,
        options: Mapping[str, str] | None = None,
        queue_frames: int = 8,
        release_frames: bool = False,
        on_error: Literal["raise", "log"] = "raise",
        encoder: Literal["auto", "thread", "process"] = "auto",
        streams: int | None = None,
        encoder_nice: int = 10,
    ) -> None:
        if on_error not in ("raise", "log"):
            raise ConfigError(f"on_error={on_error!r}; expected 'raise' or 'log'")
        if encoder not in ("auto", "thread", "process"):
            raise ConfigError(f"encoder={encoder!r}; expected 'auto', 'thread' or 'process'")
        if streams is not None and (isinstance(streams, bool) or not isinstance(streams, int) or streams < 1):
            raise ConfigError(f"streams={streams!r}; expected a positive whole number or None")
        if encoder == "process" and codec in NVENC_CODECS:
            raise ConfigError(f"encoder='process' with codec={codec!r}: NVENC encodes on a thread of this process "
                              "(its frames stay on the GPU); use encoder='auto' or 'thread'")
        if isinstance(encoder_nice, bool) or not isinstance(encoder_nice, int) or not 0 <= encoder_nice <= 19:
            raise ConfigError(f"encoder_nice={encoder_nice!r}; expected a whole number from 0 to 19")
        self._encoder = encoder
        self._expected = streams
        self._nice = encoder_nice
        self._on_error = on_error
        self._target, self._render, self.codec = target, render, codec
        self._audio, self._fps = audio, fps
        self._options = dict(options or {})
        self._queue_frames = queue_frames
        self._release = release_frames
        self._streams: dict[int, _Stream] = {}
        self._closed = False

    # ---------------------------------------------------------------- Stage
    def process(self, results: "Sequence[FrameResult]") -> "Sequence[FrameResult]":
        return self.process_batch([results])[0]

    def process_batch(self, groups: "Sequence[Sequence[FrameResult]]") -> "list[Sequence[FrameResult]]":
        """Every stream's results of a batch: rendered together (one ``render.many`` call when the
        renderer has one, as :class:`vidpipe.draw.Annotator` does), then written per stream."""
        todo: list[tuple[_Stream, FrameResult]] = []
        for results in groups:
            for r in results:
                if r.image is None:
                    raise RuntimeError("annotate: a result came without its frame (the run must keep frames)")
                st = self._stream(r.meta)
                if st is not None and st.error is None:
                    todo.append((st, r))
        if todo:
            t0 = time.perf_counter()
            many = getattr(self._render, "many", None)
            images = many([r for _, r in todo]) if many is not None else [self._render(r) for _, r in todo]
            each = (time.perf_counter() - t0) / len(todo)
            self._open_new(todo, images)  # the batch's new streams open side by side
            writes: list[tuple[_Stream, FrameResult, torch.Tensor, float | None]] = []
            for (st, r), image in zip(todo, images):
                st.render_s += each
                if st.error is None and st.writer is not None:  # (not failed on an earlier frame)
                    pts = self._admit(st, image, r.meta.pts)
                    if pts is not False:
                        writes.append((st, r, image, pts))
            self._write_all(writes)
        if self._release:
            import dataclasses

            return [[dataclasses.replace(r, image=None) for r in results] for results in groups]
        return list(groups)

    def reset(self, stream_id: int) -> None:
        st = self._streams.get(stream_id)
        if st is not None and st.last_pts is not None:
            st.rebase = True  # the next frame's pts continue after the last one written

    def report(self) -> dict[str, Any]:
        """``{"streams": {stream_id: {...}}}``: per stream the ``target`` (credentials masked),
        ``frames`` written, ``render_ms_per_frame`` (the run's thread), the writer's
        ``encode_ms_per_frame``, ``blocked_writes``/``blocked_ms``, ``audio``, ``encoder_threads``
        (libx264's ``threads`` option; ``None`` for other codecs, which choose their own), ``error``."""
        streams: dict[str, Any] = {}
        for sid, st in sorted(self._streams.items()):
            w = st.final or (st.writer.report() if st.writer is not None else {})
            streams[str(sid)] = {
                "target": redact_text(st.target),
                "frames": w.get("frames", 0),
                "render_ms_per_frame": round(st.render_s * 1000 / st.frames, 3) if st.frames else None,
                "encode_ms_per_frame": w.get("encode_ms_per_frame"),
                "blocked_writes": w.get("blocked_writes", 0),
                "blocked_ms": w.get("blocked_ms", 0.0),
                "width": w.get("width"),
                "height": w.get("height"),
                "fps": w.get("fps"),
                "codec": w.get("codec", self.codec),
                "audio": w.get("audio"),
                "pts_nudged": w.get("pts_nudged", 0),
                "skipped_size": st.skipped_size,
                "encoder_threads": st.threads,
                "error": st.error,
            }
        return {"streams": streams} if streams else {}

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for st in self._streams.values():
            self._finish(st)

    # ---------------------------------------------------------------- internals
    def _stream(self, meta: "FrameMeta") -> _Stream | None:
        st = self._streams.get(meta.stream_id)
        if st is None:
            target = self._target(meta)
            if target is None:
                self._streams[meta.stream_id] = st = _Stream(target="", error="no target")
                return None
            st = self._streams[meta.stream_id] = _Stream(target=os.fspath(target))
        return st

    def _open_new(self, todo: "list[tuple[_Stream, FrameResult]]", images: "Sequence[torch.Tensor]") -> None:
        """Open the writers of streams seen for the first time, all before waiting for any."""
        new: dict[int, tuple[_Stream, FrameResult, torch.Tensor]] = {}
        for (st, r), image in zip(todo, images):
            if st.writer is None and st.error is None and st.size is None:
                new.setdefault(id(st), (st, r, image))
        for st, _, image in new.values():  # sized first: each of the batch's streams counts in every one's CPU share
            st.size = tuple(image.shape[1:])
        opened: list[tuple[_Stream, FrameResult]] = []
        for st, r, image in new.values():
            _, h, w = image.shape
            if self._guard(st, r, lambda: self._open(st, r.meta, h, w, cuda=image.is_cuda)):
                opened.append((st, r))
        for st, r in opened:
            wait = getattr(st.writer, "wait_ready", None)
            if wait is not None and not self._guard(st, r, wait):
                self._finish(st)  # (its process has ended; this collects it)

    def _guard(self, st: _Stream, r: "FrameResult", step: "Callable[[], Any]") -> bool:
        """Run ``step`` (opening a writer); a target that cannot be opened raises
        (``on_error="raise"``) or is logged and leaves the stream without video."""
        try:
            step()
            return True
        except (SinkError, SourceError, BackendUnavailableError) as exc:
            if self._on_error == "raise":
                raise
            st.error = str(exc)
            logger.error("annotate: %s; stream %d has no video, detection goes on", st.error, r.meta.stream_id)
            return False

    def _open(self, st: _Stream, meta: "FrameMeta", height: int, width: int, *, cuda: bool) -> None:
        fps = self._fps(meta.source)
        audio = audio_source(meta.source) if self._audio else None
        process = (self._encoder == "process" or (self._encoder == "auto" and cuda)) and self.codec not in NVENC_CODECS
        options = self._encoder_options()
        st.threads = options.get("threads")
        common = dict(width=width, height=height, fps=fps, codec=self.codec, audio_from=audio,
                      options=options or None, queue_frames=self._queue_frames)
        if process:
            from vidpipe.encode.process import ProcessVideoWriter

            st.writer = ProcessVideoWriter(st.target, nice=self._nice, **common)
        else:
            from vidpipe.encode import VideoWriter

            st.writer = VideoWriter(st.target, **common)
        logger.info("annotate: stream %d -> %s (%dx%d, %.3g fps%s%s%s)", meta.stream_id, redact_text(st.target),
                    width, height, fps, ", audio from the source" if audio else "",
                    f", {options['threads']} encoder thread(s)" if "threads" in options else "",
                    ", encoded in a process of its own" if process else "")

    def _encoder_options(self) -> dict[str, str]:
        """The writer's options: the caller's, with libx264's ``threads`` shared out (see
        ``streams``) when the caller did not set it."""
        options = dict(self._options)
        if self.codec == "libx264" and "threads" not in options:
            opened = sum(1 for st in self._streams.values() if st.size is not None and st.error is None)
            streams = max(self._expected or 0, opened)
            options["threads"] = str(max(1, usable_cpus() // max(1, streams)))
        return options

    def _admit(self, st: _Stream, image: "torch.Tensor", pts: float | None) -> "float | None | Literal[False]":
        """Count the frame; ``False`` when it is not written (another size), else its ``pts`` on
        the video's timeline (continuing after a reconnect)."""
        st.frames += 1
        if tuple(image.shape[1:]) != st.size:
            st.skipped_size += 1
            return False
        if pts is not None:
            if st.rebase:
                st.rebase = False
                step = 1.0 / float(st.writer.fps)
                st.shift = (st.last_pts if st.last_pts is not None else 0.0) + step - pts
            pts += st.shift
            st.last_pts = pts
        return pts

    def _write_all(self, writes: "list[tuple[_Stream, FrameResult, torch.Tensor, float | None]]") -> None:
        """Hand each frame to its stream's writer. CUDA frames of one (even) size go to YUV 4:2:0 in
        one batched conversion first (:func:`~vidpipe.encode.yuv.rgb_to_yuv420` on ``(N, 3, H,
        W)``): per frame the run's thread then only queues a copy, instead of launching the
        conversion's ~30 kernels once per stream."""
        groups: dict[tuple, list[int]] = {}
        for k, (_, _, image, _) in enumerate(writes):
            _, h, w = image.shape
            if image.is_cuda and h % 2 == 0 and w % 2 == 0:
                groups.setdefault((h, w, image.device), []).append(k)
        planes: dict[int, torch.Tensor] = {}
        for (h, _, _), ks in groups.items():
            if len(ks) > 1:
                import torch

                from vidpipe.encode.yuv import matrix_for_height, rgb_to_yuv420

                yuv = rgb_to_yuv420(torch.stack([writes[k][2] for k in ks]), matrix=matrix_for_height(h))
                planes.update(zip(ks, yuv.unbind(0)))
        for k, (st, r, image, pts) in enumerate(writes):
            if st.writer is None:
                continue  # (failed on an earlier frame of this batch)
            try:
                if k in planes:
                    st.writer.write_yuv420(planes[k], pts=pts)
                else:
                    st.writer.write(image, pts=pts)
            except SinkError as exc:
                st.error = str(exc)
                logger.error("annotate: %s; the video of stream %d stops here, detection goes on",
                             st.error, r.meta.stream_id)
                self._finish(st)

    def _finish(self, st: _Stream) -> None:
        if st.writer is None:
            return
        writer, st.writer = st.writer, None
        try:
            writer.close()
        except SinkError as exc:
            if st.error is None:
                st.error = str(exc)
                logger.error("annotate: %s", st.error)
        st.final = writer.report()
