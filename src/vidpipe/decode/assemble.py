"""Batch assembly: decoded frames are copied straight into the row of the batch they belong to.

Output position ``p`` (see :mod:`vidpipe.decode.segments`) goes to row ``p % B`` of batch
``p // B``. Batch buffers come from a :class:`~vidpipe.ops.pool.BufferPool` and go back to it
once the consumer is done with them, so a long run allocates nothing after the first few batches.

Two sides, possibly on different threads:

- writers (decoder sessions) call :meth:`BatchAssembler.write`: the frame is copied into its row
  on the session's CUDA stream (the current stream), after that stream waited for the buffer's
  previous reader; after a run of copies, :meth:`BatchAssembler.seal` records one event, which
  travels with the :class:`Written` records of those frames;
- the consumer calls :meth:`BatchAssembler.add` with the records in position order (or
  :data:`~vidpipe.decode.reorder.MISSING` for frames that never came) and gets a
  :class:`~vidpipe.types.FrameBatch` when a batch is complete, after making the current CUDA
  stream wait for every writer's event. :meth:`BatchAssembler.recycle` then returns the batch's
  buffer with an event recorded on the current stream (see the stream contract in
  :mod:`vidpipe.decode.nvdec`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vidpipe.decode.reorder import MISSING
from vidpipe.types import ColorSpec, FrameBatch, FrameMeta

if TYPE_CHECKING:
    import torch

    from vidpipe.decode.sessions import FrameRef
    from vidpipe.ops.pool import Buffer, BufferPool

__all__ = ["BatchAssembler", "RowBatcher", "Written"]


@dataclass(frozen=True, slots=True)
class Written:
    """A frame copied into its batch row."""

    meta: FrameMeta
    writer: int  # id of the session that wrote it
    event: Any  # torch.cuda.Event recorded after the copy (None for CPU copies)


class _Slot:
    __slots__ = ("buffer", "waited")

    def __init__(self, buffer: "Buffer") -> None:
        self.buffer = buffer
        self.waited: set[int] = set()  # writers whose stream already waited for the last reader


class RowBatcher:
    """The consumer's side of assembly: records taken in position order (``_batch``, ``_items``),
    a batch made by ``_emit`` whenever its last row or the next batch's first record arrives."""

    batch_size: int
    _batch: int | None
    _items: list

    def add(self, position: int, item: Any) -> FrameBatch | None:
        """Take the record of ``position`` (in order); a complete batch comes back."""
        batch, row = divmod(position, self.batch_size)
        out = None
        if self._batch is not None and batch != self._batch:
            out = self._emit()
        self._batch = batch
        if item is not MISSING:
            self._items.append((row, item))
        if row == self.batch_size - 1:
            done = self._emit()
            out = done if out is None else out  # (a skipped-over batch cannot also complete here)
        return out

    def flush(self) -> FrameBatch | None:
        """The last, partly filled batch (``None`` if empty)."""
        return self._emit()

    def _emit(self) -> FrameBatch | None:
        raise NotImplementedError


class BatchAssembler(RowBatcher):
    """Batch buffers indexed by output position.

    Args:
        pool: where buffers come from (its device is where batches live).
        batch_size: rows per batch.
        row_shape, dtype: one frame's layout (``(H*3//2, W)`` uint8/uint16 or ``(3, H, W)`` uint8).
        fmt, color: the :class:`FrameBatch` format and colour of the batches.
        out_device: where yielded batches must be (a CPU pool feeding a CUDA consumer is
            uploaded asynchronously); ``None``: the pool's device.
    """

    def __init__(
        self,
        pool: "BufferPool",
        *,
        batch_size: int,
        row_shape: tuple[int, ...],
        dtype: "torch.dtype",
        fmt: str,
        color: ColorSpec | None,
        out_device: "torch.device | None" = None,
    ) -> None:
        self.pool = pool
        self.batch_size = batch_size
        self.row_shape = tuple(row_shape)
        self.dtype = dtype
        self.fmt = fmt
        self.color = color
        self.out_device = out_device if out_device is not None else pool.device
        self._slots: dict[int, _Slot] = {}
        self._lock = threading.Lock()
        # consumer state
        self._batch: int | None = None
        self._items: list[tuple[int, Written]] = []
        self._pending: list[int] = []  # batches yielded and not yet recycled
        self.bytes_h2d = 0

    # ------------------------------------------------------------------------------- writers

    def _slot(self, batch: int, stream: Any) -> _Slot:
        with self._lock:
            slot = self._slots.get(batch)
        if slot is not None:
            return slot
        # outside the lock: the pool may wait for the consumer to recycle a buffer (out of memory)
        buf = self.pool.acquire((self.batch_size, *self.row_shape), self.dtype, wait=False)
        with self._lock:
            slot = self._slots.get(batch)
            if slot is None:
                slot = self._slots[batch] = _Slot(buf)
                return slot
        self.pool.release(buf, None)  # another writer of this batch was first
        return slot

    def write(self, position: int, ref: "FrameRef", *, writer: int, stream: Any) -> None:
        """Copy ``ref`` into its row. ``stream``: the CUDA stream the copy is issued on, which
        must be the current stream (``None`` on the CPU); the first write of ``writer`` into a
        batch buffer makes it wait for the buffer's previous reader. Make the copies visible
        with :meth:`seal` before handing their records to the consumer."""
        batch, row = divmod(position, self.batch_size)
        slot = self._slots.get(batch) or self._slot(batch, stream)
        buf = slot.buffer
        if writer not in slot.waited:
            buf.wait(stream)
            slot.waited.add(writer)
        self.bytes_h2d += ref.copy_into(buf.tensor[row])

    def seal(self, stream: Any) -> Any:
        """An event recorded on ``stream`` after the copies issued so far (``None`` on the CPU):
        the consumer's stream waits for it before reading those rows."""
        if stream is None:
            return None
        import torch

        event = torch.cuda.Event()
        event.record(stream)
        return event

    # ------------------------------------------------------------------------------ consumer


    def _emit(self) -> FrameBatch | None:
        import torch

        batch, items = self._batch, self._items
        self._batch, self._items = None, []
        if batch is None:
            return None
        if not items:
            self._drop(batch)
            return None
        with self._lock:
            slot = self._slots.get(batch)
        if slot is None:  # pragma: no cover - a written item always has a slot
            return None
        data = slot.buffer.tensor
        cuda = data.device.type == "cuda"
        if cuda:
            cur = torch.cuda.current_stream(data.device)
            last: dict[int, Any] = {}
            for _, w in items:
                if w.event is not None:
                    last[w.writer] = w.event
            for ev in last.values():
                cur.wait_event(ev)
        rows = [r for r, _ in items]
        if rows == list(range(len(rows))):
            data = data[: len(rows)]
        else:  # frames missing inside the batch: gather the rows that came
            data = data.index_select(0, torch.tensor(rows, device=data.device))
        if data.device != self.out_device:
            if data.device.type == "cpu" and self.out_device.type == "cuda":
                self.bytes_h2d += data.numel() * data.element_size()
            data = data.to(self.out_device, non_blocking=True)
        self._pending.append(batch)
        return FrameBatch(data=data, frames=tuple(w.meta for _, w in items), format=self.fmt, color=self.color)

    def _drop(self, batch: int) -> None:
        with self._lock:
            slot = self._slots.pop(batch, None)
        if slot is not None:
            self.pool.release(slot.buffer, None)

    def recycle(self) -> None:
        """Return the buffers of the batches yielded so far; call when the consumer asks for the
        next batch (work it issued on the current stream is then ordered before any rewrite)."""
        if not self._pending:
            return
        event = None
        dev = self.pool.device
        if dev.type == "cuda" or self.out_device.type == "cuda":
            import torch

            event = torch.cuda.Event()
            event.record(torch.cuda.current_stream(self.out_device if self.out_device.type == "cuda" else dev))
        for batch in self._pending:
            with self._lock:
                slot = self._slots.pop(batch, None)
            if slot is not None:
                self.pool.release(slot.buffer, event)
        self._pending.clear()

    def close(self) -> None:
        """Give every buffer back (at the end, or when the consumer stops early)."""
        self._pending.extend(self._slots)
        self.recycle()
