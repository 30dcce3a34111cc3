"""The zones section of the run's text summary (:meth:`vidpipe.summary.RunSummary.format_text`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["zones_text"]


def zones_text(report: Any, *, max_items: int = 20) -> list[str]:
    """Short lines for a zones report (``Zones.report()``): per line in/out with the per-class
    split, per zone entries, occupancy now and dwell. Nothing for something else."""
    if not isinstance(report, Mapping) or not isinstance(report.get("lines"), Mapping):
        return []
    out = [f"zones (anchor {report.get('anchor', '?')}):"]
    items = 0
    for name, rep in report["lines"].items():
        classes = ", ".join(f"{c} {v.get('in', 0)}/{v.get('out', 0)}" for c, v in rep.get("classes", {}).items())
        out.append(f"  line {name}: in {rep.get('in', 0)}, out {rep.get('out', 0)}" + (f" ({classes} in/out)" if classes else ""))
        items += 1
    for name, rep in (report.get("zones") or {}).items():
        d = rep.get("dwell_s") or {}
        dwell = f", dwell mean {d['mean']:.1f} s, max {d['max']:.1f} s" if d.get("mean") is not None else ""
        out.append(f"  zone {name}: {rep.get('entries', 0)} entries, {rep.get('occupancy', 0)} now{dwell}")
        items += 1
    if len(out) > max_items + 1:
        out = out[: max_items + 1] + [f"  ... {len(out) - 1 - max_items} more (see the output's .meta.json)"]
    return out if items else []
