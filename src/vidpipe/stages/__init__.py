"""Steps after detection (tracking, lines and zones, crops, drawing): :class:`Stage`,
:class:`Event`, :class:`StageRunner`."""

from vidpipe.stages.base import Event, EventKind, Stage
from vidpipe.stages.runner import StageRunner

__all__ = ["Event", "EventKind", "Stage", "StageRunner"]
