"""Which inputs a run decodes and how its tables are (re)opened: the plan behind
``vidpipe detect --resume`` and :func:`vidpipe.detect_to_table` ``(resume=True)``.

Every run records its options and inputs in its tables' metadata (:mod:`vidpipe.sinks.resume`);
a resumed run reads them back: inputs done are not decoded again, an input cut short is decoded
again from the last frame that has a row (with its original frame numbers and times), the rest
from their first frame.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vidpipe.sinks.resume import InputPlan, ResumeError, TablePlan, new_run_id, plan_table, resume_section, seal_done

if TYPE_CHECKING:
    from vidpipe.sinks.outputs import OutputSpec

logger = logging.getLogger(__name__)

__all__ = ["RECORDED", "ResumeSetup", "plan_inputs"]

#: the options a resumed run must share with the killed one (the CLI's argparse names = vidpipe.detect's keywords)
RECORDED = (
    "model", "imgsz", "names", "head", "dtype", "letterbox", "conf", "iou", "max_det", "agnostic", "classes",
    "frame_skip", "max_frames", "start", "end", "device", "decoder",
)


@dataclass
class ResumeSetup:
    """The inputs to run and how each table is (re)opened.

    Attributes:
        run_inputs: what to pass to :func:`vidpipe.detect`: paths, or resumed sources.
        names: every input's name (the ``source`` column), in input order (skipped ones included).
        positions: stream id of the run -> position in ``names``.
        options: the recorded options.
        single: the plan of the one table (``-o FILE``), or ``None``.
        tables: per-input tables: position -> (path, plan or ``None``).
        skipped: names of the inputs not run (done).
    """

    run_inputs: list[Any]
    names: list[str]
    positions: list[int]
    options: dict[str, Any]
    run_id: str
    single: TablePlan | None = None
    tables: dict[int, tuple[Path, TablePlan | None]] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)

    def section(self, names: list[str], plan: TablePlan | None) -> dict[str, Any]:
        sec = resume_section(self.options, names, run_id=plan.run_id if plan else new_run_id())
        if plan is not None:
            sec["done"] = list(plan.done)
            sec["resumed"] = [{"source": p.source, "action": p.action, "frame": p.frame, "kept_rows": p.kept_rows}
                              for p in plan.inputs]  # what this resumed run did with each input
        return sec


def _expand(inputs: list[str]) -> list[tuple[Any, str]]:
    """``(SourceSpec or the input string when it cannot be classified, name)`` in order."""
    from vidpipe.errors import SourceError
    from vidpipe.sources.redact import redact_url
    from vidpipe.sources.spec import classify_inputs

    out: list[tuple[Any, str]] = []
    for text in inputs:
        try:
            out.extend((s, s.name) for s in classify_inputs([text]))
        except SourceError:
            out.append((text, redact_url(text)))  # the run reports it
    return out


def _run_item(item: Any, plan: InputPlan | None) -> Any:
    """What the run reads for one input under ``plan`` (``None``: skip it)."""
    from vidpipe.sources.resumed import ResumedFileSource

    if plan is None or plan.action == "restart":
        return item
    if plan.action == "skip":
        return None
    return ResumedFileSource(item, frame=plan.frame, pts=plan.pts or 0.0)


def plan_inputs(
    spec: "OutputSpec", inputs: list[str], *, options: Any, resume: bool, name: Any
) -> ResumeSetup:
    """The plan of a run (resumed or not) for any caller: ``options(format)`` gives the options to record,
    ``name(key)`` how an option is named in errors.

    Raises:
        ResumeError: the run cannot be resumed (the CLI prints it as one line, exit 2).
    """
    from vidpipe.sinks.paths import table_format

    items = _expand(inputs)
    names = [n for _, n in items]
    if spec.mode == "single" and spec.path is not None:
        fmt = table_format(spec.path, spec.format)
    else:
        fmt = "csv" if spec.format == "auto" else spec.format
    recorded = options(fmt)
    setup = ResumeSetup([], names, [], recorded, new_run_id())
    if resume and any(not isinstance(i, str) and i.kind == "live" for i, _ in items):
        raise ResumeError("live inputs (stream URLs) cannot be resumed")
    if spec.mode == "single" and spec.path is not None:
        seekable = [not isinstance(i, str) and i.kind == "file" for i, _ in items]
        plan = plan_table(spec.path, format=spec.format, options=recorded, inputs=names, name=name,
                          can_continue=seekable) if resume else None
        setup.single = plan
        plans: list[InputPlan | None] = list(plan.inputs) if plan is not None else [None] * len(items)
    else:
        plans = []
        used: set[Path] = set()
        for k, (item, label) in enumerate(items):
            path = _table_path(spec, item if isinstance(item, str) else item.location, used)
            p = plan_table(path, format=fmt, options=recorded, inputs=[label], name=name,
                           can_continue=[not isinstance(item, str) and item.kind == "file"]) if resume else None
            setup.tables[k] = (path, p)
            plans.append(p.inputs[0] if p is not None else None)
    for k, ((item, label), plan) in enumerate(zip(items, plans)):
        run_item = _run_item(item, plan)
        if run_item is None:
            setup.skipped.append(label)
            continue
        setup.run_inputs.append(run_item)
        if not isinstance(run_item, str):  # an input that cannot be read becomes no stream of the run
            setup.positions.append(k)
    if resume:
        for plan in [setup.single, *(p for _, p in setup.tables.values())]:
            if plan is not None:
                seal_done(plan)
        for label in setup.skipped:
            logger.info("resume: %s is done; skipped (not decoded again)", label)
    return setup


def _table_path(spec: "OutputSpec", location: str, used: set[Path]) -> Path:
    """The per-input table of ``location`` (two inputs of one name: ``a.detections-2.csv``), in input order."""
    path = spec.table_for(location)
    stem, n = path, 2
    while path in used:
        path = stem.with_name(stem.name.replace(".detections", f".detections-{n}", 1))
        n += 1
    used.add(path)
    return path
