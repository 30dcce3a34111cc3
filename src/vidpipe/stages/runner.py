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

__all__ = ["StageRunner", "Ticket"]

logger = logging.getLogger(__name__)

# the run's own timed steps (PipelineStats): a stage may not take one of these names
_PIPELINE_STAGES = frozenset({"decode", "preprocess", "model", "postprocess", "stages"})


class StageRunner:
    """Groups a batch's results by stream (order kept within each), passes each group through
    every stage in turn, and returns the batch in its original order.

    A stream whose ``FrameMeta.connection`` changes (a live reconnect) is reset in every stage
    before its next frame is processed; :meth:`reset` does it on demand (a stream removed).

    A stage with a ``submit`` method works elsewhere (a helper process): :meth:`submit` starts a
    batch and returns once that stage has it, :meth:`complete` waits for it and runs the rest, so
    the caller overlaps the stage's work with its own (:class:`~vidpipe.pipeline.DetectionRun`
    detects the next batch meanwhile); calling the runner does both at once.

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
        self._open: list[Ticket] = []  # submitted, not completed (in order)
        self._closed = False

    @property
    def needs_frames(self) -> bool:
        return any(s.needs_frames for s in self.stages)

    def __bool__(self) -> bool:
        return bool(self.stages)

    def __call__(self, results: "Sequence[FrameResult]") -> "list[FrameResult]":
        """Every stage on ``results`` (a batch, any streams), waiting for them."""
        return self.complete(self.submit(results))

    def submit(self, results: "Sequence[FrameResult]") -> "Ticket":
        """Start the stages on a batch: the stages run in order up to the first one with a
        ``submit`` method (see :class:`~vidpipe.stages.base.Stage`), which is handed the batch and
        left working (a helper process); :meth:`complete` takes its result and runs the rest.
        So the caller can detect the next batch meanwhile."""
        ticket = Ticket(results)
        if not self.stages or not results:
            return ticket
        groups: dict[int, list[int]] = {}
        for i, r in enumerate(results):
            groups.setdefault(r.meta.stream_id, []).append(i)
        for sid, rows in groups.items():  # a stream starting over is reset before any stage sees it
            conn = results[rows[0]].meta.connection
            if self._connection.setdefault(sid, conn) != conn:
                self._connection[sid] = conn
                ticket.resets.append(sid)  # each stage: right before it takes this batch
        ticket.rows = list(groups.values())
        ticket.parts = [[results[i] for i in rows] for rows in ticket.rows]
        self._open.append(ticket)
        self._advance(ticket, wait=False)
        return ticket

    def working(self, ticket: "Ticket") -> bool:
        """Whether a stage is working on the ticket's batch elsewhere (:meth:`complete` may
        wait for it). The stage is not asked: a poll costs a system call."""
        return ticket.pending is not None

    def complete(self, ticket: "Ticket") -> "list[FrameResult]":
        """The batch of ``ticket`` after every stage, in its original order (tickets are
        completed in the order they were submitted)."""
        if ticket.rows is None:
            return list(ticket.results)
        self._advance(ticket, wait=True)
        self._open.remove(ticket)
        for sid in ticket.after:  # reset() while this batch was still in the stages
            self.reset(sid)
        out: list[Any] = list(ticket.results)
        for rows, group in zip(ticket.rows, ticket.parts):
            for i, r in zip(rows, group):
                out[i] = r
        return out

    def _advance(self, ticket: "Ticket", *, wait: bool) -> None:
        """Run the ticket's stages from where it stands: up to the first stage with ``submit``
        (left working: ``wait=False``), or all of them."""
        n = len(ticket.results)
        if ticket.pending is not None:
            stage = self.stages[ticket.next - 1]
            t0 = time.perf_counter()
            ticket.parts = list(ticket.pending.result())
            ticket.pending = None
            self._charge(stage, ticket, time.perf_counter() - t0, n)
        while ticket.next < len(self.stages):
            stage = self.stages[ticket.next]
            ticket.next += 1
            for sid in ticket.resets:  # after the earlier batches, before this one (in every stage)
                stage.reset(sid)
            t0 = time.perf_counter()
            start = getattr(stage, "submit", None)
            if start is not None:  # every stream's group at once, working elsewhere
                ticket.pending = start(ticket.parts)
                if not wait and not getattr(ticket.pending, "done", False):  # (done: the work was done in submit)
                    self._charge(stage, ticket, time.perf_counter() - t0, 0, check=False)
                    return
                ticket.parts = list(ticket.pending.result())  # type: ignore[union-attr]
                ticket.pending = None
            else:
                batch = getattr(stage, "process_batch", None)
                if batch is not None:  # every stream's group of a batch in one call (see Stage.process_batch)
                    ticket.parts = list(batch(ticket.parts))
                else:
                    ticket.parts = [stage.process(group) for group in ticket.parts]
            self._charge(stage, ticket, time.perf_counter() - t0, n)

    def _charge(self, stage: "Stage", ticket: "Ticket", seconds: float, frames: int, *, check: bool = True) -> None:
        """Charge ``stage`` its host time; check it returned one result per frame."""
        if self._timer is not None:
            self._timer(stage.name, seconds, frames)
        if not check:
            return
        for rows, group in zip(ticket.rows or (), ticket.parts):
            if len(group) != len(rows):
                raise RuntimeError(f"stage {stage.name!r} returned {len(group)} results for {len(rows)} frames")

    def warm_up(self) -> None:
        """Before the run's clock starts: each stage's optional ``warm_up()`` (a helper process
        it started waits until it is ready)."""
        for s in self.stages:
            warm = getattr(s, "warm_up", None)
            if warm is not None:
                warm()

    def reset(self, stream_id: int) -> None:
        """Reset ``stream_id`` in every stage: at once, or once the batches submitted and not yet
        completed have been through every stage (so no stage sees a stream's old frames after
        its reset)."""
        if self._open:
            self._open[-1].after.append(stream_id)
            return
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


class Ticket:
    """A batch going through a :class:`StageRunner` (:meth:`StageRunner.submit`)."""

    __slots__ = ("results", "rows", "parts", "next", "pending", "resets", "after")

    def __init__(self, results: "Sequence[FrameResult]") -> None:
        self.results = results
        self.rows: list[list[int]] | None = None  # per stream: the batch positions of its frames
        self.parts: list[Sequence[FrameResult]] = []  # per stream: its frames, as the stages left them
        self.next = 0  # the next stage to run
        self.pending: Any = None  # the handle of a stage working elsewhere (Stage.submit)
        self.resets: list[int] = []  # streams starting over with this batch (a new connection)
        self.after: list[int] = []  # streams to reset in every stage once this batch is through
