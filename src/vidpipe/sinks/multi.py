"""Fan-out of one stream of results to several sinks."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from vidpipe.sinks.base import Sink

if TYPE_CHECKING:
    from vidpipe.summary import RunSummary
    from vidpipe.types import FrameResult

logger = logging.getLogger(__name__)

__all__ = ["MultiSink", "finalize_all"]


class MultiSink(Sink):
    """Writes every batch to each sink, in the order given.

    If one sink fails in :meth:`write`, every sink (the failing one included) is aborted with the
    error as reason, so the outputs already written stay valid and say they are partial; then the
    first error is raised. :meth:`close` and :meth:`abort` finalise every sink even if one fails,
    then raise the first failure (the others are logged).
    """

    def __init__(self, sinks: Iterable[Sink]) -> None:
        super().__init__()
        self.sinks: tuple[Sink, ...] = tuple(sinks)

    def __repr__(self) -> str:
        return f"MultiSink({list(self.sinks)!r}, state={self.state!r})"

    def __len__(self) -> int:
        return len(self.sinks)

    @property
    def outputs(self) -> tuple[str, ...]:
        return tuple(o for s in self.sinks for o in s.outputs)

    def write(self, results: Sequence["FrameResult"]) -> None:
        self._check_open()
        for sink in self.sinks:
            try:
                sink.write(results)
            except BaseException as exc:
                reason = f"{sink!r} failed: {type(exc).__name__}: {exc}"
                try:
                    self.abort(reason)
                except Exception as abort_exc:  # noqa: BLE001 - the write error is the one to raise
                    logger.error("while aborting after %s: %s", reason, abort_exc)
                raise

    def _finalize(self, summary: "RunSummary | None", *, complete: bool, reason: str | None) -> None:
        if complete:
            finalize_all(self.sinks, lambda sink: sink.close(summary))
        else:
            finalize_all(self.sinks, lambda sink: sink.abort(reason or "aborted", summary))


def finalize_all(sinks: "Iterable[Any]", action: "Callable[[Any], Any]") -> None:
    """``action(sink)`` for every sink, even after one fails; then raise the first failure
    (each one logged)."""
    first: BaseException | None = None
    for sink in sinks:
        try:
            action(sink)
        except Exception as exc:  # noqa: BLE001 - finalise the others, then raise the first
            logger.error("could not finalise %r: %s", sink, exc)
            first = first or exc
    if first is not None:
        raise first
