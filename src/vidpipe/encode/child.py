"""The encoder process of :class:`~vidpipe.encode.process.ProcessVideoWriter`:
``python -m vidpipe.encode.child SPEC_JSON``.

It lowers its priority by the spec's ``nice`` first, then opens a
:class:`~vidpipe.encode.VideoWriter` (PyAV, its own thread) on the target in
``SPEC_JSON`` and feeds it the frames that arrive on stdin, so that encoding and muxing (and the
GIL hand-overs of every FFmpeg call) happen outside the process that runs the model. (Encoding
on the reading thread instead, with a pipe widened to a whole frame, measured slower on an H100:
115 against 230 annotated frames/s for 16 streams.)

Protocol. stdin: records of a 16-byte header ``<dII`` (``pts`` seconds, NaN for none; ``kind``;
``nbytes``) followed by ``nbytes`` of payload; kind 0 is a frame (YUV 4:2:0 planes, ``(enc_height
* 3 // 2) x enc_width`` bytes), kind 1 ends the video (flush, finish, report). stdout: one JSON
object per line: ``{"ok": true, ...}`` once the target is open, ``{"error": ..., "type": ...}``
when something failed (then the process exits 1), ``{"report": {...}}`` at the end. End of stdin
without kind 1 (the parent died) finishes the file with what arrived and exits. The process never
imports torch.

Lifetime: the process also watches its parent (:mod:`vidpipe.lifetime.child`: the keeper's
lifeline and a parent-death signal), so it ends within a moment of the parent's death by any
signal even when a copy of its stdin's write end lives on in a process the parent forked: it then
finishes the file with the frames it has (the MP4 stays playable) and exits.
"""

from __future__ import annotations

import json
import math
import os
import struct
import sys
import threading
from typing import Any, BinaryIO

HEADER = struct.Struct("<dII")
FRAME, END = 0, 1

__all__ = ["HEADER", "FRAME", "END", "main"]


def _say(out: BinaryIO, message: dict[str, Any]) -> None:
    try:
        out.write(json.dumps(message).encode() + b"\n")
        out.flush()
    except (BrokenPipeError, ValueError):  # the parent is gone (or closed its end): no one to tell
        pass


class _Finish:
    """The writer and who finished it: the main thread (end of the video, end of stdin, an
    error) or the watch of the parent (its death), whichever comes first; the lock keeps a
    frame's ``write`` and the finishing apart."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.writer: Any = None
        self.done = False

    def on_parent_gone(self, dead: bool) -> None:
        """The parent died (or closed the lifeline): finish the file with what arrived."""
        with self.lock:
            if self.writer is not None and not self.done:
                self.done = True
                try:
                    self.writer.close()
                except BaseException:  # noqa: BLE001 - no one is left to tell
                    pass


def _read_exact(inp: BinaryIO, view: memoryview) -> bool:
    got = 0
    while got < len(view):
        n = inp.readinto(view[got:])
        if not n:
            return False
        got += n
    return True


def _fail(out: BinaryIO, exc: BaseException) -> int:
    from vidpipe.errors import VidpipeError

    text = str(exc) if isinstance(exc, VidpipeError) else f"{type(exc).__name__}: {exc}"
    _say(out, {"error": text, "type": type(exc).__name__})
    return 1


def main(argv: list[str] | None = None) -> int:
    from vidpipe.lifetime.child import watch_from_env

    finish = _Finish()
    watch_from_env(on_gone=finish.on_parent_gone)  # first, before the codecs' threads start

    import numpy as np

    from vidpipe.encode.writer import VideoWriter

    argv = sys.argv[1:] if argv is None else argv
    spec = json.loads(argv[0])
    if spec.get("nice"):
        try:
            os.nice(int(spec["nice"]))  # before the codec's threads start: they inherit it
        except OSError:  # not allowed here: encode at the parent's priority
            pass
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    try:
        writer = VideoWriter(spec["target"], width=spec["width"], height=spec["height"], fps=spec["fps"],
                             codec=spec["codec"], audio_from=spec.get("audio_from"), options=spec.get("options"),
                             queue_frames=spec.get("queue_frames", 8), timeout_s=spec.get("timeout_s", 10.0))
    except BaseException as exc:  # noqa: BLE001 - told to the parent, which raises it
        return _fail(out, exc)
    with finish.lock:
        finish.writer = writer
    _say(out, {"ok": True, "matrix": writer.matrix})
    shape = (writer.enc_height * 3 // 2, writer.enc_width)
    header = bytearray(HEADER.size)
    try:
        while True:
            if not _read_exact(inp, memoryview(header)):
                break  # the parent is gone: finish what arrived
            pts, kind, nbytes = HEADER.unpack(header)
            if kind == END:
                break
            planes = np.empty(shape, dtype=np.uint8)
            if nbytes != planes.nbytes:
                raise ValueError(f"frame of {nbytes} bytes, expected {planes.nbytes}")
            if not _read_exact(inp, memoryview(planes).cast("B")):
                break  # the parent died mid-frame: finish what arrived
            with finish.lock:
                if finish.done:
                    break
                writer.write_yuv420(planes, pts=None if math.isnan(pts) else pts)
        with finish.lock:
            if not finish.done:
                finish.done = True
                writer.close()
    except BaseException as exc:  # noqa: BLE001
        try:
            writer.close()
        except BaseException:  # noqa: BLE001 - the first failure is the one told
            pass
        return _fail(out, exc)
    _say(out, {"report": writer.report()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
