"""The ``vidpipe`` command line: thin wrappers that build configs and call the library.

Exit codes: 0 success; 2 a user error (bad input, bad option, an input that failed or was only
partly read) with one line on stderr (``--debug`` adds the traceback); 130 interrupted (Ctrl-C),
143 terminated (SIGTERM).
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from collections.abc import Sequence

from vidpipe import __version__
from vidpipe.errors import VidpipeError

logger = logging.getLogger("vidpipe.cli")

EXIT_OK = 0
EXIT_USER = 2
EXIT_INTERRUPTED = 130

DESCRIPTION = (
    "Detect objects in videos, image folders and images: fast on NVIDIA GPUs (NVDEC decoding,\n"
    "GPU pre- and post-processing), and on the CPU with PyAV."
)
EPILOG = """examples:
  vidpipe detect video.mp4                    # -> video.detections.csv beside it
  vidpipe detect a.mp4 b.mkv -o dets.parquet  # one table for both, in input order
  vidpipe detect photos/ -o out/ --classes person,car
  vidpipe detect cam.mp4 -o - | jq .          # JSONL rows on stdout
  vidpipe serve serve.yaml --metrics-port 9100  # cameras from a config, until Ctrl-C
  vidpipe info video.mp4                      # codec, size, fps, frame count
  vidpipe doctor                              # what this machine can accelerate, and why not
"""

#: Python argument names -> the CLI flags that set them, for library errors the CLI cannot check
#: before the run (a class name, a names file): each interface speaks its own names.
_FLAGS = {
    "batch_size": "--batch-size", "frame_skip": "--frame-skip", "max_frames": "--max-frames",
    "max_det": "--max-det", "strict_gpu": "--strict-gpu", "classes": "--classes", "names": "--names",
    "imgsz": "--imgsz", "device": "--device", "decoder": "--decoder", "dtype": "--dtype",
    "head": "--head", "letterbox": "--letterbox", "format": "--format", "conf": "--conf", "iou": "--iou",
    "start": "--start", "end": "--end", "model": "--model", "max_gpu_memory": "--max-gpu-memory",
}
_PY_ARG = re.compile(r"\b(" + "|".join(_FLAGS) + r")= ?")


def cli_message(text: str) -> str:
    """A library message with its Python argument names (``batch_size=0``) as CLI flags
    (``--batch-size 0``)."""
    return _PY_ARG.sub(lambda m: _FLAGS[m.group(1)] + " ", text)


class _NotReportedHere(logging.Filter):
    """Drops log records about failed sources: ``detect`` prints each of those once, at the end."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(record, "vidpipe_source_error", False)


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors exit 2 with one line (argparse's default is 2 too)."""


def build_parser() -> argparse.ArgumentParser:
    from vidpipe.cli import bench, detect, doctor, follow, info, serve

    parser = _Parser(
        prog="vidpipe", description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"vidpipe {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    common.add_argument("-q", "--quiet", action="store_true", help="print errors only")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    detect.add_parser(sub, common)
    info.add_parser(sub, common)
    doctor.add_parser(sub, common)
    bench.add_parser(sub, common)
    serve.add_parser(sub, common)
    follow.add_parser(sub, common)
    return parser


def _setup_logging(debug: bool, quiet: bool) -> None:
    """vidpipe's log records to stderr, credentials masked (messages, arguments, tracebacks).

    FFmpeg's own messages reach Python logging only if PyAV's logging is turned on (it is off by
    default, and vidpipe leaves it off: PyAV's log callback can deadlock threaded decoding);
    should it be, the ``libav`` loggers that see URLs carry the same redacting filter
    (:func:`~vidpipe.sources.redact.guard_ffmpeg_logs`), and with ``--debug`` they are shown
    through this handler.
    """
    from vidpipe.sources.redact import RedactingFilter, guard_ffmpeg_logs

    level = logging.DEBUG if debug else (logging.ERROR if quiet else logging.INFO)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s" if debug else "vidpipe: %(message)s"))
    handler.addFilter(RedactingFilter())  # first: what any later filter or the formatter sees is clean
    if not debug:  # --debug shows them as they happen, with their tracebacks
        handler.addFilter(_NotReportedHere())
    root = logging.getLogger("vidpipe")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
    guard_ffmpeg_logs()
    if debug:
        libav = logging.getLogger("libav")
        if handler not in libav.handlers:
            libav.addHandler(handler)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _setup_logging(args.debug, args.quiet)
    from vidpipe.sources.redact import redact_text

    try:
        return int(args.func(args) or 0)
    except VidpipeError as exc:
        if args.debug:
            logger.exception("error")
        print(f"vidpipe: error: {redact_text(cli_message(str(exc)))}", file=sys.stderr)
        return EXIT_USER
    except KeyboardInterrupt:
        print("vidpipe: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - last-resort one-liner; --debug has the traceback
        if args.debug:
            logger.exception("internal error")  # through the redacting handler, not Python's hook
            return 1
        print(
            f"vidpipe: internal error: {type(exc).__name__}: {redact_text(str(exc))} (run with --debug for the traceback)",
            file=sys.stderr,
        )
        return 1


def run() -> None:
    """The ``vidpipe`` command: :func:`main`, then the process ends without Python's teardown
    (:func:`vidpipe.cli._exit.exit_now`). An exception that escapes ``main`` exits as usual."""
    code = main()
    from vidpipe.cli._exit import exit_now

    exit_now(code)


if __name__ == "__main__":  # pragma: no cover
    run()
