"""The decode's slow parts started at a command's first step, beside its own start-up.

``vidpipe detect`` knows its inputs before it imports PyTorch (seconds), so it calls
:func:`prestart_decoding` first thing (nothing imported but the standard library; PyAV in a thread
reads the lengths of inputs of :data:`PROBE_BYTES` or more, except MP4/MOV files long enough for
decoder processes, whose indexes say it at once: :mod:`~vidpipe.decode.mp4count`), and it starts
one of two things:

**Decoder processes**, for a file of :data:`COMMAND_PROCESS_FRAMES` frames or more (the files of
the first :data:`PROBED_INPUTS` together: files decoding at once share the processes,
``DecodeOptions.files_at_once``) or when ``processes`` asks for them. A process starts in seconds
(its interpreter, PyTorch, a CUDA context); ``vidpipe.detect`` from a script starts them the same
way at its call for files of as many frames (``vidpipe.prewarm``: :func:`start_processes_now`, or
PyAV's lengths in a thread: :func:`frames_together`); a file whose length is not read so starts
them when its decode begins, which then waits for them, and so only from
:data:`~vidpipe.decode.procpool.AUTO_START_FRAMES` frames. Started here, the children start while
the command does, each starting its share of the file's NVDEC sessions before it imports PyTorch
(``warm_for``, :class:`~vidpipe.decode.procpool.DecoderProcessPool`); a decode that begins
before they are ready starts with threads and they join it (:mod:`vidpipe.decode.proclate`).
Since the children start their sessions first (session 24) they are mostly ready before the
command's decode plan, and they win from much shorter files: on an H200, 1080p H.264 street
footage, ``vidpipe bench startup --lengths 4800,9000 --decoder-processes 0,4`` (medians of 3):
4,800 frames 6.50 s against 6.87 s with threads, at 0.90x ``bench e2e``'s rate against 0.67x;
9,000 frames 7.61 against 7.91 s, 0.96x against 0.75x; the first result 0.45 s later
(``docs/bench/h200/host-results``). Where that starts, runs alternating threads and 4 processes
(``docs/bench/h200/command-processes``): at 4,800 frames the processes were faster in 9 of 13
pairs (median 0.22 s) at 0.86-0.95x the bench's rate against 0.52-0.69x; at 2,400 in 6 of 10
pairs by a median 0.09 s, within the noise, for four more CUDA contexts, so not there. Before
session 24, four children starting beside the command delayed its first result from 2.2 to 4.9 s
and the 4,800-frame file took 11.6 s against 8.4 s (``docs/bench/h200/startup``).

**NVDEC sessions in the command's own process**, for the files it decodes with threads (shorter,
or ``processes`` 0), except the one short file ``auto`` reads with PyAV
(:func:`~vidpipe.prewarm.pyav_reads`): the sessions the decode would start for the longest file's
kind of stream (:func:`~vidpipe.decode.nvdec_pool.sessions_worth_starting`: 12 for 4,800 frames),
started without PyTorch (:mod:`vidpipe.decode.nvdec_early`) while the command imports it, and
pooled, so the decode takes them ready instead of starting them one at a time in the driver
during its first second. The command calls :meth:`Prestart.settle` before its run captures the
model's CUDA graph, which no session start may overlap; by then, 3-4 s into the command, the
sessions are long started.

Only where the decode would use NVDEC anyway: a GPU device (``cuda``, ``cuda:N``, or ``auto`` on a
machine with an NVIDIA driver), ``decoder`` ``auto`` or ``nvdec``, PyNvVideoCodec installed, a
video file among the inputs.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vidpipe.decode.base import StreamInfo

__all__ = ["prestart_decoding", "start_processes_now", "frames_together", "worth_probing", "Prestart", "gpu_name",
           "nvdec_gpu"]

logger = logging.getLogger(__name__)

#: inputs probed for their length (the rest of a long list is not looked at)
PROBED_INPUTS = 8
#: files smaller than this together are not probed: neither processes nor early sessions pay for
#: the probe's share of the command's start (PyAV's import beside PyTorch's). Such a file's decode
#: is short and starts few sessions (4 MB of 1080p H.264 at 3 Mbit/s: 10 s, 300 frames, where
#: ``auto`` reads it with PyAV; the bundled clip is 0.5 MB). A file of
#: :data:`~vidpipe.decode.procpool.AUTO_START_FRAMES` frames under it (64 kbit/s) still gets its
#: processes, started at its decode instead
PROBE_BYTES = 4 << 20
#: the command starts decoder processes, while it imports PyTorch, for files of this many frames
#: together (fewer: NVDEC sessions in its own process). The shortest length measured where they
#: win (see the module docstring); at 2,400 frames they tie with threads
COMMAND_PROCESS_FRAMES = 4_800


def gpu_name(device: str) -> str | None:
    """The pool name (``"cuda:N"``) of ``device`` (``auto``, ``cuda``, ``cuda:N``) when this
    machine has an NVIDIA GPU for it, judged without PyTorch (its driver's device node and
    ``CUDA_VISIBLE_DEVICES``); ``None`` otherwise. ``auto`` and ``cuda`` are the first visible GPU."""
    text = device.strip().lower()
    if text in ("auto", "cuda"):
        text = "cuda:0"
    if not text.startswith("cuda:") or not text[5:].isdigit():
        return None
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return None
    if not os.path.exists("/dev/nvidiactl"):
        return None
    return text


def nvdec_gpu(device: str) -> str | None:
    """:func:`gpu_name` of ``device`` where NVDEC can decode on it (PyNvVideoCodec installed),
    judged without PyTorch; ``None`` otherwise."""
    name = gpu_name(device)
    return None if name is None or importlib.util.find_spec("PyNvVideoCodec") is None else name


class Prestart:
    """What :func:`prestart_decoding` began: a thread that reads the inputs' lengths and starts
    decoder processes or NVDEC sessions. :meth:`settle` before the run captures its CUDA graph."""

    def __init__(self, look: "Callable[[threading.Event], None] | None" = None) -> None:
        self._stop = threading.Event()
        self._thread = None
        if look is not None:
            self._thread = threading.Thread(target=look, args=(self._stop,), name="vidpipe-prestart", daemon=True)
            self._thread.start()

    def settle(self) -> None:
        """Start no more NVDEC sessions in this process and wait for the one being started, if
        any (the driver's session start must not run during a CUDA graph's capture). Sessions
        already started stay pooled; the decode starts the rest. Decoder processes go on
        starting in the background. Idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def prestart_decoding(
    inputs: Sequence[str | os.PathLike],
    *,
    device: str = "auto",
    decoder: str = "auto",
    processes: int | None = None,
    start: float | None = None,
    end: float | None = None,
    max_frames: int | None = None,
    frame_skip: int = 1,
) -> Prestart | None:
    """Start the decode's slow parts in the background when a run of these options would need
    them (see the module docstring): decoder processes, or the NVDEC sessions of a file decoded
    in this process. Returns at once: a :class:`Prestart` (the inputs' lengths are read in its
    thread), or ``None`` (not a run that decodes video files on NVDEC; nothing started). Never
    raises: a failure is logged and the run starts what it needs itself.

    Args:
        inputs: the run's inputs as given (files are probed; URLs, folders and globs are not).
        device, decoder, processes: the run's options (``processes`` ``0``: threads, no process
            to start; ``None``: :data:`~vidpipe.decode.procpool.DEFAULT_PROCESSES` for a long file).
        start, end, max_frames, frame_skip: the run's frame selection (the frames it decodes).
    """
    if decoder not in ("auto", "nvdec"):
        return None
    name = nvdec_gpu(device)
    if name is None:
        return None
    files = [Path(p) for p in inputs[:PROBED_INPUTS] if Path(p).is_file()]
    if not files:
        return None
    from vidpipe.decode.base import DecodeOptions
    from vidpipe.decode.procpool import DEFAULT_PROCESSES, start_in_background

    whole = (start, end, max_frames) == (None, None, None)
    if start_processes_now(name, files, processes=processes, at_least=COMMAND_PROCESS_FRAMES, whole=whole):
        return Prestart()
    if not worth_probing(files):  # too small for either to pay: no thread, no probe
        return None
    try:
        options = DecodeOptions(frame_skip=frame_skip, max_frames=max_frames, start=start, end=end)
    except ValueError:  # the run itself reports options that do not fit (--end before --start)
        return None
    gpu = int(name.split(":")[1])
    only_input = len(inputs) == 1

    def look(stop: threading.Event) -> None:
        try:
            from vidpipe.decode.nvdec_early import pool_sessions
            from vidpipe.prewarm import nvdec_reads, pyav_reads

            frames, info = frames_together(files, options)
            if info is None:
                return
            if processes is None and frames >= COMMAND_PROCESS_FRAMES:
                start_in_background(name, DEFAULT_PROCESSES, warm_for=str(info.location))
                return
            if decoder == "auto" and only_input and pyav_reads(info, options):
                return  # auto reads it with PyAV: no session
            info = nvdec_reads(info, gpu)
            if info is not None and not stop.is_set():
                from vidpipe.decode.nvdec import default_workers
                from vidpipe.decode.nvdec_pool import sessions_worth_starting

                # the sessions the decode would start itself (its files share them), started sooner
                count = sessions_worth_starting(frames, idle=0, most=default_workers(gpu, info.codec))
                pooled = pool_sessions(info, gpu, count, stop=stop)  # each pooled as it is ready
                logger.debug("%d NVDEC sessions started for %s before PyTorch", pooled, info.location)
        except Exception as exc:  # noqa: BLE001 - the decode starts them itself, or uses threads
            logger.debug("decoding not started early: %s", exc)

    return Prestart(look)


def start_processes_now(name: str, files: Sequence[Path], *, processes: int | None, at_least: int,
                        whole: bool = True) -> bool | None:  # fmt: skip
    """Start the decoder processes of GPU ``name`` (``"cuda:0"``) for a run of the video
    ``files`` now, in the background, where it is known now that the run will use them:
    ``processes`` asked for (that many, whatever the length), or ``processes`` ``None`` and MP4/MOV
    files of at least :data:`PROBE_BYTES` whose frames together reach ``at_least``, decoded
    ``whole`` (no start, end or frame limit), read from their indexes
    (:func:`~vidpipe.decode.mp4count.mp4_video_frames`, a millisecond or two): the default number,
    their NVDEC sessions started for the longest file. ``True``: started. ``False``: known not to
    need them (``processes`` 0, files too small or too short). ``None``: not known at once (a file
    without an MP4 index, or a run cut by its options): PyAV's lengths decide
    (:func:`frames_together`). Never raises: a start that fails is logged by the pool."""
    from vidpipe.decode.mp4count import mp4_video_frames
    from vidpipe.decode.procpool import DEFAULT_PROCESSES, start_in_background

    if not files or processes == 0:
        return False
    if processes:  # asked for: the decode starts them whatever the length
        start_in_background(name, processes, warm_for=str(files[0]))  # the children probe it
        return True
    if not worth_probing(files):
        return False
    counts = [mp4_video_frames(p) for p in files] if whole else [None]
    if any(c is None for c in counts):
        return None
    if sum(counts) < at_least:  # type: ignore[arg-type]
        return False
    start_in_background(name, DEFAULT_PROCESSES, warm_for=str(files[counts.index(max(counts))]))
    return True


def worth_probing(files: Sequence[Path]) -> bool:
    """Whether ``files`` are large enough together (:data:`PROBE_BYTES`) for a length read with
    PyAV to pay: smaller files cannot hold a length that needs decoder processes."""
    return sum(map(_size, files)) >= PROBE_BYTES


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def frames_together(files: Sequence[Path], options) -> "tuple[int, StreamInfo | None]":
    """The frames ``files`` decode with ``options`` together (an input that is not video, or
    whose length is unknown, counts 0), and the stream of the longest of them (the one the
    sessions are started for). Together: files decoding at once share the processes."""
    from vidpipe.decode.auto_choice import frames_to_decode
    from vidpipe.decode.probe import probe
    from vidpipe.errors import VidpipeError

    total, most, longest = 0, -1, None
    for path in files:
        try:
            info = probe(path)
        except VidpipeError:  # an image, or not media: the run says so
            continue
        frames = frames_to_decode(info, options) or 0
        total += frames
        if frames > most:
            most, longest = frames, info
    return total, longest
