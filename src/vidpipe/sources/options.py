"""How live inputs are read: :class:`LiveOptions` (transport, timeouts, watchdog, reconnect pace,
queueing, pacing of files played as cameras)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from vidpipe._validate import check_choice, check_range

__all__ = ["LiveOptions", "DECODE_LATENCIES"]

#: the values of ``LiveOptions.decode_latency``
DECODE_LATENCIES = ("auto", "native", "low", "zero")


@dataclass(frozen=True)
class LiveOptions:
    """Options of live sources (cameras, stream URLs, webcams, files played at their own rate).

    Attributes:
        rtsp_transport: ``"tcp"`` (default: interleaved RTP, survives NAT and loss) or ``"udp"``.
        open_timeout: seconds to wait for a stream to open (connect, handshake, first packets).
        read_timeout: seconds a single network read may block before it is abandoned.
        stall_timeout: a stream that has *decoded* no frame for this many seconds is stalled:
            it is torn down and reconnected (cameras go quiet without closing the socket).
        reconnect_min / reconnect_max: the retry pace after a failure, rising from ``min`` to
            ``max`` seconds and staying there; retries never stop until the run ends.
        queue_frames: decoded frames held per live stream while the model is busy; when full the
            oldest is dropped (latest wins) and counted. The default, 4, is meant to absorb a
            burst (frames that arrive together after a network or scheduling hiccup): 64 streams
            on an H200 dropped 12 and 2,073 frames in two 10 s runs with 2, 5 in one run with 4.
            More frames queued trade drops for latency while the model is behind; on an H100 at
            64 streams 8 did no better than 4 (``docs/bench/h100/live-streams-2``). Frames wait
            longer only while the model is behind. Each frame queued holds a buffer of the
            stream's decoder process (NV12 1080p: 3.1 MB on the GPU).
        batch_timeout: seconds the batcher waits for more frames before running a partial batch;
            ``None``: about one frame interval of the fastest live stream (DeepStream's
            ``batched-push-timeout``).
        realtime: play files at their own frame rate, as a camera would deliver them (live
            semantics: latest wins, drops counted, capture times stamped).
        processes: decoder processes that read and decode the live streams (the run preprocesses)
            (:mod:`vidpipe.sources.live_hub`): ``0`` none (threads in this process), ``N`` that
            many, ``None`` (default) automatic: on a CUDA device, once a run has
            :data:`~vidpipe.sources.live_hub.THRESHOLD` (8) live inputs, half the cores (1 to 8);
            on the CPU none. Kept frames (``keep_frames``) come back from the processes too.
        decode_latency: when NVDEC hands a decoded frame out (:data:`vidpipe.decode.nvdec.Latency`):
            ``"auto"`` (default) is ``"zero"`` (as soon as it is decoded: 67 ms sooner than
            ``"native"`` at 30 fps) for streams that say they do not reorder frames (no
            B-frames), else ``"low"``; a ``"zero"`` stream whose frames come out of order
            after all changes to ``"low"`` at its next keyframe (logged once).
    """

    rtsp_transport: Literal["tcp", "udp"] = "tcp"
    open_timeout: float = 10.0
    read_timeout: float = 10.0
    stall_timeout: float = 15.0
    reconnect_min: float = 1.0
    reconnect_max: float = 10.0
    queue_frames: int = 4
    batch_timeout: float | None = None
    realtime: bool = False
    processes: int | None = None
    decode_latency: Literal["auto", "native", "low", "zero"] = "auto"

    def __post_init__(self) -> None:
        check_choice("rtsp_transport", self.rtsp_transport, ("tcp", "udp"))
        check_choice("decode_latency", self.decode_latency, DECODE_LATENCIES)
        for name in ("open_timeout", "read_timeout", "stall_timeout", "reconnect_min", "reconnect_max"):
            check_range(name, getattr(self, name), low=0.01, high=3600)
        if self.reconnect_max < self.reconnect_min:
            from vidpipe.errors import ConfigError

            raise ConfigError(
                f"reconnect_max={self.reconnect_max} is below reconnect_min={self.reconnect_min}; "
                "the retry pace rises from reconnect_min to reconnect_max"
            )
        check_range("queue_frames", self.queue_frames, low=1, high=1024, integer=True)
        if self.batch_timeout is not None:
            check_range("batch_timeout", self.batch_timeout, low=0.0, high=60)
        if self.processes is not None:
            check_range("processes", self.processes, low=0, high=64, integer=True)
