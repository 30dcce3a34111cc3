"""Capture times of live frames: when each frame's data arrived, and the camera's own clock.

Every packet is stamped the moment the demuxer hands it over (:class:`Stamp`: UTC wall clock
``time.time()`` and ``time.monotonic()`` read together); the frame decoded from it carries that
stamp (:class:`CaptureStamps` matches frames to packets by timestamp; a frame whose timestamp
matches no packet, e.g. one without a timestamp, gets the newest packet's stamp).

``camera_time``: RTSP streams whose server sends RTCP sender reports give FFmpeg the NTP time of
their timestamps' origin (``AVFormatContext.start_time_realtime``, which PyAV exposes as
``container.start_time_realtime``, µs; set once the first report arrives, typically within a
few seconds). A frame's camera time is then that origin plus its ``pts`` in seconds. Frames
before the first report, and streams without reports (RTMP, HTTP, webcams, files), get ``None``.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass

__all__ = ["Stamp", "CaptureStamps", "now_stamp", "camera_time"]


@dataclass(frozen=True, slots=True)
class Stamp:
    """When a packet was received: ``wall`` (UTC epoch seconds) and ``mono`` (time.monotonic())."""

    wall: float
    mono: float


def now_stamp() -> Stamp:
    return Stamp(time.time(), time.monotonic())


def camera_time(epoch: float | None, pts: float | None) -> float | None:
    """The camera's clock for a frame at ``pts`` seconds, given the RTCP origin ``epoch``."""
    if epoch is None or pts is None:
        return None
    return epoch + pts


class CaptureStamps:
    """Packet stamps by packet timestamp (the last ``keep`` packets), looked up per frame."""

    def __init__(self, keep: int = 128) -> None:
        self.keep = keep
        self._by_pts: OrderedDict[int, Stamp] = OrderedDict()
        self.latest: Stamp | None = None

    def packet(self, pts: int | None, stamp: Stamp) -> None:
        self.latest = stamp
        if pts is not None:
            self._by_pts[pts] = stamp
            if len(self._by_pts) > self.keep:
                self._by_pts.popitem(last=False)

    def frame(self, pts: int | None) -> Stamp:
        """The stamp of the packet a frame at ``pts`` came from (else the newest packet's)."""
        hit = self._by_pts.pop(pts, None) if pts is not None else None
        if hit is not None:
            return hit
        return self.latest if self.latest is not None else now_stamp()

    def clear(self) -> None:
        self._by_pts.clear()
        self.latest = None
