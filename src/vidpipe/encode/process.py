"""``ProcessVideoWriter``: :class:`~vidpipe.encode.VideoWriter`'s interface, with the encoding in
a child process (:mod:`vidpipe.encode.child`).

Why: in the run's process, every FFmpeg call of an encoder thread (send a frame, receive each
packet, mux it) gives the GIL up and must win it back from the threads that decode, batch and
run the model; with many streams the encoders then wait on each other and on the model's thread
instead of on the CPU. Measured on an H100 with 16 CPU cores (1080p, libx264, 16 realtime
streams): in-process writers gave 111 annotated frames/s in all, far below the 480 that 16
cameras at 30 fps need (see ``docs/bench/h100/annotate``).

Here the caller's thread does what it did before (RGB -> YUV 4:2:0 on the device, an
asynchronous copy into a pinned buffer); a sender thread waits for the copy and writes the planes
into the child's stdin (one GIL hand-over per frame, in a blocking ``write``); the child encodes
and muxes. The child exits when its stdin closes, so it never outlives this process's writer,
and when this process dies by any signal (:mod:`vidpipe.lifetime`: it is started by a keeper
thread, watches a lifeline pipe and has a parent-death signal), finishing its file first.
"""

from __future__ import annotations

import json
import logging
import math
import os
import subprocess
import sys
import threading
import time
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from vidpipe.encode.child import END, FRAME, HEADER
from vidpipe.encode.targets import parse_target
from vidpipe.encode._handoff import STOP, Handoff
from vidpipe.encode._output import check_writer_args, checked_frame, checked_planes
from vidpipe.encode.nvenc import NVENC_CODECS
from vidpipe.encode.yuv import matrix_for_height, rgb_to_yuv420
from vidpipe.errors import ConfigError, SinkError
from vidpipe.lifetime.keeper import Keeper, python_env

if TYPE_CHECKING:
    from collections.abc import Mapping

    import torch

__all__ = ["ProcessVideoWriter"]

logger = logging.getLogger(__name__)

START_TIMEOUT_S = 30.0  # the child's Python start and the target's opening, beyond timeout_s


class ProcessVideoWriter:
    """Write ``(3, H, W)`` uint8 RGB frames to ``target``, encoded in a child process.

    The arguments, ``write``, ``close``, ``report`` and the errors are those of
    :class:`~vidpipe.encode.VideoWriter`, with one difference: the child opens the target, so a
    target that cannot be opened is found by :meth:`wait_ready` (or the first ``write`` or
    ``close``) instead of the constructor. Starting several writers and then waiting for them
    opens them side by side.

    ``nice``: the child lowers its own scheduling priority by this much (Unix niceness, 0-19), so
    that when the CPU is short its encoding waits rather than the process that decodes and
    detects (whose live frames would then be dropped or late); with CPU to spare it changes
    nothing. Where lowering is not allowed, the child encodes at this process's priority.
    """

    def __init__(
        self,
        target: str | os.PathLike,
        *,
        width: int,
        height: int,
        fps: float | Fraction,
        codec: str = "libx264",
        audio_from: str | None = None,
        options: "Mapping[str, str] | None" = None,
        queue_frames: int = 8,
        timeout_s: float = 10.0,
        nice: int = 0,
    ) -> None:
        if isinstance(nice, bool) or not isinstance(nice, int) or not 0 <= nice <= 19:
            raise ConfigError(f"nice={nice!r}: expected a whole number from 0 to 19")
        if codec in NVENC_CODECS:
            raise ConfigError(f"codec={codec!r}: NVENC encodes frames on the GPU in the process that has them; "
                              "use VideoWriter")
        self.width, self.height, self.fps, self.queue_frames = check_writer_args(
            width=width, height=height, fps=fps, codec=codec, queue_frames=queue_frames, timeout_s=timeout_s)
        if options is not None and any(not isinstance(k, str) or not isinstance(v, str) for k, v in options.items()):
            raise ConfigError("options: keys and values must be texts")
        self.codec = codec
        self.target = parse_target(target, codec=codec)
        self.name = self.target.name
        self.enc_width, self.enc_height = self.width + self.width % 2, self.height + self.height % 2
        self.matrix = matrix_for_height(self.enc_height)
        self._timeout_s = float(timeout_s)
        spec = {
            "target": os.fspath(target), "width": self.width, "height": self.height, "fps": str(Fraction(self.fps)),
            "codec": codec, "audio_from": None if audio_from is None else os.fspath(audio_from),
            "options": dict(options) if options else None, "queue_frames": self.queue_frames, "timeout_s": timeout_s,
            "nice": nice,
        }  # fmt: skip
        env = python_env()
        # the target (it may hold a password) goes in the child's arguments, which only this user can read
        self._keeper = Keeper(f"vidpipe-encode-keeper-{self.name}")
        try:
            self._proc = self._keeper.popen([sys.executable, "-m", "vidpipe.encode.child", json.dumps(spec)],
                                            python=True, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            bufsize=0)
        except BaseException:
            self._keeper.close()
            raise
        self._ready = threading.Event()
        self._done = threading.Event()
        self._error: str | None = None
        self._raised = False
        self._child_report: dict[str, Any] = {}
        self._handoff = Handoff(self.queue_frames, check=self._raise_failure, failed=lambda: self._error is not None,
                                waiting=self._check_stall)
        self._closed = False
        self.frames_in = 0
        self.frames_sent = 0
        self.send_s = 0.0
        self._progress = time.monotonic()  # the sender's last frame out (a stalled live target)
        self._reader = threading.Thread(target=self._read, name=f"vidpipe-encode-reader-{self.name}", daemon=True)
        self._reader.start()
        self._sender = threading.Thread(target=self._send, name=f"vidpipe-encode-sender-{self.name}", daemon=True)
        self._sender.start()

    # ---------------------------------------------------------------- the caller's side
    def wait_ready(self) -> None:
        """Wait until the child has opened the target.

        Raises:
            SinkError: it could not (the message says why), or did not start in time.
        """
        if not self._ready.wait(self._timeout_s + START_TIMEOUT_S):
            self._fail(f"the encoder process did not open the target within {self._timeout_s + START_TIMEOUT_S:g} s")
        self._raise_failure()

    def write(self, image: "torch.Tensor", *, pts: float | None = None) -> None:
        """Queue one frame: ``(3, height, width)`` uint8 RGB on any device; ``pts`` in seconds.
        Blocks only while ``queue_frames`` frames wait to go to the encoder process.

        Raises:
            ValueError: the image is not ``(3, height, width)`` uint8.
            SinkError: the encoder failed or is closed.
        """
        if self._closed:
            raise SinkError(f"{self.name}: write() after close()")
        self._raise_failure()
        image = checked_frame(self.name, image, pts, height=self.height, width=self.width,
                              padded=(self.enc_height, self.enc_width))
        self._put(rgb_to_yuv420(image, matrix=self.matrix), pts, owned=True)

    def write_yuv420(self, planes: "torch.Tensor", *, pts: float | None = None) -> None:
        """Queue one frame already in YUV 4:2:0 (:func:`~vidpipe.encode.yuv.rgb_to_yuv420` with
        :attr:`matrix`, e.g. a whole batch's frames converted in one call): ``planes`` a
        ``(enc_height * 3 // 2, enc_width)`` uint8 tensor on any device, not modified until
        it has been copied (on its CUDA stream's order, as :meth:`write`'s frames).

        Raises:
            ValueError: ``planes`` has another shape or type.
            SinkError: the encoder failed or is closed.
        """
        if self._closed:
            raise SinkError(f"{self.name}: write() after close()")
        self._raise_failure()
        self._put(checked_planes(self.name, planes, pts, height=self.enc_height, width=self.enc_width), pts,
                  owned=False)

    def _put(self, yuv: "torch.Tensor", pts: float | None, *, owned: bool) -> None:
        """Queue ``yuv`` (``owned``: made here, else the caller's, copied first when on the CPU)."""
        if yuv.is_cuda:
            item = self._handoff.to_host(yuv)
        else:
            import torch

            item = (None, yuv.contiguous() if owned else yuv.clone(memory_format=torch.contiguous_format), None)
        self._handoff.put((item, math.nan if pts is None else float(pts)))
        self.frames_in += 1

    @property
    def blocked_writes(self) -> int:
        """Times ``write`` waited (a full queue, or no free pinned buffer)."""
        return self._handoff.blocked_writes

    def _check_stall(self) -> None:
        """A live target that took no frame for ``timeout_s`` + the start allowance (the server
        stopped reading; PyAV's RTMP writes have no timeout) fails instead of blocking the caller."""
        if self.target.live and time.monotonic() - self._progress > self._timeout_s + START_TIMEOUT_S:
            self._fail(f"nothing could be sent for {self._timeout_s + START_TIMEOUT_S:g} s; the server "
                       "stopped taking the stream")
            self._proc.kill()

    def _fail(self, message: str) -> None:
        if self._error is None:
            self._error = message

    def _raise_failure(self) -> None:
        if self._error is not None and not self._raised:
            self._raised = True
            raise SinkError(self._message()) from None
        if self._error is not None:
            raise SinkError(f"{self.name}: the writer has failed (see the first error)")

    # ---------------------------------------------------------------- the threads
    def _read(self) -> None:
        """The child's messages: ready, an error, the final report."""
        try:
            for line in self._proc.stdout:
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if msg.get("ok"):
                    self._ready.set()
                elif "error" in msg:
                    self._fail(str(msg["error"]))
                elif "report" in msg:
                    self._child_report = dict(msg["report"])
        finally:
            if self._error is None and not self._child_report and not self._closed:
                self._fail(f"the encoder process ended unexpectedly (exit code {self._proc.poll()})")
            self._ready.set()
            self._done.set()

    def _send(self) -> None:
        stdin = self._proc.stdin
        try:
            while True:
                item = self._handoff.queue.get()
                if item is STOP:
                    stdin.write(HEADER.pack(math.nan, END, 0))
                    break
                data, pts = item
                if self._error is not None:
                    self._handoff.recycle(data)
                    continue
                _, buf, event = data
                if event is not None:
                    event.synchronize()
                payload = memoryview(buf.numpy()).cast("B")
                t0 = time.perf_counter()
                stdin.write(HEADER.pack(pts, FRAME, payload.nbytes))
                stdin.write(payload)
                self.send_s += time.perf_counter() - t0
                self.frames_sent += 1
                self._progress = time.monotonic()
                del payload
                self._handoff.recycle(data)  # the pinned buffer is free again
                del data  # (and the device frame it was copied from)
        except (OSError, ValueError) as exc:  # a broken pipe; a closed one
            self._done.wait(2.0)  # the child's own message says why, when it had time to say it
            self._fail(f"the encoder process stopped taking frames ({getattr(exc, 'strerror', None) or exc})")
            self._handoff.drain(lambda: self._closed)
        finally:
            try:
                stdin.close()
            except OSError:
                pass

    # ---------------------------------------------------------------- ending
    def close(self) -> None:
        """Send what is queued, let the child flush and finish the file (or stream), wait for it.
        Idempotent.

        Raises:
            SinkError: the encoder failed (raised once).
        """
        if self._closed:
            return
        self._closed = True
        self._handoff.finish(self._sender.is_alive)
        self._sender.join(self._timeout_s + max(5.0, self.queue_frames / float(self.fps)))
        try:
            self._proc.wait(timeout=self._timeout_s + 30.0)
        except subprocess.TimeoutExpired:
            self._fail("the encoder process did not finish in time; stopped")
            self._proc.kill()
            self._proc.wait()
        self._keeper.close()
        self._done.wait(5.0)
        self._reader.join(5.0)
        if self._error is None and self._proc.returncode != 0:
            self._fail(f"the encoder process exited with code {self._proc.returncode}")
        if self._error is not None and not self._raised:
            self._raised = True
            raise SinkError(self._message()) from None

    def _message(self) -> str:
        e = str(self._error)
        return e if e.startswith(self.name) else f"{self.name}: writing failed: {e}"

    def report(self) -> dict[str, Any]:
        """:meth:`VideoWriter.report <vidpipe.encode.VideoWriter.report>` of the child (after
        :meth:`close`; before it, what was sent so far), with this side's ``blocked_writes`` /
        ``blocked_ms``, ``frames_sent``, ``send_ms_per_frame`` and ``process: True``."""
        rep = dict(self._child_report) or {
            "target": self.name, "frames": self.frames_sent, "width": self.enc_width, "height": self.enc_height,
            "fps": float(self.fps), "codec": self.codec, "matrix": self.matrix, "encode_ms_per_frame": None,
        }  # fmt: skip
        rep.update(
            blocked_writes=self._handoff.blocked_writes,
            blocked_ms=round(self._handoff.blocked_s * 1000, 1),
            frames_sent=self.frames_sent,
            send_ms_per_frame=round(self.send_s * 1000 / self.frames_sent, 3) if self.frames_sent else None,
            process=True,
        )
        return rep

    def __enter__(self) -> "ProcessVideoWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

