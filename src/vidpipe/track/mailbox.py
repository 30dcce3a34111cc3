""":class:`Mailbox`: the tracker child's requests and replies in shared memory, so that the run's
thread makes no system call to hand a batch over or to take its ids back.

Why: on the thread that iterates a GPU run, every system call (a socket's write or read) lets the
run's other threads (decoder receivers) take the GIL, and winning it back is what tracking cost
that thread: on an H200, 0.05 ms a frame, 0.002 ms of it CPU (``docs/bench/h200/track``).

Layout of the shared memory (an anonymous ``memfd``, gone with the last process that maps it):
a header of two numbers, the last request written and the last reply written, then
:data:`SLOTS` slots; request ``n`` and its reply use slot ``n % SLOTS``, each part holding its
number, its length and its pickled bytes. The writer fills a part first and then raises the
header's number; the reader reads the header first. x86-64 makes one process's stores visible to
another in program order (TSO), which this relies on, so the mailbox is used only there
(:func:`supported`); elsewhere the control socket carries everything. A payload larger than its
part (embeddings, thousands of detections) goes over the socket; its part is then marked
:data:`ON_SOCKET`.

At most ``SLOTS - 1`` requests may be outstanding (the run has up to three: batch N is tracked
while N+1 and N+2 are detected, :data:`vidpipe.pipeline.STAGED_BATCHES`).
"""

from __future__ import annotations

import mmap
import os
import platform
import struct

__all__ = ["Mailbox", "ON_SOCKET", "SLOTS", "supported"]

#: slots in the ring (requests outstanding at most: ``SLOTS - 1``)
SLOTS = 8
#: the length that says "this payload went over the socket"
ON_SOCKET = (1 << 64) - 1
_HEADER = 64
_NUM = struct.Struct("<Q")
_PART = struct.Struct("<QQ")  # number, length


def supported() -> bool:
    """Whether the mailbox may be used here: Linux (``memfd_create``) on x86-64."""
    return hasattr(os, "memfd_create") and platform.machine().lower() in ("x86_64", "amd64")


class Mailbox:
    """The shared memory of one tracker child (see the module's text).

    Args:
        fd: the memfd to map (the child's side); ``None``: make one (the parent's side).
        request_bytes, reply_bytes: the largest pickled request and reply a slot holds.
    """

    def __init__(self, fd: int | None = None, *, request_bytes: int = 1 << 20, reply_bytes: int = 256 << 10) -> None:
        self.request_bytes, self.reply_bytes = request_bytes, reply_bytes
        self._slot = _PART.size * 2 + request_bytes + reply_bytes
        size = _HEADER + SLOTS * self._slot
        self.owner = fd is None
        if fd is None:
            fd = os.memfd_create("vidpipe-track", os.MFD_CLOEXEC)  # the child gets it through pass_fds
            os.ftruncate(fd, size)
        self.fd = fd
        self._mm = mmap.mmap(fd, size)

    # ------------------------------------------------------------------ numbers
    def requested(self) -> int:
        """The number of the last request written."""
        return _NUM.unpack_from(self._mm, 0)[0]

    def replied(self) -> int:
        """The number of the last reply written."""
        return _NUM.unpack_from(self._mm, 8)[0]

    # ------------------------------------------------------------------ parts
    def _offset(self, seq: int, reply: bool) -> int:
        base = _HEADER + (seq % SLOTS) * self._slot
        return base + _PART.size + self.request_bytes if reply else base

    def put(self, seq: int, data: bytes | None, *, reply: bool) -> None:
        """Write request (or reply) ``seq``: its bytes, or ``None`` for "on the socket" (send it
        there first), then raise the header's number."""
        off = self._offset(seq, reply)
        if data is None:
            _PART.pack_into(self._mm, off, seq, ON_SOCKET)
        else:
            if len(data) > (self.reply_bytes if reply else self.request_bytes):
                raise ValueError(f"{len(data)} bytes do not fit the mailbox's slot")
            start = off + _PART.size
            self._mm[start : start + len(data)] = data
            _PART.pack_into(self._mm, off, seq, len(data))
        _NUM.pack_into(self._mm, 8 if reply else 0, seq)

    def fits(self, data: bytes, *, reply: bool) -> bool:
        return len(data) <= (self.reply_bytes if reply else self.request_bytes)

    def get(self, seq: int, *, reply: bool) -> bytes | None:
        """Request (or reply) ``seq``'s bytes, ``None`` when it went over the socket.

        Raises:
            RuntimeError: the slot holds another number (more than ``SLOTS - 1`` outstanding).
        """
        off = self._offset(seq, reply)
        got, n = _PART.unpack_from(self._mm, off)
        if got != seq:
            raise RuntimeError(f"the tracker mailbox's slot holds message {got}, not {seq}")
        if n == ON_SOCKET:
            return None
        start = off + _PART.size
        return self._mm[start : start + n]

    def close(self) -> None:
        """Unmap and close the descriptor. Idempotent."""
        if self._mm is not None:
            self._mm.close()
            self._mm = None  # type: ignore[assignment]
            os.close(self.fd)
