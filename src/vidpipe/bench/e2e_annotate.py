"""``vidpipe bench e2e --annotate`` / ``--track``: what the steps after detection cost beside
detection alone.

For each vidpipe peer of the run (``vidpipe-cpu``, ``vidpipe-pyav``, ``vidpipe-gpu``) more rows
on the same input, in the same process run:

- ``<peer>+draw`` (``--annotate``): the same run with the annotate stage's renderer only
  (:class:`vidpipe.draw.Annotator`: boxes, labels on the frame's device; the frame is kept for it);
- ``<peer>+annotate`` (``--annotate``): drawn and encoded
  (:class:`vidpipe.stages.annotate.AnnotateStage`, libx264 ``veryfast`` on the writer's thread) to
  a file in a temporary folder, removed after;
- ``<peer>+track`` (``--track``): the same run with ``track=True`` (ByteTrack,
  :class:`vidpipe.track.TrackerStage`), as ``vidpipe detect --track`` runs it.

The ``+annotate`` row's note gives the writer's encode ms/frame and how often inference waited
for the encoder's queue; the ``+track`` row's the tracker's ms/frame and the tracks it confirmed.
"""

from __future__ import annotations

from typing import Any

__all__ = ["STAGE_PEERS", "STAGE_KINDS", "with_stage_peers", "annotate_stages", "annotate_note", "track_note"]

_BASES = ("vidpipe-cpu", "vidpipe-pyav", "vidpipe-gpu")
#: the kinds of rows after each vidpipe peer (``<peer>+<kind>``)
STAGE_KINDS = ("draw", "annotate", "track")
STAGE_PEERS = tuple(f"{b}+{k}" for b in _BASES for k in STAGE_KINDS)


def with_stage_peers(peers: "list[str] | tuple[str, ...]", kinds: "tuple[str, ...]") -> list[str]:
    """``peers`` with ``<peer>+<kind>`` after each vidpipe peer, for each of ``kinds``."""
    out: list[str] = []
    for p in peers:
        out.append(p)
        if p in _BASES:
            out += [f"{p}+{k}" for k in kinds]
    return out


class _DrawOnly:
    """The annotate stage without its writer: render each frame and drop it."""

    name = "draw"
    needs_frames = True

    def __init__(self) -> None:
        from vidpipe.draw import Annotator

        self._render = Annotator()

    def process(self, results):
        for r in results:
            self._render(r)
        return results

    def reset(self, stream_id: int) -> None:
        pass

    def report(self) -> dict:
        return {}

    def close(self) -> None:
        pass


def annotate_stages(kind: str, folder: str) -> list[Any]:
    """The stage of a ``+draw`` / ``+annotate`` row (``kind``), writing under ``folder``
    (none for ``+track``: that row runs with ``track=True``)."""
    if kind == "track":
        return []
    if kind == "draw":
        return [_DrawOnly()]
    from pathlib import Path

    from vidpipe.draw import Annotator
    from vidpipe.stages.annotate import AnnotateStage

    return [AnnotateStage(lambda meta: str(Path(folder) / f"bench-{meta.stream_id}.mp4"), render=Annotator(),
                          audio=False, release_frames=True)]


def annotate_note(report: dict) -> str:
    """The ``+annotate`` row's note from the stage's report."""
    parts = []
    for s in (report.get("annotate") or {}).get("streams", {}).values():
        enc = s.get("encode_ms_per_frame")
        parts.append(f"encode {enc:.1f} ms/frame" if enc is not None else "encoded nothing")
        parts.append(f"render {s.get('render_ms_per_frame') or 0:.2f} ms/frame")
        parts.append(f"inference waited {s.get('blocked_writes', 0)}x ({s.get('blocked_ms', 0):.0f} ms)")
        if s.get("error"):
            parts.append(f"error: {s['error']}")
    return "; ".join(parts)


def track_note(report: dict, stages_ms: dict) -> str:
    """The ``+track`` row's note from the tracker's report and the run's ms/frame by stage."""
    rep = report.get("track") or {}
    ms = stages_ms.get("track")
    return (f"track {ms:.3f} ms/frame" if ms is not None else "track: no time") + f"; {rep.get('tracks', 0)} tracks"
