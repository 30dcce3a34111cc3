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
from typing import TYPE_CHECKING, Any

from vidpipe.sinks.resume import ResumeError
from vidpipe.sinks.resume_plan import RECORDED, ResumeSetup, plan_inputs

if TYPE_CHECKING:
    from vidpipe.sinks.outputs import OutputSpec

logger = logging.getLogger("vidpipe.cli")

__all__ = ["add_resume_arg", "resume_setup"]

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


