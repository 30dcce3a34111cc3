"""The contract of a step that runs after detection: :class:`Stage`, and what stages emit
(:class:`Event`).

A stage sees the results of **one stream at a time, in frame order** (a tracker, line and zone
counting, crops for a second model, drawing, an encoder all plug in the same way). The
pipeline's :class:`~vidpipe.stages.runner.StageRunner` groups each batch of results by stream,
calls the stages in the order given, and hands the results on in the batch's order. A stage
returns the results it was given, in the same order and number, usually enriched copies
(``dataclasses.replace``): detections with ``track_ids``, ``events`` appended.

State is per stream: :meth:`Stage.reset` is called when a stream starts over (a live stream's
new connection, shown by a new ``FrameMeta.connection``; a stream removed from the run), and
before nothing else. Stages run on the thread that iterates the run; they must keep up with it
(vectorise per frame, never a device->host copy per detection), or work elsewhere (``submit``,
below: the tracker's helper process).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from vidpipe.types import FrameResult

__all__ = ["Event", "EventKind", "PendingGroups", "Stage"]

EventKind = Literal["enter", "leave", "cross", "dwell"]


@dataclass(frozen=True, slots=True)
class Event:
    """Something that happened to one tracked object in one frame.

    Attributes:
        kind: ``"enter"`` / ``"leave"`` (a zone), ``"cross"`` (a line), ``"dwell"`` (in a zone
            for longer than the zone's threshold; once per track and visit).
        name: the zone's or line's name.
        stream_id, source: the stream (``source`` credentials masked, as in ``FrameMeta``).
        frame: the frame's index in its stream; ``pts``: its time in the stream, seconds.
        time: UTC wall clock, seconds since the epoch: a live frame's capture time, else the
            time the result was made.
        track_id: the object's track id; ``class_id`` / ``class_name``: its class.
        direction: for ``"cross"``: ``"in"`` or ``"out"`` (which side of the line it went to);
            else ``None``.
        dwell_s: seconds in the zone so far (``"dwell"`` and ``"leave"``), else ``None``.
    """

    kind: EventKind
    name: str
    stream_id: int
    source: str
    frame: int
    pts: float | None
    time: float
    track_id: int
    class_id: int
    class_name: str
    direction: Literal["in", "out"] | None = None
    dwell_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able, one flat mapping (the events table's row)."""
        return {f: getattr(self, f) for f in self.__dataclass_fields__}


class PendingGroups(Protocol):
    """What a stage's optional ``submit`` returns: the groups of a batch being processed elsewhere."""

    def result(self) -> "Sequence[Sequence[FrameResult]]":
        """The groups, processed (as ``Stage.process_batch`` returns them); waits if need be."""
        ...

    # Optional: ``done: bool``, true when the stage did the work in ``submit`` after all (the
    # tracker, when its trackers run inline): the runner then takes the result at once instead of
    # holding the batch back while the next ones are detected (it would only add latency).


@runtime_checkable
class Stage(Protocol):
    """A step after detection (see the module docstring).

    Attributes:
        name: short and unique within a run (``"track"``, ``"zones"``); names its report.
        needs_frames: the stage reads ``FrameResult.image`` (the decoded frame): the pipeline
            then keeps each frame until the stages are done with it.
    """

    name: str
    needs_frames: bool

    def process(self, results: "Sequence[FrameResult]") -> "Sequence[FrameResult]":
        """Results of one stream, consecutive frames in order -> the same frames, same order."""
        ...

    # Optional: ``process_batch(groups: Sequence[Sequence[FrameResult]]) -> Sequence[Sequence[FrameResult]]``.
    # A stage that has it gets every stream's group of a batch in one call (each group one
    # stream's consecutive frames in order, as for process; the same groups back, same order and
    # lengths), e.g. to draw the frames of all streams in one pass on the GPU. The runner then
    # calls it instead of process.
    #
    # Optional: ``submit(groups) -> PendingGroups``: the same groups, but the stage only starts
    # the work (in a helper process, say) and returns at once; the handle's ``result()`` gives the
    # groups back as ``process_batch`` would (waiting if need be). The run hands a stage batch N+1
    # before it asks for batch N's result, in order, and detects meanwhile
    # (:class:`~vidpipe.stages.runner.StageRunner`); it asks without polling first (a poll is a
    # system call, and each hands the run's GIL away). The runner calls it instead of
    # process_batch and process.
    #
    # Optional: ``warm_up() -> None``: called once before the run's clock starts (after the
    # model's warm-up), e.g. to wait for a helper process the stage started when it was made.

    def reset(self, stream_id: int) -> None:
        """Forget the stream's state (it starts over)."""
        ...

    def report(self) -> Mapping[str, Any]:
        """What the stage has to say in the run summary and ``<output>.meta.json``, JSON-able,
        under its ``name`` (empty: nothing)."""
        ...

    def close(self) -> None:
        """The run ended: flush and release (idempotent)."""
        ...
