"""``vidpipe detect --resume``: continue a killed or interrupted run from its tables.

Every run records its options and inputs in its tables' metadata (:mod:`vidpipe.sinks.resume`);
``--resume`` reads them back: inputs done are not decoded again, an input cut short is decoded
again from the last frame that has a row (with its original frame numbers and times), the rest
from their first frame. Refused (exit 2, one line) with options or inputs other than the killed
run's, with stdout (``-o -``), ``--rotate hourly``, live inputs (``--realtime``, stream URLs), and
with the stages whose state or outputs cannot continue mid-input (``--track``, ``--line``,
``--zone``, ``--events``, ``--webhook``, ``--mqtt``, ``--embeddings``, ``--annotate``).
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vidpipe.sinks.resume import InputPlan, ResumeError, TablePlan, new_run_id, plan_table, resume_section, seal_done

if TYPE_CHECKING:
    from vidpipe.cli._outputs import OutputSpec

logger = logging.getLogger("vidpipe.cli")

__all__ = ["add_resume_arg", "ResumeSetup", "resume_setup"]

#: the options a resumed run must share with the killed one (argparse dest names)
RECORDED = (
    "model", "imgsz", "names", "head", "dtype", "letterbox", "conf", "iou", "max_det", "agnostic", "classes",
    "frame_skip", "max_frames", "start", "end", "device", "decoder",
)


def add_resume_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--resume", action="store_true",
        help="continue a killed or interrupted run from its outputs: inputs done are skipped, an input cut short "
        "goes on from its last frame with a row (same frame numbers), others start over; needs the same options "
        "and inputs (CSV/JSONL tables; an unfinished Parquet table is written again)",
    )


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def _options(args: argparse.Namespace, fmt: str, tracking: bool) -> dict[str, Any]:
    out: dict[str, Any] = {k: getattr(args, k, None) for k in RECORDED}
    out["format"] = fmt
    out["track"] = bool(tracking)
    return out


def _refusal(args: argparse.Namespace, spec: "OutputSpec") -> str | None:
    if spec.mode == "stdout":
        return "-o - (stdout) cannot be resumed; write to a file or folder"
    if spec.rotate != "none":
        return "--rotate hourly cannot be resumed"
    if getattr(args, "realtime", False):
        return "--realtime (live) inputs cannot be resumed"
    stateful = [flag for flag, on in (
        ("--track", getattr(args, "track", None)), ("--line", getattr(args, "line", None)),
        ("--zone", getattr(args, "zone", None)), ("--events", getattr(args, "events", None) not in (None, "off")),
        ("--webhook", getattr(args, "webhook", None)), ("--mqtt", getattr(args, "mqtt", None)),
        ("--embeddings", getattr(args, "embeddings", None)), ("--annotate", getattr(args, "annotate", None)),
    ) if on]
    if stateful:
        return (f"{stateful[0]} keeps state or writes outputs that cannot continue mid-input; "
                "run without --resume to start over")
    return None


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


def resume_setup(args: argparse.Namespace, spec: "OutputSpec", inputs: list[str], *, tracking: bool) -> ResumeSetup:
    """Plan the run's inputs and tables (``--resume``), or record what a later resume needs.

    Raises:
        ResumeError: the run cannot be resumed (the CLI prints it as one line, exit 2).
    """
    resume = bool(getattr(args, "resume", False))
    if resume and (why := _refusal(args, spec)) is not None:
        raise ResumeError(f"--resume: {why}")
    try:
        return plan_inputs(spec, inputs, options=lambda fmt: _options(args, fmt, tracking), resume=resume, name=_flag)
    except ResumeError as exc:
        raise ResumeError(f"--resume: {exc}") from None


def plan_inputs(
    spec: "OutputSpec", inputs: list[str], *, options: Any, resume: bool, name: Any
) -> ResumeSetup:
    """:func:`resume_setup` for any caller: ``options(format)`` gives the options to record,
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
