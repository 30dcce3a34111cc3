"""Host-side start-up work of a GPU run, done in a thread while the model loads.

On a GPU, ``vidpipe.detect`` loads the model, captures its CUDA graph and warms the NV12
preprocessing kernels one after another on the caller's thread, then starts the decode. Two parts
of that need neither the model nor a CUDA stream, and mostly wait on files or on the driver:

- Triton's cache key of its own installation
  (:func:`vidpipe.ops.triton_kernels.prepare_cache_key`: about 0.7 s on an H200 host, hashing
  ``libtriton`` with the GIL released), paid before the first NV12 kernel even when the kernel
  comes from Triton's disk cache;
- the NVDEC capabilities the decoder's choice asks the driver for
  (:func:`~vidpipe.decode.nvdec_caps.query_caps`, 0.2-0.4 s each, cached for the process).

It also starts, at once, the decoder processes the decode will use (video files of
:data:`~vidpipe.decode.prestart.COMMAND_PROCESS_FRAMES` frames together, as ``vidpipe detect``
does, or ``decoder_processes`` asked for; MP4/MOV files' lengths read from their indexes, others'
with PyAV in a thread), so that their start (seconds) overlaps PyTorch's import and the model's
load and warm-up instead of coming after them. On an H200, 1080p street footage, fresh scripts against the code before
(``docs/bench/h200/script-processes``): a 15,000-frame file 11.2 s against 18.3 s, 3,769 frames/s
against 1,310; a 4,800-frame file 8.41 s at 3,522 frames/s (0.91x ``bench e2e``'s) against 9.59 s
at 1,932 with threads, and ``decoder_processes=4`` 8.39 s against 13.6 s.

:func:`start_prewarm` does them in a daemon thread, which ``vidpipe.detect`` starts before it
loads the model, only where the run will likely decode NVDEC's NV12 frames: a GPU device
(judged without PyTorch), ``decoder`` ``auto`` or ``nvdec``, PyNvVideoCodec installed, and a live
stream or a video file that ``auto`` would not read with PyAV
(:func:`~vidpipe.decode.auto_choice.pyav_frame_limit`). The run's own calls find the results
cached, or wait for the thread's call in progress (their locks), so nothing is done twice. A
failure here is only logged at debug level: the run's own call meets it again and reports it.

A decoder process (:mod:`vidpipe.decode.procworker`) started for a long file asks the same NVDEC
capabilities, then starts its share of the file's sessions. :class:`ChildPrewarm` does both in a
thread beside the process's own start (which imported PyTorch until session 33; it imports none
now): the sessions start on the GPU's primary context and streams taken from the CUDA driver
(:mod:`vidpipe.decode.nvdec_early`), and join the process's pool as each is ready. ``vidpipe detect`` starts the sessions of a file it decodes in its own process the same
way (:mod:`vidpipe.decode.prestart`). Measured in
``docs/bench/h200/startup-prep``, ``docs/bench/h200/child-start`` and
``docs/bench/h200/early-sessions``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vidpipe.decode.base import DecodeOptions, StreamInfo
    from vidpipe.sources.spec import SourceSpec

__all__ = ["start_prewarm", "ChildPrewarm", "nvdec_reads", "pyav_reads"]

logger = logging.getLogger(__name__)


def start_prewarm(
    specs: "Sequence[SourceSpec | Any]", *, device: str, decoder: str, options: "DecodeOptions | None" = None
) -> threading.Thread | None:
    """Start the start-up preparation of a run of ``specs`` (see the module docstring) in a daemon
    thread and return it (``None``: not a run that decodes NVDEC frames; nothing started). Never
    raises and never waits.

    Args:
        specs: the run's inputs (:class:`~vidpipe.sources.spec.SourceSpec`; other objects, such as
            a :class:`~vidpipe.sources.base.Source`, are not looked at).
        device, decoder: the run's options, as given (``"auto"``, ``"cuda:1"``, ...).
        options: the run's frame selection (``start``, ``end``, ``max_frames``, ``frame_skip``),
            for the length ``auto`` judges a single file by.
    """
    from vidpipe.decode.prestart import nvdec_gpu

    if decoder not in ("auto", "nvdec"):
        return None
    videos = [s for s in specs if getattr(s, "kind", None) in ("file", "live")]
    name = nvdec_gpu(device) if videos else None
    if name is None:
        return None
    _start_processes(name, videos, options, decoder)
    first = videos[0]
    short_rule = decoder == "auto" and len(specs) == 1  # auto's short-file rule: a run's only input
    path = first.location if first.kind == "file" else None
    return _started(path, int(name.split(":")[1]), triton=True, short_rule=short_rule, options=options)


def _start_processes(name: str, videos: "Sequence[Any]", options: "DecodeOptions | None", decoder: str) -> None:
    """The decoder processes the run's decode will use, started now beside the model's load and
    warm-up instead of at the decode, which waits for them: for video files of
    :data:`~vidpipe.decode.prestart.COMMAND_PROCESS_FRAMES` frames together to decode, as
    ``vidpipe detect`` does, or ``decoder_processes`` asked for where NVDEC will read the files
    (not one file ``auto`` may read with PyAV: shorter than :func:`_pyav_most`). MP4/MOV files'
    lengths come from their indexes at once
    (:func:`~vidpipe.decode.prestart.start_processes_now`); other containers', and the frames of a
    run cut by its options, from PyAV, in a thread of their own (:func:`_start_after_probe`)."""
    from pathlib import Path

    from vidpipe.decode.mp4count import mp4_video_frames
    from vidpipe.decode.prestart import COMMAND_PROCESS_FRAMES, PROBED_INPUTS, start_processes_now
    from vidpipe.decode.procpool import is_up

    if any(s.kind != "file" for s in videos):  # live streams too: their decode starts no process by itself
        return
    files = [Path(s.location) for s in videos][:PROBED_INPUTS]
    whole = options is None or (options.start, options.end, options.max_frames) == (None, None, None)
    asked = options.decoder_processes if options is not None else None
    one_for_auto = decoder == "auto" and len(videos) == 1
    if asked == 0 or is_up(name):
        return  # threads asked for; or processes run or start already (the command's, an earlier call's)
    try:
        if asked and not one_for_auto:  # NVDEC reads them: the decode starts them whatever the length
            start_processes_now(name, files, processes=asked, at_least=0)
            return
        if asked:
            frames = mp4_video_frames(files[0]) if whole else None
            if frames is not None:
                if frames >= _pyav_most():
                    start_processes_now(name, files, processes=asked, at_least=0)
                return
        elif start_processes_now(name, files, processes=None, at_least=COMMAND_PROCESS_FRAMES, whole=whole) is not None:
            return  # started; or MP4/MOV files too short, or files too small to be long
        # other containers, or frames cut by the options (start, end, max_frames): PyAV's lengths
        threading.Thread(target=_start_after_probe, args=(name, files, options, asked), daemon=True,
                         name="vidpipe-prewarm-processes").start()  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - an optimisation: the decode starts them itself
        logger.debug("decoder processes not started early: %s: %s", type(exc).__name__, exc)


def _start_after_probe(name: str, files: "Sequence[Any]", options: "DecodeOptions | None", asked: int | None) -> None:
    """Read the ``files``' lengths with PyAV (containers without an index read at once) and start
    the decoder processes where the run will use them: ``asked`` (its one file long enough that
    ``auto`` reads it with NVDEC), or the default number for
    :data:`~vidpipe.decode.prestart.COMMAND_PROCESS_FRAMES` frames together. Runs while the
    caller imports PyTorch and loads the model (seconds), long before the decode looks for them."""
    from vidpipe.decode.prestart import COMMAND_PROCESS_FRAMES, frames_together
    from vidpipe.decode.procpool import DEFAULT_PROCESSES, start_in_background

    try:
        frames, info = frames_together(files, options)
        if info is None or frames < (_pyav_most() if asked else COMMAND_PROCESS_FRAMES):
            return
        start_in_background(name, asked or DEFAULT_PROCESSES, warm_for=str(info.location))
    except Exception as exc:  # noqa: BLE001 - an optimisation: the decode starts them itself
        logger.debug("decoder processes not started early: %s: %s", type(exc).__name__, exc)


def _pyav_most() -> int:
    """The most frames ``auto`` leaves to PyAV, of any frame size
    (:data:`~vidpipe.decode.auto_choice.PYAV_FRAMES_BELOW`): a single file this long is NVDEC's."""
    from vidpipe.decode.auto_choice import PYAV_FRAMES_BELOW

    return max(n for _, n in PYAV_FRAMES_BELOW)


class ChildPrewarm:
    """A decoder process's start-up preparation for the video file ``path`` on GPU ``gpu`` (a CUDA
    ordinal), begun in a daemon thread at the process's start (see the module docstring): the
    file's probe, the NVDEC caps of its stream, then this process's share of the NVDEC sessions
    the parent's decode of it runs over ``processes`` decoder processes
    (:func:`~vidpipe.decode.procpool.sessions_per_process`), pooled as each is ready
    (:func:`~vidpipe.decode.nvdec_early.pool_sessions`). Never raises: a failure is logged at debug level and leaves
    fewer (or no) sessions, which the process then starts itself."""

    def __init__(self, path: str, gpu: int, *, processes: int) -> None:
        self.info: "StreamInfo | None" = None  # the file's probe, once the thread has it
        self._pooled = 0
        self._thread = threading.Thread(target=self._run, args=(path, gpu, processes), name="vidpipe-prewarm",
                                        daemon=True)  # fmt: skip
        self._thread.start()

    def _run(self, path: str, gpu: int, processes: int) -> None:
        info = _prepare(path, gpu, triton=False, short_rule=False, options=None)
        if info is None:
            return
        self.info = info
        try:
            from vidpipe.decode.nvdec import default_workers
            from vidpipe.decode.nvdec_early import pool_sessions
            from vidpipe.decode.procpool import sessions_per_process

            self._pooled = pool_sessions(info, gpu, sessions_per_process(default_workers(gpu, info.codec), processes))
        except Exception as exc:  # noqa: BLE001 - the process starts its (missing) sessions itself
            logger.debug("NVDEC sessions not started before PyTorch: %s: %s", type(exc).__name__, exc)

    def wait(self) -> int:
        """Wait for the thread; the sessions it pooled (none where it could not)."""
        self._thread.join()
        return self._pooled


def _started(*args: Any, **kwargs: Any) -> threading.Thread:
    thread = threading.Thread(target=_prepare, args=args, kwargs=kwargs, name="vidpipe-prewarm", daemon=True)
    thread.start()
    return thread


def _prepare(
    path: str | None, gpu: int, *, triton: bool, short_rule: bool, options: "DecodeOptions | None"
) -> "StreamInfo | None":
    """Probe ``path`` (``None``: a live stream), then Triton's key (``triton``) and the caps.
    Returns the file's stream where NVDEC decodes it (``None`` otherwise, for a live stream, or
    on a failure)."""
    try:
        info = None
        if path is not None:
            from vidpipe.decode.probe import probe

            info = probe(path)
            if short_rule and pyav_reads(info, options):
                return None  # the run reads it with PyAV: no NV12 kernel, no NVDEC session
        if triton:
            from vidpipe.ops import triton_kernels

            triton_kernels.prepare_cache_key()
        return nvdec_reads(info, gpu)
    except Exception as exc:  # noqa: BLE001 - an optimisation: the run meets and reports any failure
        logger.debug("start-up preparation stopped: %s: %s", type(exc).__name__, exc)
    return None


def nvdec_reads(info: "StreamInfo | None", gpu: int) -> "StreamInfo | None":
    """``info`` where GPU ``gpu``'s NVDEC decodes its stream, asking the driver's caps (cached for
    the process; ``None`` asks only what ``nvdec_unavailable`` asks first); ``None`` otherwise.
    Raises where the driver or PyNvVideoCodec fail."""
    from vidpipe.decode.nvdec_caps import query_caps, stream_unsupported

    query_caps(gpu, "h264", "420", 8)  # what nvdec_unavailable asks first
    if info is None:
        return None
    why = stream_unsupported(info, lambda codec, chroma, bits: query_caps(gpu, codec, chroma, bits))
    return info if why is None else None


def pyav_reads(info: Any, options: "DecodeOptions | None") -> bool:
    """``auto`` reads this only input with PyAV (shorter than :func:`pyav_frame_limit`)."""
    from vidpipe._cpus import usable_cpus
    from vidpipe.decode.auto_choice import frames_to_decode, pyav_frame_limit

    frames = frames_to_decode(info, options)
    return frames is not None and frames < pyav_frame_limit(info, cpus=usable_cpus())
