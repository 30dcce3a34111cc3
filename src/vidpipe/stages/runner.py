"""Runs the :class:`~vidpipe.stages.base.Stage` chain of a run over each batch of results."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from vidpipe.errors import ConfigError

if TYPE_CHECKING:
    from vidpipe.stages.base import Stage
    from vidpipe.types import FrameResult

__all__ = ["StageRunner"]

logger = logging.getLogger(__name__)

# the run's own timed steps (PipelineStats): a stage may not take one of these names
_PIPELINE_STAGES = frozenset({"decode", "preprocess", "model", "postprocess", "stages"})


class StageRunner:
    """Groups a batch's results by stream (order kept within each), passes each group through
    every stage in turn, and returns the batch in its original order.

    A stream whose ``FrameMeta.connection`` changes (a live reconnect) is reset in every stage
    before its next frame is processed; :meth:`reset` does it on demand (a stream removed).

    ``timer(name, seconds, frames)``, when given, is charged each stage's host wall time under the
    stage's name (``"track"``, ``"zones"``, ``"annotate"``, ...), so the run's statistics show
    each stage in ms per frame beside decode and model. Work a stage leaves queued on the GPU
    is charged to whoever waits for it.

    Raises:
        ConfigError: two stages with one name, or an object that is not a stage.
    """

    def __init__(
        self,
        stages: "Sequence[Stage]",
        *,
        timer: "Callable[[str, float, int], None] | None" = None,
    ) -> None:
        from vidpipe.stages.base import Stage

        names: set[str] = set()
        for s in stages:
            if not isinstance(s, Stage):
                raise ConfigError(
                    f"stages: {type(s).__name__} is not a Stage (it needs name, needs_frames, process, "
                    "reset, report and close)"
                )
            if s.name in names:
                raise ConfigError(f"stages: two stages are named {s.name!r}; names must be unique")
            names.add(s.name)
        reserved = names & _PIPELINE_STAGES
        if reserved:
            raise ConfigError(
                f"stages: {sorted(reserved)[0]!r} names a step of the pipeline itself; give the stage another name"
            )
        self.stages = tuple(stages)
        self._timer = timer
        self._connection: dict[int, int] = {}
        self._closed = False

    @property
    def needs_frames(self) -> bool:
        return any(s.needs_frames for s in self.stages)

    def __bool__(self) -> bool:
        return bool(self.stages)

    def __call__(self, results: "Sequence[FrameResult]") -> "list[FrameResult]":
        if not self.stages or not results:
            return list(results)
        groups: dict[int, list[int]] = {}
        for i, r in enumerate(results):
            groups.setdefault(r.meta.stream_id, []).append(i)
        for sid, rows in groups.items():  # a stream starting over is reset before any stage sees it
            conn = results[rows[0]].meta.connection
            if self._connection.setdefault(sid, conn) != conn:
                self._connection[sid] = conn
                self.reset(sid)
        parts: list[Sequence[FrameResult]] = [[results[i] for i in rows] for rows in groups.values()]
        for stage in self.stages:
            t0 = time.perf_counter()
            batch = getattr(stage, "process_batch", None)
            if batch is not None:  # every stream's group in one call (see Stage.process_batch)
                parts = list(batch(parts))
            else:
                parts = [stage.process(group) for group in parts]
            if self._timer is not None:
                self._timer(stage.name, time.perf_counter() - t0, len(results))
            for rows, group in zip(groups.values(), parts):
                if len(group) != len(rows):
                    raise RuntimeError(f"stage {stage.name!r} returned {len(group)} results for {len(rows)} frames")
        out: list[Any] = list(results)
        for rows, group in zip(groups.values(), parts):
            for i, r in zip(rows, group):
                out[i] = r
        return out

    def reset(self, stream_id: int) -> None:
        for s in self.stages:
            s.reset(stream_id)

    def reports(self) -> dict[str, Any]:
        """``{stage.name: stage.report()}`` for the stages with something to report."""
        out: dict[str, Any] = {}
        for s in self.stages:
            rep = s.report()
            if rep:
                out[s.name] = dict(rep)
        return out

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for s in self.stages:
            try:
                s.close()
            except Exception:  # noqa: BLE001 - one stage failing to close must not hide the others
                logger.exception("stage %r failed to close", s.name)
