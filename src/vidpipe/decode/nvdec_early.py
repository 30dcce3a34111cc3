"""NVDEC sessions started before PyTorch is imported: a command's and a decoder process's first
seconds.

A decoder process (:mod:`vidpipe.decode.procworker`) started for a long file used to import
PyTorch (2-5 s, while the command and the other processes import it too), start CUDA, and only
then start its share of the file's NVDEC sessions (about 50 ms each, one at a time in the
driver) before saying hello; ``vidpipe detect`` on a shorter file, decoded in the command's own
process, started them during its decode's first second (:mod:`vidpipe.decode.prestart`). The
sessions need a CUDA context and a stream, not PyTorch. This module takes the GPU's primary
context (the one PyTorch's runtime binds later, so the sessions and PyTorch share it) and one
non-blocking stream per session from the CUDA driver (:mod:`vidpipe.decode.cuda_driver`), and
starts the sessions on them, in a thread beside the import (in the decoder process or in the
command). Each session goes to the process's session pool (:mod:`vidpipe.decode.nvdec_pool`) as
soon as it is ready; the decoder that takes it wraps its stream in a ``torch.cuda.ExternalStream``
once PyTorch is imported, or, in a decoder process (which never imports it), in a
:class:`~vidpipe.decode.cuda_driver.DriverStream`
(:meth:`~vidpipe.decode.nvdec.NvdecSession.adopt_stream`).

The streams live as long as the process: a stream is never destroyed under a decoder that may
still use it (a CUDA error inside PyNvVideoCodec ends the process), and there are only as many as
the sessions started here.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from vidpipe._capture_turns import driver_work
from vidpipe.decode.cuda_driver import new_stream, use_primary_context

if TYPE_CHECKING:
    from vidpipe.decode.base import StreamInfo

__all__ = ["pool_sessions"]

logger = logging.getLogger(__name__)


def pool_sessions(info: "StreamInfo", gpu: int, count: int, *, stop: "threading.Event | None" = None) -> int:
    """Start ``count`` NVDEC sessions for ``info``'s kind of stream on GPU ``gpu`` without
    PyTorch, each on a stream of its own (:func:`new_stream`, in GPU ``gpu``'s primary context),
    fed the file's first keyframe and drained as :func:`~vidpipe.decode.nvdec.warm_sessions`
    does, and put each in the process's pool as soon as it is ready: the decoder that takes one
    gives it its PyTorch stream (:meth:`~vidpipe.decode.nvdec.NvdecSession.adopt_stream`). Starts
    no more once ``stop`` is set (the one being started is finished and pooled). Returns how many
    were pooled. Raises where the driver, PyNvVideoCodec or the file fail (those pooled before
    the failure stay pooled: the decode starts the rest)."""
    from vidpipe.decode.nvdec import NvdecSession, primed_sessions

    with driver_work():  # each driver step of this thread: not during a CUDA graph's capture
        use_primary_context(gpu)
    pooled = 0
    sessions = primed_sessions(info, count, lambda: NvdecSession(info, gpu, stream=new_stream()))
    try:
        while True:
            with driver_work():
                sess = next(sessions, None)  # one session's start (~50 ms)
            if sess is None:
                break
            sess.close()  # drained and healthy: into the pool
            pooled += 1
            if stop is not None and stop.is_set():
                break
    finally:
        sessions.close()
    return pooled
