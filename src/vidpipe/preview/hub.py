"""The latest frame of every stream, JPEG-encoded for the browsers that watch it.

::

    hub = PreviewHub()                       # one per run; close() it when done
    hub.push(0, image)                       # any thread, never blocks: keeps a reference
    with hub.watch(0) as w:                  # a browser (the MJPEG route does this)
        jpeg = w.next(timeout=1.0)           # bytes of a newer frame, or None

:meth:`PreviewHub.push` stores a reference to the newest frame of a stream (replacing the one
before) and returns: no copy, no encode, no waiting on the worker. Pass a tensor you will not write
into afterwards (a new one, e.g. an annotator's output, or ``image.clone()``); a view keeps its
whole allocation alive (a batch of decoded frames: :class:`~vidpipe.preview.stage.PreviewStage`
copies such a frame before pushing it). CUDA frames are pushed with an event recorded on the
caller's current stream; the encoder waits for it, so the frame may still be in the making.

One worker thread encodes, and only streams that someone watches (:meth:`watch`,
:meth:`snapshot`): each at most ``max_fps`` times a second, shrunk to ``max_width`` on the
frame's device, with nvJPEG for CUDA frames and libjpeg for CPU frames
(:func:`vidpipe.preview.jpeg.encode_jpeg`).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from vidpipe.types import FrameMeta

logger = logging.getLogger(__name__)

__all__ = ["PreviewHub", "Watcher"]


@dataclass(eq=False)
class _Slot:
    """One stream's state (guarded by the hub's lock)."""

    image: "torch.Tensor | None" = None
    ready: Any = None  # a CUDA event recorded at push, or None
    meta: "FrameMeta | None" = None
    seq: int = 0  # frames pushed
    jpeg: bytes | None = None
    jpeg_seq: int = 0  # the seq of the frame in ``jpeg``; 0: none yet
    jpeg_meta: "FrameMeta | None" = None
    encoded_at: float = -math.inf
    watchers: int = 0
    wanted: int = 0  # snapshots waiting
    busy: bool = False  # the worker is encoding this slot now
    failed_seq: int = 0  # the seq of a frame that could not be encoded (not retried)
    stats: dict[str, float] = field(default_factory=lambda: {"encoded": 0, "encode_s": 0.0, "errors": 0})


class Watcher:
    """One browser's view of one stream (from :meth:`PreviewHub.watch`)."""

    def __init__(self, hub: "PreviewHub", stream_id: int) -> None:
        self._hub = hub
        self.stream_id = stream_id
        self.seen = 0
        self.meta: "FrameMeta | None" = None

    def next(self, timeout: float) -> bytes | None:
        """JPEG bytes of a frame newer than the last one returned, waiting at most ``timeout``
        seconds; ``None`` on timeout or once the hub is closed."""
        hub = self._hub
        deadline = time.monotonic() + timeout
        with hub._cond:
            while True:
                slot = hub._slots.get(self.stream_id)
                if slot is not None and slot.jpeg is not None and slot.jpeg_seq > self.seen:
                    self.seen = slot.jpeg_seq
                    self.meta = slot.jpeg_meta
                    return slot.jpeg
                left = deadline - time.monotonic()
                if hub._closed or left <= 0:
                    return None
                hub._cond.wait(left)


class PreviewHub:
    """Latest frame per stream, encoded to JPEG only for streams someone watches.

    Args:
        max_fps: most JPEGs a second per stream (default 10).
        max_width: frames wider than this are shrunk first, on their device (default 640;
            ``None``: full size).
        quality: JPEG quality 1..100 (default 80).

    Thread-safe. :meth:`close` stops the worker and wakes every waiting :class:`Watcher`
    (idempotent); frames pushed after it are ignored.
    """

    def __init__(self, *, max_fps: float = 10.0, max_width: int | None = 640, quality: int = 80) -> None:
        from vidpipe.errors import ConfigError

        if not (isinstance(max_fps, (int, float)) and 0 < max_fps <= 1000):
            raise ConfigError(f"PreviewHub: max_fps={max_fps!r}; expected a number above 0 (at most 1000)")
        if max_width is not None and not (isinstance(max_width, int) and max_width >= 16):
            raise ConfigError(f"PreviewHub: max_width={max_width!r}; expected a whole number >= 16, or None")
        if not (isinstance(quality, int) and 1 <= quality <= 100):
            raise ConfigError(f"PreviewHub: quality={quality!r}; expected a whole number from 1 to 100")
        self.max_fps = float(max_fps)
        self.max_width = max_width
        self.quality = quality
        self._interval = 1.0 / self.max_fps
        self._slots: dict[int, _Slot] = {}
        self._cond = threading.Condition()
        self._wake = threading.Event()
        self._closed = False
        self._backends: set[str] = set()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ producers
    def push(self, stream_id: int, image: "torch.Tensor", *, meta: "FrameMeta | None" = None) -> None:
        """Make ``image`` (``(3, H, W)`` uint8 RGB, CPU or CUDA) the stream's latest frame.

        Keeps a reference (no copy; see the module docstring), never blocks on encoding.

        Raises:
            ValueError: ``image`` is not a non-empty ``(3, H, W)`` uint8 tensor.
        """
        import torch

        if not isinstance(image, torch.Tensor) or image.dim() != 3 or image.shape[0] != 3 or image.dtype != torch.uint8 \
                or image.shape[1] < 1 or image.shape[2] < 1:
            shape = tuple(image.shape) if isinstance(image, torch.Tensor) else type(image).__name__
            raise ValueError(f"PreviewHub.push: image must be a (3, H, W) uint8 tensor, H and W >= 1, got {shape}")
        ready = None
        if image.device.type == "cuda":
            ready = torch.cuda.Event()
            ready.record(torch.cuda.current_stream(image.device))
        with self._cond:
            if self._closed:
                return
            slot = self._slots.get(int(stream_id))
            if slot is None:
                slot = self._slots[int(stream_id)] = _Slot()
            slot.image, slot.ready, slot.meta = image, ready, meta
            slot.seq += 1
            wanted = slot.watchers > 0 or slot.wanted > 0
        if wanted:
            self._wake.set()

    def watching(self, stream_id: int) -> bool:
        """Whether a browser watches the stream now (a cheap check for producers)."""
        slot = self._slots.get(int(stream_id))
        return slot is not None and (slot.watchers > 0 or slot.wanted > 0)

    # ------------------------------------------------------------------ consumers
    def streams(self) -> tuple[int, ...]:
        """Ids of the streams that have pushed a frame, ascending."""
        with self._cond:
            return tuple(sorted(sid for sid, s in self._slots.items() if s.seq))

    def has(self, stream_id: int) -> bool:
        """Whether the stream has pushed a frame."""
        slot = self._slots.get(int(stream_id))
        return slot is not None and slot.seq > 0

    @contextmanager
    def watch(self, stream_id: int) -> Iterator[Watcher]:
        """Count a watcher of the stream while the ``with`` block runs (encoding is on meanwhile)."""
        sid = int(stream_id)
        with self._cond:
            slot = self._slots.get(sid)
            if slot is None:
                slot = self._slots[sid] = _Slot()
            slot.watchers += 1
            self._start()
        self._wake.set()
        try:
            yield Watcher(self, sid)
        finally:
            with self._cond:
                slot.watchers -= 1

    def snapshot(self, stream_id: int, *, timeout: float = 2.0) -> "tuple[bytes, FrameMeta | None] | None":
        """JPEG bytes (and the frame's meta) of the stream's latest frame, encoded now if needed;
        ``None`` when no frame comes within ``timeout`` seconds (or the hub is closed)."""
        sid = int(stream_id)
        deadline = time.monotonic() + timeout
        with self._cond:
            slot = self._slots.get(sid)
            if slot is None:
                slot = self._slots[sid] = _Slot()
            slot.wanted += 1
            self._start()
            self._wake.set()
            try:
                while True:
                    if slot.jpeg is not None and slot.jpeg_seq == slot.seq:
                        return slot.jpeg, slot.jpeg_meta
                    left = deadline - time.monotonic()
                    if self._closed or left <= 0:
                        return (slot.jpeg, slot.jpeg_meta) if slot.jpeg is not None else None
                    self._cond.wait(left)
            finally:
                slot.wanted -= 1

    def wake(self) -> None:
        """Wake every waiting :class:`Watcher` now (they re-check and, on timeout, return)."""
        with self._cond:
            self._cond.notify_all()

    def report(self) -> dict[str, Any]:
        """``{"jpeg": backends used, "streams", "encoded" (JPEGs), "encode_ms_per_frame", "errors"}``."""
        with self._cond:
            stats = [s.stats for s in self._slots.values()]
            backends = sorted(self._backends)
        encoded = int(sum(s["encoded"] for s in stats))
        seconds = sum(s["encode_s"] for s in stats)
        return {
            "jpeg": backends,
            "streams": len(stats),
            "encoded": encoded,
            "encode_ms_per_frame": round(1000 * seconds / encoded, 3) if encoded else None,
            "errors": int(sum(s["errors"] for s in stats)),
        }

    def close(self) -> None:
        """Stop the worker, drop the frames, wake the watchers (idempotent)."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            for slot in self._slots.values():
                slot.image = slot.ready = None
            self._cond.notify_all()
            thread = self._thread
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    def __enter__(self) -> "PreviewHub":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ the worker
    def _start(self) -> None:  # under the lock
        if self._thread is None and not self._closed:
            self._thread = threading.Thread(target=self._run, name="vidpipe-preview-jpeg", daemon=True)
            self._thread.start()

    def _due(self, now: float) -> tuple[list[tuple[int, _Slot]], float]:
        """Slots to encode now (marked busy) and the seconds until the next one is due."""
        todo, wait = [], 1.0
        with self._cond:
            for sid, slot in self._slots.items():
                if slot.busy or slot.image is None or slot.seq in (slot.jpeg_seq, slot.failed_seq):
                    continue
                if slot.watchers <= 0 and slot.wanted <= 0:
                    continue
                left = slot.encoded_at + self._interval - now
                if left > 0 and slot.wanted <= 0:
                    wait = min(wait, left)
                    continue
                slot.busy = True
                todo.append((sid, slot))
        return todo, wait

    def _run(self) -> None:
        from vidpipe.preview.jpeg import backend_for, encode_jpeg

        while not self._closed:
            todo, wait = self._due(time.monotonic())
            if not todo:
                self._wake.wait(wait)
                self._wake.clear()
                continue
            for sid, slot in todo:
                with self._cond:
                    image, ready, meta, seq = slot.image, slot.ready, slot.meta, slot.seq
                jpeg, took, backend, failed = None, 0.0, None, False
                try:
                    if image is not None:
                        t0 = time.perf_counter()
                        if ready is not None:
                            ready.synchronize()
                        jpeg = encode_jpeg(image, quality=self.quality, max_width=self.max_width)
                        took = time.perf_counter() - t0
                        backend = backend_for(image.device)
                except Exception as exc:  # noqa: BLE001 - a bad frame must not end the preview
                    failed = True
                    level = logging.WARNING if not slot.stats["errors"] else logging.DEBUG  # once per stream
                    logger.log(level, "preview: stream %d: JPEG encoding failed: %s: %s", sid, type(exc).__name__, exc)
                del image, ready
                with self._cond:
                    slot.busy = False
                    slot.encoded_at = time.monotonic()
                    if jpeg is not None:
                        self._backends.add(backend)  # type: ignore[arg-type]
                        slot.jpeg, slot.jpeg_seq, slot.jpeg_meta = jpeg, seq, meta
                        slot.stats["encoded"] += 1
                        slot.stats["encode_s"] += took
                    elif failed:
                        slot.stats["errors"] += 1
                        slot.failed_seq = seq  # not retried; the next frame is
                    self._cond.notify_all()
