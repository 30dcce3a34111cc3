"""A sink that hands every frame's result to a user function (the Python API's hook)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from vidpipe.sinks.base import Sink

if TYPE_CHECKING:
    from vidpipe.summary import RunSummary
    from vidpipe.types import FrameResult

__all__ = ["CallbackSink"]


class CallbackSink(Sink):
    """Calls ``fn(result)`` for each :class:`~vidpipe.types.FrameResult`, in order.

    Results are passed as they are: detections stay on the pipeline's device (no host copy).
    An exception raised by ``fn`` propagates to the pipeline unchanged. ``on_close``, if given,
    is called once with ``(summary, complete, reason)`` when the sink is closed or aborted.
    """

    def __init__(
        self,
        fn: Callable[["FrameResult"], Any],
        *,
        on_close: Callable[["RunSummary | None", bool, str | None], Any] | None = None,
    ) -> None:
        super().__init__()
        if not callable(fn):
            from vidpipe.errors import ConfigError

            raise ConfigError(f"CallbackSink needs a callable, got {type(fn).__name__}")
        self.fn = fn
        self.on_close = on_close
        self.frames = 0

    def __repr__(self) -> str:
        name = getattr(self.fn, "__qualname__", type(self.fn).__name__)
        return f"CallbackSink({name}, state={self.state!r})"

    def write(self, results: Sequence["FrameResult"]) -> None:
        self._check_open()
        for result in results:
            self.fn(result)
            self.frames += 1

    def _finalize(self, summary: "RunSummary | None", *, complete: bool, reason: str | None) -> None:
        if self.on_close is not None:
            self.on_close(summary, complete, reason)
