"""The run summary: what was processed, how fast, by which backends, and what went wrong.

:meth:`vidpipe.pipeline.DetectionRun.summary` builds a :class:`RunSummary`, which the CLI prints
(:meth:`RunSummary.format_text`) and the sinks store in their output metadata
(:meth:`RunSummary.to_dict`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import PurePath
from typing import Any, Literal

from vidpipe._validate import check_choice
from vidpipe.sources.redact import redact_text


__all__ = [
    "SourceStatus",
    "SOURCE_STATUSES",
    "SourceSummary",
    "RunSummary",
    "vidpipe_version",
    "jsonable",
    "redacted",
]

SourceStatus = Literal["ok", "partial", "failed", "skipped"]
SOURCE_STATUSES: tuple[str, ...] = ("ok", "partial", "failed", "skipped")


#: decoder reasons that are no news (no fallback happened): not repeated in the text summary
_PLAIN_REASONS = ("first usable backend", "CPU device", "decoder=")


def vidpipe_version() -> str:
    """The installed vidpipe version (``"unknown"`` when running from an uninstalled tree)."""
    try:
        import vidpipe

        version = getattr(vidpipe, "__version__", None)
        if isinstance(version, str):
            return version
    except Exception:  # noqa: BLE001 - a broken package __init__ must not break the summary
        pass
    try:
        from importlib.metadata import version as dist_version

        return dist_version("vidpipe")
    except Exception:  # noqa: BLE001 - PackageNotFoundError and friends
        return "unknown"


def jsonable(value: Any) -> Any:
    """``value`` converted to plain JSON types (dict/list/str/int/float/bool/None).

    Tuples and sets become lists, paths and devices strings, fractions floats, numpy and torch
    scalars Python numbers; NaN and infinities become ``None`` (JSON has no such numbers);
    dataclasses become dicts. Anything else falls back to ``str(value)``.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Fraction):
        return jsonable(float(value))
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
        return [jsonable(v) for v in items]
    if isinstance(value, PurePath):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        to_dict = getattr(value, "to_dict", None)
        if callable(to_dict):
            return jsonable(to_dict())
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    item = getattr(value, "item", None)  # numpy / torch scalars
    if callable(item) and getattr(value, "ndim", None) == 0:
        try:
            return jsonable(item())
        except Exception:  # noqa: BLE001 - fall through to str()
            pass
    return str(value)


def redacted(value: Any) -> Any:
    """``value`` (plain JSON types, as :func:`jsonable` gives) with credentials masked in every
    string (:func:`vidpipe.sources.redact.redact_text`), keys included."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {redact_text(str(k)): redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redacted(v) for v in value]
    return value


@dataclass(frozen=True)
class SourceSummary:
    """What happened to one input of the run.

    Text never carries credentials: ``source``, ``error``, ``decoder_reason`` and the strings
    of ``extra`` are redacted when the summary is built (``rtsp://***@cam/...``).

    Attributes:
        source: the input as the user gave it (a URL's user and password masked).
        kind: ``"file"``, ``"live"``, ``"images"``, ... (free text from the source layer).
        status: ``"ok"`` (read to the end), ``"partial"`` (stopped early: Ctrl-C, error after some
            frames, max frames of a live stream), ``"failed"`` (no frame processed because of an
            error), ``"skipped"`` (not attempted).
        frames: frames that reached the end of the pipeline.
        detections: detections in those frames.
        decoder: name of the decode backend that ran (``None`` when none did).
        decoder_reason: why that backend was chosen (e.g. the fallback reason).
        error: the error message when the status is not ``"ok"``.
        extra: free-form, JSON-safe details (e.g. dropped frames of a live stream).
    """

    source: str
    kind: str = "file"
    status: SourceStatus = "ok"
    frames: int = 0
    detections: int = 0
    decoder: str | None = None
    decoder_reason: str | None = None
    error: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_choice("status", self.status, SOURCE_STATUSES)
        object.__setattr__(self, "source", redact_text(str(self.source)))
        for name in ("error", "decoder_reason"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, redact_text(str(value)))
        object.__setattr__(self, "extra", {k: redacted(v) if isinstance(v, (str, list, dict)) else v
                                           for k, v in dict(self.extra).items()})

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "kind": self.kind,
            "status": self.status,
            "frames": int(self.frames),
            "detections": int(self.detections),
            "decoder": self.decoder,
            "decoder_reason": self.decoder_reason,
            "error": self.error,
            "extra": redacted(jsonable(self.extra)),
        }


@dataclass(frozen=True)
class RunSummary:
    """The outcome of one run, over all its sources.

    Credentials never appear in it: its sources are redacted (:class:`SourceSummary`), and
    :meth:`to_dict` and :meth:`format_text` mask every string they give.

    Attributes:
        sources: one :class:`SourceSummary` per input, in input order.
        frames, detections: totals over all sources.
        seconds: wall-clock duration of the run: from the end of the model's warm-up, or from the
            start of the decode where it began during the warm-up (video files on NVDEC), to
            the run's end.
        fps: ``frames / seconds`` (0 when ``seconds`` is 0).
        device: the resolved device (``"cuda:0"``, ``"cpu"``).
        model: the model's name or path.
        backends: stage -> backend that ran, e.g. ``{"decode": "nvdec", "model": "torch-fp16"}``.
        outputs: paths of the files written.
        skipped: bad inputs that were skipped, each ``{"path": ..., "reason": ...}`` (plus any
            other keys the source layer adds, e.g. ``"source"`` for a file inside a folder).
        stats: free-form counters and timings (e.g. ``"d2h_bytes_per_frame"``).
        stages: what each stage after detection reports, by stage name (``"zones"``: counts
            per line and zone; see :class:`vidpipe.stages.Stage`); also top-level keys of
            :meth:`to_dict` where they do not clash with the fixed ones.
    """

    sources: tuple[SourceSummary, ...] = ()
    frames: int = 0
    detections: int = 0
    seconds: float = 0.0
    fps: float = 0.0
    device: str | None = None
    model: str | None = None
    backends: Mapping[str, str] = field(default_factory=dict)
    outputs: tuple[str, ...] = ()
    skipped: tuple[Mapping[str, Any], ...] = ()
    stats: Mapping[str, Any] = field(default_factory=dict)
    stages: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sources", tuple(self.sources))
        object.__setattr__(self, "outputs", tuple(str(o) for o in self.outputs))
        object.__setattr__(self, "skipped", tuple(redacted(dict(s)) for s in self.skipped))
        object.__setattr__(self, "backends", {str(k): str(v) for k, v in self.backends.items()})
        object.__setattr__(self, "stats", redacted(dict(self.stats)))
        object.__setattr__(self, "stages", redacted(jsonable(dict(self.stages))))

    @property
    def status(self) -> SourceStatus:
        """``"ok"`` when every source is ok, ``"failed"`` when none produced a frame and at least
        one failed, else ``"partial"`` (``"skipped"`` if every source was skipped)."""
        statuses = {s.status for s in self.sources}
        if not statuses or statuses == {"ok"}:
            return "ok"
        if statuses == {"skipped"}:
            return "skipped"
        if "failed" in statuses and self.frames == 0:
            return "failed"
        return "partial"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict (``json.dumps`` works on it as is), credentials masked."""
        out = {
            "vidpipe_version": vidpipe_version(),
            "status": self.status,
            "frames": int(self.frames),
            "detections": int(self.detections),
            "seconds": jsonable(float(self.seconds)),
            "fps": jsonable(float(self.fps)),
            "device": self.device,
            "model": self.model,
            "backends": dict(self.backends),
            "sources": [s.to_dict() for s in self.sources],
            "outputs": list(self.outputs),
            "skipped": [jsonable(s) for s in self.skipped],
            "stats": jsonable(self.stats),
            "stages": dict(self.stages),
        }
        for name, report in self.stages.items():
            out.setdefault(name, report)
        return redacted(out)

    def format_text(self, *, errors: bool = True) -> str:
        """A short human summary: one line per source, totals, fps, backends, outputs, skips.

        ``errors=False`` leaves the error messages out of the source lines (for a caller that
        prints them itself, like the CLI on stderr).
        """
        lines = []
        width = max((len(s.source) for s in self.sources), default=0)
        width = min(width, 60)
        for s in self.sources:
            line = f"  {s.source:<{width}}  {s.status:<7}  {s.frames} frames, {s.detections} detections"
            if s.decoder:
                line += f"  [{s.decoder}]"
            note = s.extra.get("note")
            if note:
                line += f"  ({note})"
            if s.error and errors:
                line += f"  error: {s.error}"
            lines.append(line)
        n = len(self.sources)
        lines.append(
            f"{n} source{'s' if n != 1 else ''}: {self.frames} frames, {self.detections} detections "
            f"in {self.seconds:.2f} s ({self.fps:.1f} fps) - {self.status}"
        )
        where = []
        if self.device:
            where.append(f"device {self.device}")
        if self.model:
            where.append(f"model {self.model}")
        if where:
            lines.append(", ".join(where))
        if self.backends:
            lines.append("backends: " + ", ".join(f"{k}={v}" for k, v in self.backends.items()))
        first = self.stats.get("first_result_s")
        if first is not None:
            warm = self.stats.get("warmup_s") or 0.0
            lines.append(f"first result {first:.2f} s after the call (model loaded, "
                         + (f"{warm:.2f} s of GPU warm-up, " if warm >= 0.005 else "") + "first frames decoded)")
        for s in self.sources:
            if s.decoder_reason and not s.decoder_reason.startswith(_PLAIN_REASONS):
                lines.append(f"  {s.source}: {s.decoder} ({s.decoder_reason})")
        memory = gpu_memory_text(self.stats.get("gpu_memory"))
        if memory:
            lines.append(memory)
        timing = _stage_timing(self.stats.get("stages_ms_per_frame"))
        if timing:
            lines.append(timing)
        if "zones" in self.stages:
            from vidpipe.zones.text import zones_text

            lines.extend(zones_text(self.stages["zones"]))
        if self.outputs:
            lines.append("outputs: " + ", ".join(self.outputs))
        if self.stats.get("events"):  # the event outputs' counters (vidpipe.events)
            from vidpipe.events.outputs import describe

            lines.append(describe(self.stats["events"]))
        if self.skipped:
            lines.append(f"skipped {len(self.skipped)} input{'s' if len(self.skipped) != 1 else ''}:")
            for item in self.skipped:
                lines.append(f"  {item.get('path', '?')}: {item.get('reason', 'no reason given')}")
        return redact_text("\n".join(lines))


# the run's own steps, shown first in this order; the stages after detection follow in theirs
_STEP_ORDER = ("decode", "preprocess", "model", "postprocess")


def gpu_memory_text(report: "Mapping[str, Any] | None") -> str:
    """The summary's ``gpu memory`` line from ``stats["gpu_memory"]`` (:mod:`vidpipe.pipeline_memory`):
    the budget and its parts in MiB, the allocator's peak and the decoder processes' rings."""
    if not report:
        return ""
    if report.get("budget_mib") is None:
        return (f"gpu memory: no budget (max_gpu_memory); {report.get('reserved_mib', '?')} MiB reserved, "
                f"{report.get('allocated_mib', '?')} MiB allocated at the end")  # fmt: skip
    peak = f"peak reserved {report.get('peak_reserved_mib', '?')} MiB, allocated {report.get('peak_allocated_mib', '?')} MiB"
    if report.get("decode_rings_mib"):  # the decoder processes' rings: driver memory, outside the allocator
        peak += f", decoder processes' rings {report['decode_rings_mib']} MiB"
    parts = ", ".join(f"{k} {v.get('mib')}" for k, v in (report.get("parts") or {}).items())
    batch = report.get("batch_size")
    lowered = f" (lowered from {report.get('requested_batch_size')})" if batch != report.get("requested_batch_size") else ""
    return f"gpu memory: budget {report['budget_mib']} MiB: {parts} MiB; batch {batch}{lowered}; {peak}"


def _stage_timing(ms: "Mapping[str, Any] | None") -> str:
    """``"ms per frame: decode 0.80, model 2.10, track 0.31, annotate 4.02"`` when stages after
    detection ran (a run with none keeps its summary as it was); ``""`` otherwise."""
    if not ms:
        return ""
    extra = [k for k in ms if k not in _STEP_ORDER and k != "stages"]
    if not extra:
        return ""
    names = [k for k in _STEP_ORDER if k in ms] + extra
    parts = [f"{k} {ms[k]:.2f}" for k in names if isinstance(ms[k], (int, float))]
    return "ms per frame: " + ", ".join(parts) if parts else ""

