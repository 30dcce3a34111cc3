"""Resuming a killed (or interrupted) run from what its detection table holds.

Every table records, from its first metadata write on, a ``"resume"`` section in its
``<output>.meta.json``: the run's ``options`` (model, thresholds, classes, frame selection,
format, device, decoder, ...), its ``inputs`` (in order, credentials masked) and the inputs
``done`` (read to their end with every row written). :func:`plan_table` reads a previous table
and its metadata and says, per input, what a resumed run does:

- ``skip``: the input is done (a table whose metadata says ``complete``, or an input of a
  single table listed as done): it is not decoded again, its rows stay;
- ``continue``: the input was cut short; its rows of frames before the last frame that has a row
  (``frame``) stay, the rest of the file is cut off, and the input is decoded again from that
  frame on (seeking to the keyframe before it), with its original frame numbers and times. A
  frame without detections has no row, so the frames after the last row are exactly the ones
  that were never written, or had no detection: nothing is written twice, nothing is lost;
- ``restart``: the input is decoded from its first frame (its rows, if any, are cut off): an
  input with no row yet, an input without timestamps, every input after the first one not done
  in a single table (their rows, written on Ctrl-C out of order with the earlier input's, are cut
  off with it), and every unfinished input of a Parquet table.

CSV and JSON Lines tables are cut at a row boundary (a trailing partial line, from a kill in the
middle of a large write, is dropped) and appended to. A Parquet table is readable only once
finalised: a complete one is skipped, any other is written again from the first frame of each of
its inputs.

A resume whose options or inputs differ from the previous run's is refused
(:class:`ResumeError`, one line naming the first difference).
"""

from __future__ import annotations

import contextlib
import csv
import json
import logging
import math
import os
import socket
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from vidpipe.errors import ConfigError
from vidpipe.sinks.paths import table_format

logger = logging.getLogger(__name__)

__all__ = ["ResumeError", "InputPlan", "TablePlan", "plan_table", "seal_done", "resume_section", "new_run_id"]

#: the metadata key of the resume section
RESUME_KEY = "resume"

Action = Literal["skip", "continue", "restart"]


class ResumeError(ConfigError):
    """A previous output cannot be resumed (different options or inputs, unreadable table)."""


def new_run_id() -> str:
    return uuid.uuid4().hex


def resume_section(options: Mapping[str, Any], inputs: Sequence[str], *, run_id: str | None = None) -> dict[str, Any]:
    """The ``"resume"`` metadata of a new table: options, inputs (names as in the ``source``
    column), the inputs done so far (none), the run id and the writer's host (with the
    metadata's ``pid``: a table still being written is never resumed)."""
    return {"run_id": run_id or new_run_id(), "options": _json(options), "inputs": list(inputs), "done": [],
            "host": socket.gethostname()}


def _json(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` as the metadata stores them (tuples as lists, paths and objects as strings)."""
    return json.loads(json.dumps(dict(options), default=str))


def _writer_alive(meta: Mapping[str, Any], section: Mapping[str, Any]) -> int | None:
    """The pid of the process still writing this table (same host, alive), else ``None``."""
    pid = meta.get("pid")
    if meta.get("status") != "running" or not isinstance(pid, int) or section.get("host") != socket.gethostname():
        return None
    if pid == os.getpid():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except OSError:  # PermissionError: alive, another user's
        return pid
    return pid


@dataclass(frozen=True)
class InputPlan:
    """What a resumed run does with one input of a table.

    Attributes:
        source: the input's name (the ``source`` column).
        action: ``skip``, ``continue`` or ``restart`` (module docstring).
        frame: ``continue``: the first frame decoded again (its rows were cut off); else 0.
        pts: ``continue``: that frame's presentation time in seconds; else ``None``.
        kept_rows: rows of this input that stay in the table.
    """

    source: str
    action: Action
    frame: int = 0
    pts: float | None = None
    kept_rows: int = 0


@dataclass(frozen=True)
class TablePlan:
    """How to resume one table: keep its first ``keep_bytes`` bytes (``None``: write it anew)."""

    path: Path
    format: str
    inputs: tuple[InputPlan, ...]
    keep_bytes: int | None
    kept_rows: int
    run_id: str
    done: tuple[str, ...] = field(default=())

    def input(self, source: str) -> InputPlan | None:
        for p in self.inputs:
            if p.source == source:
                return p
        return None


@dataclass(frozen=True)
class _Row:
    start: int  # byte offset of the row's line
    source: str
    frame: int
    pts: float | None


def _read_meta(meta_path: Path) -> dict[str, Any] | None:
    try:
        with open(meta_path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ResumeError(f"cannot resume {str(meta_path)!r}: unreadable metadata ({exc})") from exc


def _rows(path: Path, fmt: str) -> tuple[list[_Row], int]:
    """The rows of a CSV/JSONL table (with each line's byte offset) and the byte length of its
    whole lines (a trailing partial line is left out)."""
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1  # whole lines only
    rows: list[_Row] = []
    pos = 0
    if fmt == "csv":
        pos = data.find(b"\n") + 1
        if pos == 0:
            return [], 0  # not even a header: write the table anew
        header = next(csv.reader([data[:pos].decode("utf-8")]))
        try:
            cols = (header.index("source"), header.index("frame"), header.index("pts"))
        except ValueError:
            raise ResumeError(f"cannot resume {str(path)!r}: its header {header} is not a detection table's") from None
    while pos < end:
        nl = data.index(b"\n", pos)
        line = data[pos:nl].decode("utf-8")
        try:
            if fmt == "csv":
                fields = next(csv.reader([line]))
                source, frame, pts_text = fields[cols[0]], int(fields[cols[1]]), fields[cols[2]]
                pts = float(pts_text) if pts_text else None
            else:
                obj = json.loads(line)
                source, frame, pts = str(obj["source"]), int(obj["frame"]), obj["pts"]
                pts = None if pts is None else float(pts)
        except (ValueError, KeyError, IndexError, TypeError, StopIteration) as exc:
            raise ResumeError(f"cannot resume {str(path)!r}: unreadable row at byte {pos} ({exc})") from None
        rows.append(_Row(pos, source, frame, pts))
        pos = nl + 1
    return rows, end


def _first_difference(old: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    for key in list(new) + [k for k in old if k not in new]:
        if old.get(key) != new.get(key):
            return key
    return None


def _show(value: Any) -> str:
    return "(not given)" if value is None else json.dumps(value) if not isinstance(value, str) else value


def plan_table(
    path: str | os.PathLike[str],
    *,
    format: str = "auto",
    options: Mapping[str, Any],
    inputs: Sequence[str],
    stateful: bool = False,
    can_continue: Sequence[bool] | None = None,
    name: Callable[[str], str] = lambda key: f"{key}=",
) -> TablePlan | None:
    """How to resume the table ``path`` for a run of ``inputs`` (names, in order) with
    ``options``; ``None`` when there is nothing to resume (no table and no metadata: start anew).

    Args:
        stateful: the run has per-stream state that cannot continue mid-input (tracking):
            ``continue`` becomes ``restart``.
        can_continue: per input, whether it can be read from a given frame on (a video file);
            ``False`` (an image folder): ``continue`` becomes ``restart``.
        name: how an option is named in errors (the CLI passes its flags).

    Raises:
        ResumeError: the previous run's options or inputs differ, its metadata has no resume
            section, or the table cannot be read.
    """
    from vidpipe.sinks.table import metadata_path

    target = Path(path).expanduser()
    fmt = table_format(target, format)
    meta = _read_meta(metadata_path(target))
    if meta is None:
        if target.exists():
            raise ResumeError(
                f"cannot resume {str(target)!r}: it has no metadata file ({metadata_path(target).name}); "
                "run without resume to write it anew"
            )
        return None
    section = meta.get(RESUME_KEY)
    if not isinstance(section, dict) or not isinstance(section.get("options"), dict):
        raise ResumeError(
            f"cannot resume {str(target)!r}: its metadata does not record the run's options "
            "(written by an older vidpipe); run without resume to write it anew"
        )
    options = _json(options)
    key = _first_difference(section["options"], options)
    if key is not None:
        flag = name(key) + ("" if name(key).endswith("=") else " ")
        raise ResumeError(
            f"cannot resume {str(target)!r}: it was written with {flag}{_show(section['options'].get(key))}, "
            f"this run has {flag}{_show(options.get(key))}; give the same options, or run without resume"
        )
    if list(section.get("inputs", [])) != list(inputs):
        old, new = list(section.get("inputs", [])), list(inputs)
        raise ResumeError(
            f"cannot resume {str(target)!r}: it was written for the inputs {old}, this run has {new}; "
            "give the same inputs in the same order, or run without resume"
        )
    alive = _writer_alive(meta, section)
    if alive is not None:
        raise ResumeError(
            f"cannot resume {str(target)!r}: the run writing it (pid {alive}) is still running; stop it first"
        )
    temporary = meta.get("temporary")
    if meta.get("status") == "running" and isinstance(temporary, str) and Path(temporary).name.startswith("."):
        with contextlib.suppress(OSError):  # the killed run's unreadable Parquet temporary file
            Path(temporary).unlink()
    run_id = str(section.get("run_id") or new_run_id())
    if meta.get("complete") is True:
        plans = tuple(InputPlan(s, "skip") for s in inputs)
        return TablePlan(target, fmt, plans, None, int(meta.get("rows") or 0), run_id, tuple(inputs))
    done = [s for s in section.get("done", []) if s in inputs]
    if fmt not in ("csv", "jsonl") or not target.exists():
        # Parquet is unreadable unless finalised (a kill leaves a previous file or none): anew
        why = "Parquet cannot be appended to" if fmt == "parquet" else "the table is missing"
        logger.info("%s: %s; every input of it starts from its first frame", target, why)
        return TablePlan(target, fmt, tuple(InputPlan(s, "restart") for s in inputs), None, 0, run_id)
    rows, whole = _rows(target, fmt)
    if whole == 0:
        return TablePlan(target, fmt, tuple(InputPlan(s, "restart") for s in inputs), None, 0, run_id)
    # each input's rows are one block, in input order, frames non-decreasing within it
    blocks: list[list[_Row]] = [[] for _ in inputs]
    i = 0
    for r in rows:
        while i < len(inputs) and (inputs[i] != r.source or (blocks[i] and r.frame < blocks[i][-1].frame)):
            i += 1
        if i == len(inputs):
            raise ResumeError(f"cannot resume {str(target)!r}: row at byte {r.start} ({r.source!r} frame {r.frame}) "
                              "is not in input order")
        blocks[i].append(r)
    # inputs before the first one not done are kept whole; everything from it on is redone
    first_open = next((k for k, s in enumerate(inputs) if s not in done), len(inputs))
    plans: list[InputPlan] = [InputPlan(s, "skip", kept_rows=len(blocks[k])) for k, s in enumerate(inputs[:first_open])]
    if first_open == len(inputs):
        return TablePlan(target, fmt, tuple(plans), whole, len(rows), run_id, tuple(inputs))
    kept = sum(len(b) for b in blocks[:first_open])
    block = blocks[first_open]
    after = [r for b in blocks[first_open:] for r in b]
    cut = after[0].start if after else whole
    src = inputs[first_open]
    last = block[-1] if block else None
    seekable = True if can_continue is None else bool(can_continue[first_open])
    if last is None or stateful or not seekable or last.pts is None or not math.isfinite(last.pts):
        plans.append(InputPlan(src, "restart"))
    else:
        keep = [r for r in block if r.frame < last.frame]
        cut = block[len(keep)].start
        plans.append(InputPlan(src, "continue", frame=last.frame, pts=last.pts, kept_rows=len(keep)))
        kept += len(keep)
    plans.extend(InputPlan(s, "restart") for s in inputs[first_open + 1:])
    return TablePlan(target, fmt, tuple(plans), cut, kept, run_id, tuple(inputs[:first_open]))


def seal_done(plan: TablePlan) -> None:
    """Mark a table whose every input is done as complete (a run killed after its last row but
    before it finalised the table): its metadata's status becomes ``complete``."""
    from vidpipe.sinks import _atomic
    from vidpipe.sinks.table import metadata_path

    if any(p.action != "skip" for p in plan.inputs):
        return
    meta = _read_meta(metadata_path(plan.path)) or {}
    if meta.get("complete") is True:
        return
    meta.pop("pid", None)
    meta.update(finished=True, complete=True, status="complete", reason=None, rows=plan.kept_rows)
    meta.setdefault(RESUME_KEY, {})["done"] = list(plan.done)
    _atomic.write_json_atomic(metadata_path(plan.path), meta)
    logger.info("%s: every input was done; marked complete", plan.path)
