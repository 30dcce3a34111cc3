"""One connection's reader thread: opens the input once and reads its packets into a queue.

Why a thread of its own: ``av.open`` and every read can block (up to ``open_timeout`` and
``read_timeout``, bounded by PyAV's interrupt callback); in its own thread they never keep the
live source from noticing the run's stop flag or a stall (it polls the queue every 0.2 s). When
the source gives a connection up (:meth:`PacketReader.close`), the reader ends after its current
read returns (at most ``read_timeout`` later) and closes the connection itself.

Items on :attr:`PacketReader.queue`, in order:

- ``("open", Connection)``: the input is open; whoever takes it owns one share of the
  connection and calls :meth:`~vidpipe.sources.connect.Connection.release` when done;
- ``("packet", av.Packet, Stamp)``: a video packet and when it arrived
  (:mod:`vidpipe.sources.capture`); a file played as a camera is paced first
  (:mod:`vidpipe.sources.realtime`) and stamped when released;
- ``("end", None | Exception)``: the end of the stream (``None``: a clean end, e.g. a file's)
  or why it ended (:class:`~vidpipe.sources.connect.OpenFailed` for transient failures).

The queue is bounded (``max_packets``) and the reader *waits* when it is full: compressed packets
are never dropped (a lost packet corrupts the rest of its GOP); frames are dropped downstream,
after decoding, by the pipeline's latest-wins queue.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import TYPE_CHECKING, Any

from vidpipe.sources.capture import Stamp, now_stamp
from vidpipe.sources.connect import OpenFailed, open_target
from vidpipe.sources.realtime import Pacer
from vidpipe.sources.reconnect import STEP
from vidpipe.sources.redact import redact_text

if TYPE_CHECKING:
    from vidpipe.sources.connect import Connection, Target
    from vidpipe.sources.options import LiveOptions

__all__ = ["PacketReader"]

logger = logging.getLogger(__name__)


class PacketReader:
    """Opens ``target`` and reads its video packets in a daemon thread (see the module docstring).

    Args:
        target: what to open.
        options: timeouts and transport.
        stop: the run's stop flag (ends the reader too).
        paced: release packets at the stream's own rate (files played as cameras).
        max_packets: the queue's bound.
    """

    def __init__(
        self,
        target: "Target",
        options: "LiveOptions",
        *,
        stop: threading.Event,
        paced: bool = False,
        max_packets: int = 256,
        first: bool = False,
    ) -> None:
        self.first = first  # no connection has opened yet (see open_target)
        self.target = target
        self.options = options
        self.stop = stop
        self.cancel = threading.Event()
        self.paced = paced
        self.queue: queue.Queue = queue.Queue(maxsize=max_packets)
        self.packets = 0
        self._thread = threading.Thread(target=self._run, name=f"vidpipe-live-read[{target.name}]", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Give the connection up: the thread ends after its current read and closes it."""
        self.cancel.set()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread to end; ``True`` when it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def _stopped(self) -> bool:
        return self.cancel.is_set() or self.stop.is_set()

    def _put(self, item: tuple) -> bool:
        """Queue ``item``, waiting while the queue is full; ``False`` once told to stop."""
        while not self._stopped:
            try:
                self.queue.put(item, timeout=STEP)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        try:
            conn = open_target(self.target, self.options, first=self.first)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            self._put(("end", exc))
            return
        delivered = False
        try:
            delivered = self._put(("open", conn))
            if delivered:
                self._read(conn)
        finally:
            conn.release()  # the reader's share
            if not delivered:
                conn.release()  # the consumer's share: it never got the connection
            if self._stopped:
                self._drain()

    def _read(self, conn: "Connection") -> None:
        import av

        from vidpipe.decode.probe import read_packets, to_fraction

        pacer = Pacer() if self.paced else None
        rtcp = conn.camera_epoch if self.target.scheme in ("rtsp", "rtsps") else None
        tb = to_fraction(conn.stream.time_base)
        first: int | None = None
        try:
            for packet in read_packets(conn.container, conn.stream):
                if pacer is not None and tb is not None:
                    ts = packet.dts if packet.dts is not None else packet.pts
                    if ts is not None and first is None:
                        first = ts
                    if pacer.pace(None if ts is None else float((ts - first) * tb), self.cancel, self.stop):
                        return
                stamp: Stamp = now_stamp(rtcp() if rtcp is not None else None)
                self.packets += 1
                if not self._put(("packet", packet, stamp)):
                    return
        except av.error.FFmpegError as exc:
            if not self._stopped:
                reason = "reading stopped: " + redact_text(str(getattr(exc, "strerror", None) or exc))
                self._put(("end", OpenFailed(f"{self.target.name}: {reason}", reason)))
            return
        except Exception as exc:  # noqa: BLE001 - never let the thread die silently
            if not self._stopped:
                reason = f"reading stopped: {type(exc).__name__}: {redact_text(str(exc))}"
                self._put(("end", OpenFailed(f"{self.target.name}: {reason}", reason)))
            return
        self._put(("end", None))

    def _drain(self) -> None:
        """After a stop: empty the queue, releasing a connection nobody took."""
        while True:
            try:
                item: Any = self.queue.get_nowait()
            except queue.Empty:
                return
            if item[0] == "open":
                item[1].release()
