"""Test helpers for the event outputs: a real stage that emits events from real detections, and
results carrying events for the sinks' own tests."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

from vidpipe.stages import Event
from vidpipe.types import Detections, FrameMeta, FrameResult


class ClassAppears:
    """A real stage: per stream, an ``"enter"`` event (zone name ``name``) in the first frame
    where a detection of ``class_name`` appears after a frame without one, a ``"leave"`` event
    (with ``dwell_s``) in the first frame without one after that. One host copy of the class ids
    per call."""

    needs_frames = False
    emits_events = True

    def __init__(self, class_name: str, *, name: str = "scene", stage_name: str = "appears") -> None:
        self.class_name = class_name
        self.zone = name
        self.name = stage_name
        self._present: dict[int, float | None] = {}  # stream -> pts when it appeared (None: absent)
        self.emitted = 0

    def process(self, results: Sequence[FrameResult]) -> list[FrameResult]:
        import torch

        if not results:
            return []
        names = results[0].names
        cid = names.index(self.class_name)
        ids = torch.cat([r.detections.class_ids for r in results]).cpu().tolist()
        out, pos = [], 0
        for r in results:
            n = len(r.detections)
            here = cid in ids[pos:pos + n]
            pos += n
            sid, pts = r.meta.stream_id, r.meta.pts or 0.0
            since = self._present.get(sid)
            kind = "enter" if here and since is None else ("leave" if not here and since is not None else None)
            if kind is None:
                out.append(r)
                continue
            self._present[sid] = pts if here else None
            ev = Event(kind=kind, name=self.zone, stream_id=sid, source=r.meta.source, frame=r.meta.index,
                       pts=r.meta.pts, time=r.meta.captured_at or time.time(), track_id=1, class_id=cid,
                       class_name=self.class_name, dwell_s=None if here else pts - since)
            self.emitted += 1
            out.append(dataclasses.replace(r, events=(*r.events, ev)))
        return out

    def reset(self, stream_id: int) -> None:
        self._present.pop(stream_id, None)

    def report(self):
        return {"emitted": self.emitted}

    def close(self) -> None:
        pass


def make_event(i: int = 0, *, kind: str = "cross", stream_id: int = 0, source: str = "cam.mp4", **kw) -> Event:
    base = dict(kind=kind, name="door", stream_id=stream_id, source=source, frame=i, pts=i / 25,
                time=1_764_151_502.123 + i, track_id=7 + i % 3, class_id=0, class_name="person",
                direction="in" if kind == "cross" else None, dwell_s=2.5 if kind in ("dwell", "leave") else None)
    base.update(kw)
    return Event(**base)


def result_with(events: Sequence[Event], *, stream_id: int = 0, index: int = 0, source: str = "cam.mp4",
                captured_at: float | None = None) -> FrameResult:
    """A frame result (no detections) carrying ``events``."""
    import torch

    meta = FrameMeta(source, stream_id, index, index / 25, 64, 48, captured_at=captured_at)
    dets = Detections(torch.zeros((0, 4)), torch.zeros(0), torch.zeros(0, dtype=torch.long),
                      torch.zeros(0, dtype=torch.long))
    return FrameResult(meta=meta, detections=dets, events=tuple(events))
