"""One call from inputs to a detection table, resumable: :func:`detect_to_table`."""

from __future__ import annotations

import inspect
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vidpipe.errors import ConfigError

if TYPE_CHECKING:
    from vidpipe.summary import RunSummary

__all__ = ["detect_to_table"]

#: ``detect()`` keywords that keep per-stream state or outputs: a resumed run refuses them
_STATEFUL = ("track", "stages", "keep_frames")


def detect_to_table(
    source: "str | os.PathLike[str] | Sequence[str | os.PathLike[str]]",
    output: "str | os.PathLike[str]",
    *,
    format: str = "auto",
    resume: bool = False,
    **options: Any,
) -> "RunSummary | None":
    """Detect objects in ``source`` (as :func:`vidpipe.detect`, same keyword ``options``) and
    write every detection to the one table ``output`` (CSV, JSONL or Parquet; rows of several
    inputs in input order), as ``vidpipe detect SOURCE... -o OUTPUT`` does.

    With ``resume=True`` a killed or interrupted earlier call with the same inputs and options
    is continued from ``output`` (as ``vidpipe detect --resume``, see
    :mod:`vidpipe.sinks.resume`): inputs done are not decoded again, an input cut short goes on
    from the last frame that has a row (original frame numbers and times), later inputs start
    over; the final table has every frame's rows once, as an uninterrupted call writes them.
    CSV/JSONL are appended to; an unfinished Parquet table is written again. Without a previous
    table it is an ordinary run.

    Returns:
        The run's summary (of the frames detected by this call), or ``None`` when ``resume``
        found every input done (nothing was decoded).

    Raises:
        ResumeError (a ``ConfigError``): ``resume=True`` with other options or inputs than the
            table's (naming the first difference), with ``track=``/``stages=``/``keep_frames=``, or
            a table that cannot be read.
        plus what :func:`vidpipe.detect` and :class:`~vidpipe.sinks.TableSink` raise.
    """
    import vidpipe
    from vidpipe.sinks.outputs import Outputs, OutputSpec
    from vidpipe.sinks.resume_plan import RECORDED, plan_inputs
    from vidpipe.sinks.resume import ResumeError

    if not isinstance(resume, bool):
        raise ConfigError(f"resume={resume!r}; expected True or False")
    stateful = [k for k in _STATEFUL if options.get(k)]
    if resume and stateful:
        raise ResumeError(f"resume=True cannot be combined with {stateful[0]}= (its state cannot continue mid-input)")
    inputs = [os.fspath(source)] if isinstance(source, (str, os.PathLike)) else [os.fspath(s) for s in source]
    defaults = {k: p.default for k, p in inspect.signature(vidpipe.detect).parameters.items()}

    def recorded(fmt: str) -> dict[str, Any]:
        out = {k: options.get(k, defaults.get(k)) for k in RECORDED}
        if not isinstance(out["model"], (str, type(None))):
            out["model"] = type(out["model"]).__name__  # a loaded model: its class only
        out["format"] = fmt
        out["track"] = bool(options.get("track"))
        return out

    spec = OutputSpec("single", Path(output).expanduser(), format)
    setup = plan_inputs(spec, inputs, options=recorded, resume=resume, name=lambda k: f"{k}=")
    if not setup.run_inputs:
        return None
    options = {**options, "results_on_host": True}
    run = vidpipe.detect(setup.run_inputs, **options)
    outputs = Outputs(spec, run, names=run.detector.names, resume=setup)
    try:
        for batch in run.batches():
            outputs.write(batch)
    except BaseException as exc:
        run.close()
        outputs.abort(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
        raise
    return outputs.close()
