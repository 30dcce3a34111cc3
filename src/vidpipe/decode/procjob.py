"""What a decoder process is sent to decode one plan (:mod:`vidpipe.decode.procrun` makes it,
:mod:`vidpipe.decode.procworker` runs it): a typed, frozen message instead of a dict."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from vidpipe.decode.base import DecodeOptions, StreamInfo
    from vidpipe.decode.segments import DecodePlan

__all__ = ["ProcessJob"]


@dataclass(frozen=True)
class ProcessJob:
    """One decode run's settings for a decoder process.

    Attributes:
        id: the run's job number (every message about it carries it).
        kind: the backend the process builds: ``"nvdec"`` or ``"pyav"``.
        info, plan, options, stream_id: the stream, its segment plan and the frame selection.
        batch_size: frames per ring slot.
        ring: the id of the ring of batch buffers the frames go into.
        sessions: decoding threads (sessions) in this process.
        device: NVDEC's CUDA device (``"cuda:0"``); ``None`` for PyAV.
        fallback: NVDEC: decode a failing segment again with PyAV.
        threads: PyAV: FFmpeg threads per session (``None``: its default).
    """

    id: int
    kind: Literal["nvdec", "pyav"]
    info: "StreamInfo"
    plan: "DecodePlan"
    options: "DecodeOptions"
    stream_id: int
    batch_size: int
    ring: int
    sessions: int
    device: str | None = None
    fallback: bool = False
    threads: int | None = None
