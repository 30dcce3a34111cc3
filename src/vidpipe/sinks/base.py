"""The sink interface: where per-frame results go at the end of the pipeline.

Life cycle::

    sink = TableSink("dets.parquet", names=model.names)
    with sink:                         # an exception inside -> sink.abort(reason)
        for batch in results:          # batches of FrameResult, in order per source
            sink.write(batch)
        sink.close(summary)            # finalise: the file's end + metadata with the run summary

Semantics shared by every sink:

- :meth:`Sink.write` takes a *batch* of :class:`~vidpipe.types.FrameResult` (detections possibly
  on the GPU). File sinks move a batch to the host in one copy, never one per frame.
- :meth:`Sink.close` finalises the output of a finished run (its metadata status follows the run
  summary: complete, partial or failed). :meth:`Sink.abort` finalises what was written so far and
  marks the output *partial*: after Ctrl-C or an error the output exists, is a valid file of the
  rows written, and says it is incomplete and why. Frames still in flight in earlier stages are
  not in it (the CLI stops the run first, so that every detected frame is written).
- Both are idempotent: whichever comes first wins, later calls do nothing, so a pipeline may call
  ``close(summary)`` and still leave the ``with`` block safely.
- Leaving ``with sink:`` normally closes the sink if it is still open; leaving it with an
  exception (``KeyboardInterrupt`` included) aborts it, and the exception propagates unchanged.
- A sink is used by one thread at a time (the pipeline's sink stage); it is not thread-safe.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Literal

from vidpipe.errors import SinkError

if TYPE_CHECKING:
    from vidpipe.summary import RunSummary
    from vidpipe.types import FrameResult

logger = logging.getLogger(__name__)

__all__ = ["Sink", "SinkState"]

SinkState = Literal["open", "closed", "aborted"]


class Sink(ABC):
    """Base class of every output. Subclasses implement :meth:`write` and :meth:`_finalize`."""

    def __init__(self) -> None:
        self._state: SinkState = "open"
        self._abort_reason: str | None = None

    # -- interface -----------------------------------------------------------------------------

    @abstractmethod
    def write(self, results: Sequence["FrameResult"]) -> None:
        """Consume a batch of per-frame results (possibly empty), in order per source.

        Raises:
            SinkError: the sink is already finalised, or the output cannot be written.
        """

    @abstractmethod
    def _finalize(self, summary: "RunSummary | None", *, complete: bool, reason: str | None) -> None:
        """Make the output final: complete (``close``) or partial with ``reason`` (``abort``)."""

    @property
    def outputs(self) -> tuple[str, ...]:
        """Paths this sink writes (final names; empty for sinks without files)."""
        return ()

    # -- life cycle ----------------------------------------------------------------------------

    @property
    def state(self) -> SinkState:
        return self._state

    @property
    def closed(self) -> bool:
        """True once :meth:`close` or :meth:`abort` ran (whether or not it succeeded)."""
        return self._state != "open"

    def _check_open(self) -> None:
        if self._state != "open":
            raise SinkError(f"{self!r} is {self._state}; it cannot take more results")

    def close(self, summary: "RunSummary | None" = None) -> None:
        """Finalise a complete output, storing ``summary`` in its metadata. Idempotent."""
        if self._state != "open":
            return
        self._state = "closed"
        self._finalize(summary, complete=True, reason=None)

    def abort(self, reason: str, summary: "RunSummary | None" = None) -> None:
        """Finalise what was written so far, marked partial with ``reason``. Idempotent."""
        if self._state != "open":
            return
        self._state = "aborted"
        self._abort_reason = reason
        self._finalize(summary, complete=False, reason=reason)

    def __enter__(self) -> "Sink":
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self.close()
            return
        reason = "interrupted (KeyboardInterrupt)" if isinstance(exc, KeyboardInterrupt) else (
            f"{type(exc).__name__}: {exc}"
        )
        try:
            self.abort(reason)
        except Exception as abort_exc:  # noqa: BLE001 - keep the original exception propagating
            logger.error("could not finalise %r after %s: %s", self, reason, abort_exc)
