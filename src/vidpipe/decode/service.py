"""A decoder service: decoder processes that stay up across ``vidpipe.detect`` calls.

One call decides on its own whether to decode in decoder processes (files of
:data:`~vidpipe.decode.prestart.COMMAND_PROCESS_FRAMES` frames or more, started at the call, since
their start costs seconds) or with NVDEC sessions in threads of this process, which share the GIL
with the model's run; the processes, once started, serve the process's later calls. A script that
calls :func:`vidpipe.detect` on many shorter files pays the threads' rate on every call.
:func:`decoder_service` starts the processes for a block of calls, in the background
(a call that begins before they are ready decodes with threads until they join it:
:mod:`vidpipe.decode.proclate`), and stops them after it. Measured on an H200 (a 4,800-frame 1080p
street clip, four calls in one process, ``docs/bench/h200/command-processes``): calls after the
first ran at 3,782-4,035 frames/s in the block against 2,544-3,062 with threads, 1.31-1.40 s a call
against 1.65-2.06 s; the first call waited 3-4 s for the processes (6.8-7.7 s against 3.7 s), so
four such calls took 11.6-12.5 s against 8.9-9.4 s (measured before a first call decoded with
threads while they start). The processes pay for their start after about
40,000 frames of calls::

    with vidpipe.decoder_service():
        for path in paths:
            run = vidpipe.detect(path, device="cuda")

Every decode of a video file on NVDEC in the block uses them unless it asks for
``decoder_processes=0``; files decoding at once share them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["decoder_service", "DecoderService"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DecoderService:
    """What :func:`decoder_service` has running.

    Attributes:
        device: the GPU the processes decode on (``"cuda:0"``), or ``None``: no NVDEC here (no
            NVIDIA GPU, no PyNvVideoCodec, or a CPU device), nothing started, the calls decode
            as they would without the service.
        processes: decoder processes asked for (0 when ``device`` is ``None``).
        started: this service started them and stops them at the block's end (``False``: none,
            or processes of this device ran or were starting already, and keep running).
    """

    device: str | None
    processes: int
    started: bool


@contextmanager
def decoder_service(processes: int | None = None, *, device: str = "auto",
                    warm_for: str | os.PathLike | None = None) -> Iterator[DecoderService]:  # fmt: skip
    """Keep ``processes`` decoder processes (default
    :data:`~vidpipe.decode.procpool.DEFAULT_PROCESSES`) up on ``device`` for the calls in the
    ``with`` block.

    They start in a thread and the ``with`` statement returns at once: each child starts an
    interpreter and a CUDA context (about a second; a decode meanwhile starts with threads, and they join it
    once ready: :mod:`vidpipe.decode.proclate`). ``warm_for``: a video like the ones to come;
    each child starts its share of that kind of stream's NVDEC sessions as it starts, instead of at
    the first decode. At the block's end they stop (and are waited for), unless a decode still
    uses them (a run left open): they then stop with this process.

    Without NVDEC (no NVIDIA GPU, PyNvVideoCodec missing, ``device="cpu"``) nothing starts and the
    calls run as they would without it; a warning says so for a ``cuda`` device.

    Raises:
        ConfigError: (a ``ValueError``) ``processes`` is not an integer from 1 to
            :data:`~vidpipe.decode.base.MAX_DECODER_PROCESSES`.
    """
    from vidpipe._validate import check_range
    from vidpipe.decode.base import MAX_DECODER_PROCESSES
    from vidpipe.decode.prestart import gpu_name, nvdec_gpu
    from vidpipe.decode.procpool import DEFAULT_PROCESSES, close_pool, start_in_background

    n = DEFAULT_PROCESSES if processes is None else processes
    n = int(check_range("processes", n, low=1, high=MAX_DECODER_PROCESSES, integer=True))
    name = nvdec_gpu(device)
    if name is None:
        why = "no NVIDIA GPU for it" if gpu_name(device) is None else "PyNvVideoCodec is not installed"
        log = logger.warning if device.strip().lower().startswith("cuda") else logger.info
        log("decoder_service(device=%r): %s; no decoder process started", device, why)
        yield DecoderService(device=None, processes=0, started=False)
        return
    started = start_in_background(name, n, warm_for=None if warm_for is None else os.fspath(warm_for))
    if not started:
        logger.info("decoder_service: decoder processes of %s run already; using them", name)
    try:
        yield DecoderService(device=name, processes=n, started=started)
    finally:
        if started and not close_pool(name):
            logger.info("decoder_service: a run still uses the decoder processes of %s; "
                        "they stop with this process", name)  # fmt: skip
