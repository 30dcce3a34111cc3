"""Decoder processes started at a command's first step, beside its own start-up.

A decoder process starts in seconds (its interpreter, PyTorch, a CUDA context). ``vidpipe.detect``
starts them itself, when the decode begins, for a file of
:data:`~vidpipe.decode.procpool.AUTO_START_FRAMES` frames or more, or when ``decoder_processes``
asks for them; the file then waits for their start. ``vidpipe detect`` knows that before it
imports PyTorch, so it calls :func:`prestart_decoder_processes` first thing (nothing imported but
the standard library; PyAV in a thread reads the lengths of inputs of :data:`PROBE_BYTES` or
more): the children start while the command does, each starting its share of the file's NVDEC
sessions before it says hello (``warm_for``, :class:`~vidpipe.decode.procpool.DecoderProcessPool`),
and the decode waits less.

Only where the decode would start them anyway: a GPU device (``cuda``, ``cuda:N``, or ``auto`` on
a machine with an NVIDIA driver), ``decoder`` ``auto`` or ``nvdec``, PyNvVideoCodec installed, a
video file among the inputs, and either ``processes`` given or
:data:`~vidpipe.decode.procpool.AUTO_START_FRAMES` frames to decode in the files (of the first
:data:`PROBED_INPUTS`) together: files decoding at once share the processes
(``DecodeOptions.files_at_once``). Not for fewer frames: on an
H200, four children starting beside the command delayed its first result from 2.2 to 4.9 s (their
CUDA contexts and the command's start at the same time) and a 4,800-frame 1080p file took 11.6 s
against 8.4 s with threads (``docs/bench/h200/startup``); from about 15,000 1080p frames they win
(``docs/bench/h200/startup/crossover``: 60,000 frames 23.5 s against 28.6 s). Where they are used, starting them with
the command costs less than starting them at the decode: on that file ``vidpipe detect
--decoder-processes 4`` took 12.4 s (median of 3), ``vidpipe.detect(..., decoder_processes=4)``
from a Python script, which starts them at the decode, 14.0 s (threads: 9.1 and 9.9 s).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path

__all__ = ["prestart_decoder_processes", "gpu_name"]

logger = logging.getLogger(__name__)

#: inputs probed for their length (the rest of a long list is not looked at)
PROBED_INPUTS = 8
#: files smaller than this together are not probed (a video of
#: :data:`~vidpipe.decode.procpool.AUTO_START_FRAMES` frames rarely is: 1.6 Mbit/s at 30 fps;
#: the real 1080p clip of 15,000 frames is 206 MB); reading the lengths of short inputs beside the
#: command's import of PyTorch cost every command for the sake of a few. A long file under it still
#: gets the processes, started at its decode instead
PROBE_BYTES = 100 << 20


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


def prestart_decoder_processes(
    inputs: Sequence[str | os.PathLike],
    *,
    device: str = "auto",
    decoder: str = "auto",
    processes: int | None = None,
    start: float | None = None,
    end: float | None = None,
    max_frames: int | None = None,
    frame_skip: int = 1,
) -> bool:
    """Start decoder processes in the background when a run of these options would start them
    (see the module docstring); return at once. ``True``: they start, or start if an input is
    long enough (read in a thread); ``False``: not a run that starts them. Never raises: a failure
    is logged and the run decodes with threads (or starts them itself).

    Args:
        inputs: the run's inputs as given (files are probed; URLs, folders and globs are not).
        device, decoder, processes: the run's options (``processes`` ``0``: threads, nothing to
            start; ``None``: :data:`~vidpipe.decode.procpool.DEFAULT_PROCESSES` for a long file).
        start, end, max_frames, frame_skip: the run's frame selection (the frames it decodes).
    """
    if processes == 0 or decoder not in ("auto", "nvdec"):
        return False
    name = gpu_name(device)
    if name is None or importlib.util.find_spec("PyNvVideoCodec") is None:
        return False
    files = [Path(p) for p in inputs[:PROBED_INPUTS] if Path(p).is_file()]
    if not files:
        return False
    from vidpipe.decode.base import DecodeOptions
    from vidpipe.decode.procpool import DEFAULT_PROCESSES, start_in_background

    if processes is not None:  # asked for: the decode starts them whatever the length
        start_in_background(name, processes, warm_for=str(files[0]))  # the children probe it
        return True
    if sum(map(_size, files)) < PROBE_BYTES:  # too small to hold AUTO_START_FRAMES frames: no thread, no probe
        return False
    try:
        options = DecodeOptions(frame_skip=frame_skip, max_frames=max_frames, start=start, end=end)
    except ValueError:  # the run itself reports options that do not fit (--end before --start)
        return False

    def look() -> None:
        try:
            from vidpipe.decode.procpool import AUTO_START_FRAMES

            frames, path = _lengths(files, options)
            if frames >= AUTO_START_FRAMES:
                start_in_background(name, DEFAULT_PROCESSES, warm_for=str(path))
        except Exception as exc:  # noqa: BLE001 - the decode starts them itself, or uses threads
            logger.debug("decoder processes not started early: %s", exc)

    threading.Thread(target=look, name="vidpipe-prestart", daemon=True).start()
    return True


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _lengths(files: Sequence[Path], options) -> tuple[int, Path | None]:
    """The frames ``files`` decode with ``options`` together (an input that is not video, or
    whose length is unknown, counts 0), and the longest of them (the one the children start
    their sessions for). Together: files decoding at once share the processes."""
    from vidpipe.decode.auto_choice import frames_to_decode
    from vidpipe.decode.probe import probe
    from vidpipe.errors import VidpipeError

    total, most, longest = 0, 0, None
    for path in files:
        try:
            info = probe(path)
        except VidpipeError:  # an image, or not media: the run says so
            continue
        frames = frames_to_decode(info, options) or 0
        total += frames
        if frames > most:
            most, longest = frames, path
    return total, longest
