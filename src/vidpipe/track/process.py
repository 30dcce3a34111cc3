""":class:`TrackerProcess`: a :class:`~vidpipe.track.book.TrackBook` in a helper process
(:mod:`vidpipe.track.child`), so that tracking runs beside the run's process instead of on its
thread.

Why: ByteTrack costs about 0.1-0.25 ms of Python per frame whatever the number of detections
(numpy's per-call cost); on the thread that iterates a GPU run that is time the model's loop
waits (measured on an H200, real 1080p street footage: 2,876 frames/s untracked, 1,777 tracked,
0.62x). In a process of its own the tracker's work overlaps the next batch's detection and takes
no turns at the run's GIL; the run's thread only packs each batch's detections (one host copy)
and unpacks the ids.

The child is started by a :class:`~vidpipe.lifetime.keeper.Keeper` (it dies with this process
by any signal) and talks over a socket pair: requests and replies in order, numbered. Where the
platform allows, the requests and replies themselves go through shared memory
(:class:`~vidpipe.track.mailbox.Mailbox`) and the socket carries only what does not fit and the
control messages: the run's thread then makes no system call per batch, and so does not give
its GIL away to the run's other threads twice a batch (what tracking cost it before).
"""

from __future__ import annotations

import logging
import pickle
import socket
import subprocess
import sys
import time
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from vidpipe.lifetime.keeper import Keeper, python_env

if TYPE_CHECKING:
    from vidpipe.track.book import PackedFrames, StreamIds
    from vidpipe.track.compiled import Engine
    from vidpipe.track.mailbox import Mailbox
    from vidpipe.track.config import TrackConfig

__all__ = ["TrackerProcess", "TrackerProcessError", "START_TIMEOUT_S", "FD_ENV", "MAILBOX_ENV"]

logger = logging.getLogger(__name__)

#: the environment variable with the descriptor of the child's end of the socket
FD_ENV = "VIDPIPE_TRACK_FD"
#: the environment variable with the descriptor of the shared memory (:class:`~vidpipe.track.mailbox.Mailbox`)
MAILBOX_ENV = "VIDPIPE_TRACK_MAILBOX_FD"

#: seconds the child may take to start (Python, numpy, the compiled tracker: ~10 s the first time on
#: a machine, then loaded from numba's cache) and say hello
START_TIMEOUT_S = 60.0


class TrackerProcessError(RuntimeError):
    """The helper process could not start, died, or failed on a request (the message says which)."""


class TrackerProcess:
    """A tracker child for one run's :class:`~vidpipe.track.stage.TrackerStage` (one thread
    calls :meth:`request` and :meth:`reply`; :meth:`close` from any thread).

    The child is started here and works on while the caller goes on; :meth:`wait_started` (or
    the first :meth:`request`) waits for it to be ready.

    Raises:
        TrackerProcessError: the child could not be started.
    """

    def __init__(self, config: "TrackConfig", *, mailbox: "bool | Mailbox" = True, engine: "Engine" = "auto") -> None:
        from multiprocessing.connection import Connection

        from vidpipe.track.mailbox import Mailbox, supported

        self._keeper = Keeper("vidpipe-track-keeper")
        self._proc: subprocess.Popen | None = None
        self._replies: dict[int, tuple] = {}
        self._seq = 0
        self._closed = False
        self._started = False  # its hello came
        self._box: Mailbox | None = None
        if isinstance(mailbox, Mailbox):
            self._box = mailbox
        elif mailbox and supported():
            try:
                self._box = Mailbox()
            except OSError as exc:  # no memfd: the socket carries everything
                logger.debug("no shared memory for the tracker process (%s)", exc)
        mine, theirs = socket.socketpair()
        try:
            env = python_env()
            env[FD_ENV] = str(theirs.fileno())
            fds = [theirs.fileno()]
            if self._box is not None:
                env[MAILBOX_ENV] = f"{self._box.fd},{self._box.request_bytes},{self._box.reply_bytes}"
                fds.append(self._box.fd)
            self._proc = self._keeper.popen([sys.executable, "-m", "vidpipe.track.child"], python=True, env=env,
                                            stdin=subprocess.DEVNULL, pass_fds=tuple(fds))  # fmt: skip
        except BaseException:
            mine.close()
            self._keeper.close()
            if self._box is not None:
                self._box.close()
            raise
        finally:
            theirs.close()
        self._conn = Connection(mine.detach())
        self.pid = self._proc.pid
        # a stage dropped without close() still stops its child
        self._finalizer = weakref.finalize(self, _stop, self._conn, self._proc, self._keeper, self._box)
        self._t0 = time.perf_counter()
        try:
            self._conn.send(("config", config, engine))
        except OSError as exc:
            self.close()
            raise TrackerProcessError(f"the tracker process exited while starting (exit code {self._code()})") from exc

    def wait_started(self) -> None:
        """Wait for the child's hello (it imports numpy: a fraction of a second, which overlaps
        the run's warm-up when the stage is made before the run starts).

        Raises:
            TrackerProcessError: it exited, or did not start within :data:`START_TIMEOUT_S`.
        """
        if self._started:
            return
        try:
            if not self._conn.poll(max(0.0, START_TIMEOUT_S - (time.perf_counter() - self._t0))):
                raise TrackerProcessError(f"the tracker process did not start within {START_TIMEOUT_S:g} s")
            hello = self._conn.recv()
            if hello[0] != "hello":
                raise TrackerProcessError(f"unexpected first message from the tracker process: {hello[0]!r}")
        except (EOFError, OSError) as exc:
            self.close()
            raise TrackerProcessError(f"the tracker process exited while starting (exit code {self._code()})") from exc
        except BaseException:
            self.close()
            raise
        self._started = True
        logger.debug("tracker process %d ready %.2f s after it was started", self.pid, time.perf_counter() - self._t0)

    def request(self, resets: Sequence[int], groups: "Sequence[tuple[PackedFrames, int]]") -> int:
        """Send one batch: forget the streams in ``resets``, then track each ``(frames,
        first_id)``. Returns the request's number (for :meth:`reply`).

        Raises:
            TrackerProcessError: the child is gone (or never started).
        """
        self.wait_started()
        self._seq += 1
        msg = ("track", self._seq, list(resets), list(groups))
        try:
            if self._box is None:
                self._conn.send(msg)
            else:
                data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
                if self._box.fits(data, reply=False):
                    self._box.put(self._seq, data, reply=False)  # no system call
                else:
                    self._conn.send_bytes(data)  # first, then its mark
                    self._box.put(self._seq, None, reply=False)
        except (OSError, ValueError) as exc:
            raise self._gone() from exc
        return self._seq

    def reply(self, seq: int) -> "list[StreamIds]":
        """Request ``seq``'s results, one per group, waiting for them.

        Raises:
            TrackerProcessError: the child died or failed on the request.
        """
        try:
            if self._box is not None:
                kind, _, payload = self._from_box(seq)
            else:
                while seq not in self._replies:
                    self._take()
                kind, _, payload = self._replies.pop(seq)
        except (EOFError, OSError, ValueError, RuntimeError) as exc:  # RuntimeError: a mailbox slot out of step
            raise self._gone() from exc
        if kind == "error":
            raise TrackerProcessError(f"the tracker process failed: {payload}")
        return payload

    def _from_box(self, seq: int) -> tuple:
        """Reply ``seq`` from the mailbox, waiting for it (short sleeps; the child's exit is
        checked every few hundred)."""
        assert self._box is not None
        polls = 0
        while self._box.replied() < seq:
            polls += 1
            if polls % 256 == 0 and (self._proc is None or self._proc.poll() is not None):
                raise EOFError("the tracker process is gone")
            time.sleep(0.0001 if polls < 2048 else 0.001)
        data = self._box.get(seq, reply=True)
        msg = self._conn.recv() if data is None else pickle.loads(data)
        if msg[1] != seq:
            raise ValueError(f"the tracker process answered request {msg[1]}, not {seq}")
        return msg

    def _take(self) -> None:
        msg = self._conn.recv()
        self._replies[msg[1]] = msg

    def _code(self) -> "int | None":
        if self._proc is None:
            return None
        try:
            return self._proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return None

    def _gone(self) -> TrackerProcessError:
        return TrackerProcessError(f"the tracker process exited (exit code {self._code()})")

    def close(self) -> None:
        """Stop the child (it finishes nothing: tracks are in-memory state) and wait for it.
        Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._finalizer()


def _stop(conn: Any, proc: "subprocess.Popen | None", keeper: Keeper, box: "Mailbox | None" = None) -> None:
    try:
        conn.send(("close",))
    except Exception:  # noqa: BLE001 - gone already
        pass
    if proc is not None:
        try:
            proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            try:
                proc.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                logger.warning("tracker process %d did not exit", proc.pid)
    try:
        conn.close()
    except Exception:  # noqa: BLE001
        pass
    if box is not None:
        box.close()
    keeper.close()
