"""The video-output flags of ``vidpipe detect``: ``--annotate PATH``, ``--annotate-codec``,
``--blur CLASSES``, and the annotate stage they build (:func:`annotate_stages`).

``--annotate out.mp4`` (one input), ``--annotate DIR/`` (or any PATH with several inputs):
``DIR/<input stem>.annotated.mp4`` per input; ``--annotate rtmp://...`` / ``rtsp://...`` (one
input): a live re-stream. An input is never overwritten.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vidpipe.stages.base import Stage
    from vidpipe.types import FrameMeta

__all__ = ["add_annotate_args", "annotate_stages", "annotator", "check_blur", "AnnotateTargets"]

_LIVE = ("rtmp://", "rtmps://", "rtsp://", "rtsps://")


def add_annotate_args(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("video output (annotated frames)")
    g.add_argument("--annotate", default=None, metavar="PATH",
                   help="write the annotated video: FILE (.mp4, .mkv, .mov, ...; one input), FOLDER/ "
                   "(FOLDER/<input>.annotated.mp4 per input), or an rtmp:// or rtsp:// URL (one input); boxes, "
                   "labels, track ids, lines and zones drawn, the source's timestamps and audio kept")
    g.add_argument("--annotate-codec", choices=("libx264", "libx265", "h264_nvenc", "hevc_nvenc"), default="libx264",
                   help="encoder of --annotate (default: %(default)s); h264_nvenc/hevc_nvenc: the GPU's NVENC "
                   "through PyNvVideoCodec (GPUs with NVENC only; not verified on hardware here: the H100/H200 "
                   "have none; `vidpipe doctor` says whether this GPU has it)")
    g.add_argument("--annotate-preset", default=None, metavar="PRESET",
                   choices=("ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow"),
                   help="encoder speed/size trade-off of --annotate (x264/x265 presets; default: veryfast; "
                   "ultrafast for many streams at once: 1.8x veryfast's frames/s, measured)")
    g.add_argument("--blur", default=None, metavar="CLASSES",
                   help="comma-separated class names or ids whose boxes are blurred in the video output, "
                   "e.g. person,car")


class AnnotateTargets:
    """Where each stream's video goes (``target(meta) -> path or URL``).

    ``mode``: ``"single"`` (``path`` is the file or URL of the one input), or ``"folder"``
    (``path/<stem>.annotated.mp4``, ``-2``, ``-3`` ... when two inputs share a stem).
    """

    def __init__(self, path: str, mode: str, inputs: "list[str]") -> None:
        self.path, self.mode = path, mode
        self._inputs = {_resolved(i) for i in inputs if "://" not in i}
        self._given: dict[int, str] = {}
        self._taken: set[str] = set()

    def __call__(self, meta: "FrameMeta") -> str:
        if meta.stream_id in self._given:
            return self._given[meta.stream_id]
        if self.mode == "single":
            out = self.path
        else:
            from vidpipe.sinks.paths import default_output_path

            name = default_output_path(meta.source, suffix=".annotated.mp4").name
            stem = name[: -len(".annotated.mp4")]
            out, n = str(Path(self.path) / name), 1
            while _resolved(out) in self._taken or _resolved(out) in self._inputs:
                n += 1
                out = str(Path(self.path) / f"{stem}-{n}.annotated.mp4")
        self._taken.add(_resolved(out))
        self._given[meta.stream_id] = out
        return out


def _resolved(path: str) -> str:
    return str(Path(path).expanduser().resolve()) if "://" not in path else path


def annotate_stages(args: argparse.Namespace, inputs: "list[str]") -> "list[Stage]":
    """``[AnnotateStage]`` for ``--annotate``, else ``[]`` (``--blur`` without ``--annotate`` or
    ``--preview``, and ``--annotate-codec`` then are errors). Goes after the tracker and zones
    stages. Errors name the flags."""
    parser: argparse.ArgumentParser = args.parser
    path = getattr(args, "annotate", None)
    if path is None:
        blur_alone = args.blur is not None and not getattr(args, "preview", False)
        for flag, given in (("--blur", blur_alone), ("--annotate-codec", args.annotate_codec != "libx264"),
                            ("--annotate-preset", args.annotate_preset is not None)):
            if given:
                parser.error(f"{flag} needs --annotate (the video it applies to)"
                             + (" or --preview" if flag == "--blur" else ""))
        return []
    target, mode = _check_target(parser, path, inputs, args.annotate_codec)
    if args.annotate_codec.endswith("_nvenc"):
        if args.annotate_preset is not None:
            parser.error("--annotate-preset sets x264/x265 presets; NVENC keeps PyNvVideoCodec's (P4)")
        from vidpipe.encode.nvenc import nvenc_unavailable

        why = nvenc_unavailable(args.device if str(args.device).startswith("cuda") else "cuda")
        if why is not None:
            parser.error(f"--annotate-codec {args.annotate_codec}: {why}; use libx264 or libx265")
    from vidpipe.stages.annotate import AnnotateStage

    return [AnnotateStage(AnnotateTargets(target, mode, inputs), render=annotator(args), codec=args.annotate_codec,
                          options={"preset": args.annotate_preset} if args.annotate_preset else None,
                          release_frames=True, streams=len(inputs))]


def _check_target(parser: argparse.ArgumentParser, path: str, inputs: "list[str]", codec: str) -> tuple[str, str]:
    from vidpipe.encode.targets import parse_target
    from vidpipe.errors import ConfigError
    from vidpipe.sources.redact import redact_url

    if path.lower().startswith(_LIVE):
        if len(inputs) != 1:
            parser.error(f"--annotate {redact_url(path)}: a live URL takes one input (got {len(inputs)})")
        try:
            parse_target(path, codec=codec)
        except ConfigError as exc:
            parser.error(f"--annotate: {exc}")
        return path, "single"
    p = Path(path).expanduser()
    folder = path.endswith(("/", os.sep)) or p.is_dir()
    if not folder and len(inputs) > 1:
        if p.suffix:
            parser.error(f"--annotate {path}: one file cannot hold {len(inputs)} inputs; give a folder "
                         f"(--annotate {p.with_suffix('')}/) for one video per input")
        folder = True
    if folder:
        try:
            p.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            parser.error(f"--annotate {path}: cannot create the folder ({exc.strerror or exc})")
        return str(p), "folder"
    try:
        parse_target(str(p), codec=codec)
    except ConfigError as exc:
        parser.error(f"--annotate: {str(exc).removeprefix('target ')}")
    if not p.parent.is_dir():
        parser.error(f"--annotate {path}: the folder {p.parent} does not exist")
    if any(_resolved(i) == _resolved(str(p)) for i in inputs if "://" not in i):
        parser.error(f"--annotate {path}: that is an input; the video would overwrite it")
    return str(p), "single"


def _blur_classes(args: argparse.Namespace) -> tuple[str | int, ...]:
    if args.blur is None:
        return ()
    items = [c.strip() for c in args.blur.split(",") if c.strip()]
    if not items:
        args.parser.error("--blur: expected class names or ids, e.g. person,car")
    return tuple(int(c) if c.isdigit() else c for c in items)


def check_blur(args: argparse.Namespace, names: "tuple[str, ...] | list[str]") -> None:
    """``--blur``'s classes must be the model's (``names``): a parser error naming the flag."""
    n = len(names)
    for c in _blur_classes(args):
        if isinstance(c, int) and not 0 <= c < n:
            args.parser.error(f"--blur: class id {c} is not one of the model's {n} classes (0-{n - 1})")
        if isinstance(c, str) and c not in names:
            args.parser.error(f"--blur: {c!r} is not a class of the model (e.g. {', '.join(list(names)[:5])})")


def annotator(args: argparse.Namespace) -> Any:
    """The ``Annotator`` of the video outputs (``--annotate``, ``--preview``): ``--line``,
    ``--zone`` and ``--blur``."""
    from vidpipe.draw import Annotator

    blur = _blur_classes(args)
    return Annotator(lines=tuple(getattr(args, "line", None) or ()), zones=tuple(getattr(args, "zone", None) or ()),
                     blur=blur)
