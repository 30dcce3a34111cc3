"""``vidpipe detect INPUT...``: detections of videos, image folders or images to CSV/JSONL/Parquet.

Every batch of results is written as soon as it is detected (CSV and JSONL are readable while the
run goes on and valid after any stop, even SIGKILL; see :mod:`vidpipe.sinks.table`). Ctrl-C or
SIGTERM stop the run cleanly: what was detected is written, the output is marked partial, the
exit code is 130 (SIGINT) or 143 (SIGTERM). ``--resume`` continues a killed or interrupted run
from its tables (:mod:`vidpipe.cli._resume`).
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from vidpipe.cli._annotate_args import add_annotate_args, annotate_stages, check_blur
from vidpipe.cli._embed_args import add_embed_args, with_embed_stages
from vidpipe.cli._event_args import add_event_args, detect_events
from vidpipe.cli._live_args import LiveWatch, add_live_args, live_options
from vidpipe.cli._process_args import process_count_or_auto
from vidpipe.cli._resume import add_resume_arg, resume_setup
from vidpipe.cli._zone_args import add_zone_args, needs_tracking, zone_stages
from vidpipe.cli._track_args import add_track_args, track_options

if TYPE_CHECKING:
    from vidpipe.decode.prestart import Prestart

logger = logging.getLogger("vidpipe.cli")

FORMATS = ("csv", "jsonl", "parquet")
_DEVICE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")


def _int_in(low: int, high: int | None = None):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < low or (high is not None and value > high):
            bound = f">= {low}" if high is None else f"from {low} to {high}"
            raise argparse.ArgumentTypeError(f"expected a whole number {bound}, got {text}")
        return value

    return parse


def _float_in(low: float, high: float | None = None, *, low_open: bool = False):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        bad = value != value or (value <= low if low_open else value < low) or (high is not None and value > high)
        if bad:
            lo = f"> {low}" if low_open else f">= {low}"
            raise argparse.ArgumentTypeError(f"expected a number {lo}" + (f" and <= {high}" if high is not None else "")
                                             + f", got {text}")
        return value

    return parse


def _gpu_memory(text: str) -> "int | float":
    """``--max-gpu-memory``: bytes with a unit (4GiB, 512MiB) or a fraction of the card (0.5)."""
    from vidpipe.errors import ConfigError
    from vidpipe.gpu_memory import parse_gpu_memory

    try:
        value = parse_gpu_memory(text)
    except ConfigError:
        raise argparse.ArgumentTypeError(
            f"expected a size such as 4GiB, 512MiB or a byte count, or a fraction of the GPU's memory such as 0.5, "
            f"got {text!r}"
        ) from None
    return value  # type: ignore[return-value]  # a string never parses to None


def _device(text: str) -> str:
    if not _DEVICE.match(text.strip().lower()):
        raise argparse.ArgumentTypeError(f"expected auto, cpu, cuda or cuda:N, got {text!r}")
    return text.strip().lower()


def add_parser(sub, common) -> None:
    p = sub.add_parser(
        "detect",
        parents=[common],
        help="detect objects in videos, image folders or images",
        description=(
            "Detect objects and write one row per detection. Without INPUT, runs on the bundled "
            "sample video. Rows are written as they are detected; Ctrl-C stops and keeps them."
        ),
    )
    p.add_argument("inputs", nargs="*", metavar="INPUT", help="video files, folders of images, globs, images, URLs")
    p.add_argument(
        "--model", default="yolov3-tiny",
        help="bundled model name or a model file: Darknet .cfg (+ .weights), ONNX .onnx, TorchScript "
        ".pt/.torchscript, torch.export .pt2 (default: %(default)s)",
    )
    p.add_argument("--device", type=_device, default="auto", help="auto, cpu, cuda or cuda:N (default: %(default)s)")
    p.add_argument("--decoder", default="auto", choices=("auto", "nvdec", "pyav", "dali"),
                   help="video decoder (default: %(default)s: NVDEC on a GPU when it can, else PyAV)")
    p.add_argument("--batch-size", type=_int_in(1, 4096), default=32, metavar="N",
                   help="frames per model call (default: %(default)s)")
    p.add_argument("--frame-skip", type=_int_in(1), default=1, metavar="N", help="keep every N-th frame (default: 1, all)")
    p.add_argument("--max-frames", type=_int_in(1), default=None, metavar="N", help="at most N frames per video")
    p.add_argument("--start", type=_float_in(0.0), default=None, metavar="SECONDS", help="first time to process")
    p.add_argument("--end", type=_float_in(0.0, low_open=True), default=None, metavar="SECONDS",
                   help="time to stop at (exclusive)")
    p.add_argument("--conf", type=_float_in(0.0, 1.0), default=0.25, help="confidence threshold (default: %(default)s)")
    p.add_argument("--iou", type=_float_in(0.0, 1.0), default=0.45, help="NMS IoU threshold (default: %(default)s)")
    p.add_argument("--max-det", type=_int_in(1), default=300, metavar="N",
                   help="most detections per frame, the best-scored (default: %(default)s)")
    p.add_argument("--agnostic", action="store_true",
                   help="class-agnostic NMS: overlapping boxes of different classes suppress each other")
    p.add_argument("--classes", default=None, help="comma-separated class names or ids to keep, e.g. person,car")
    p.add_argument("--imgsz", type=_int_in(32, 8192), default=None, metavar="PIXELS",
                   help="model input size (default: the model's)")
    p.add_argument("--names", default=None, metavar="FILE", help="class names file (.names/.txt/.json/.yaml)")
    p.add_argument(
        "--head", default=None, choices=("yolov5", "yolov8", "detr", "rfdetr", "torchvision"),
        help="output head of the model (default: detected from its output shapes)",
    )
    p.add_argument("--dtype", default="auto", choices=("auto", "fp16", "fp32"), help="model precision (default: %(default)s)")
    p.add_argument(
        "--letterbox", choices=("square", "rect"), default="square",
        help="square: the model's full input (Darknet's); rect: trim padding to the stride (faster)",
    )
    p.add_argument(
        "--output", "-o", default=None, metavar="PATH",
        help="FILE: one table for all inputs, in input order (.csv, .jsonl, .parquet); FOLDER/: one table "
        "per input inside it; -: stream rows to stdout (JSONL unless --format csv); "
        "default: <input>.detections.csv beside each input",
    )
    p.add_argument("--format", choices=FORMATS, default=None,
                   help="table format (default: by the --output extension; csv per input; jsonl on stdout)")
    p.add_argument("--max-gpu-memory", type=_gpu_memory, default=None, metavar="SIZE",
                   help="one bound on the run's GPU memory (frame buffers, rings, batches, the model): "
                   "4GiB, 512MiB, or a fraction of the card such as 0.5 (default: no bound)")
    p.add_argument("--decoder-processes", type=process_count_or_auto, default=None, metavar="N",
                   help="NVDEC sessions in N decoder processes (0: threads in this one; default: auto, started "
                   "with the command for a long video file, see vidpipe.decode.prestart)")
    p.add_argument("--strict-gpu", action="store_true", help="fail instead of falling back to the CPU on a GPU device")
    p.add_argument("--progress", choices=("auto", "on", "off"), default="auto",
                   help="progress bar on stderr (auto: on a terminal, off with -q)")
    p.add_argument("--rotate", choices=("none", "hourly"), default="none",
                   help="hourly: one complete table per hour (dets-2026-11-26T10.csv), by capture time for live "
                   "inputs, else the wall clock, each with its metadata (default: %(default)s)")
    p.add_argument("--preview", action="store_true",
                   help="serve a live preview page at http://HOST:PORT/preview beside the metrics (needs "
                   "--metrics-port): one tile per input with its frames (MJPEG) and its numbers")
    add_resume_arg(p)
    add_live_args(p)
    add_embed_args(p)
    add_zone_args(p)
    add_event_args(p)
    add_track_args(p)
    add_annotate_args(p)
    p.set_defaults(func=run, parser=p)


def _tracker(args: argparse.Namespace) -> list:
    """``[TrackerStage]`` for ``--track`` (or ``--line``/``--zone``, which count tracks), else
    ``[]``. In the chain after ``--embeddings``' embed stage, so appearance helps the matching."""
    options = track_options(args)
    if options is None and not needs_tracking(args):
        return []
    from vidpipe.track.stage import TrackerStage

    return [TrackerStage(options)]


def _preview(args: argparse.Namespace) -> tuple:
    """``(hub, [PreviewStage])`` for ``--preview``, else ``(None, [])``: the annotated frames
    (boxes, labels, track ids, ``--line``/``--zone``). Last in the chain, so the frames it shows
    carry what the other stages found."""
    if not getattr(args, "preview", False):
        return None, []
    if args.metrics_port is None:
        args.parser.error("--preview needs --metrics-port PORT (the page is served beside the metrics; 0: a free port)")
    from vidpipe.cli._annotate_args import annotator
    from vidpipe.preview import PreviewHub, PreviewStage

    hub = PreviewHub()  # frames drawn only while a browser watches (and once a second for a late one)
    return hub, [PreviewStage(hub, render=annotator(args))]  # what --annotate draws, --blur included


def _output_spec(args: argparse.Namespace):
    """The ``--output``/``--format`` of ``args`` as an :class:`OutputSpec` (parser errors name flags)."""
    from vidpipe.sinks.outputs import OutputSpec
    from vidpipe.sinks.paths import TABLE_EXTENSIONS

    parser: argparse.ArgumentParser = args.parser
    fmt = args.format or "auto"
    out = args.output
    rotate = getattr(args, "rotate", "none")
    if out is None:
        return OutputSpec("beside", None, args.format or "csv", here=not args.inputs, rotate=rotate)
    if out == "-":
        if rotate != "none":
            parser.error("--rotate hourly needs a file or folder output (-o FILE or -o FOLDER/), not stdout")
        if fmt == "parquet":
            parser.error("--format parquet cannot be streamed to stdout (-o -); use csv or jsonl, or a file")
        return OutputSpec("stdout", None, fmt)
    path = Path(out).expanduser()
    if out.endswith(("/", "\\")) or path.is_dir():
        return OutputSpec("folder", path, args.format or "csv", rotate=rotate)
    if fmt == "auto" and path.suffix.lower() not in TABLE_EXTENSIONS:
        got = f"extension {path.suffix!r}" if path.suffix else "no extension"
        parser.error(
            f"cannot tell the format of -o {out} ({got}); end it with {', '.join(TABLE_EXTENSIONS)}, "
            "end it with / for a folder, or give --format"
        )
    return OutputSpec("single", path, fmt, rotate=rotate)


def _prestart(args: argparse.Namespace) -> "Prestart | None":
    """The decode's slow parts start now, beside this process's own start-up: decoder processes
    for a long video file, NVDEC sessions for a shorter one (:mod:`vidpipe.decode.prestart`).
    ``None``: nothing started."""
    from vidpipe.decode.prestart import prestart_decoding

    if not args.inputs or getattr(args, "realtime", None):
        return None
    return prestart_decoding(
        args.inputs, device=args.device, decoder=args.decoder, processes=args.decoder_processes,
        start=args.start, end=args.end, max_frames=args.max_frames, frame_skip=args.frame_skip,
    )  # fmt: skip


def _check_device(args: argparse.Namespace) -> None:
    if not args.device.startswith("cuda"):
        return
    import torch

    if not torch.cuda.is_available():
        args.parser.error(
            f"--device {args.device}: PyTorch sees no CUDA GPU here (torch {torch.__version__}); "
            "use --device cpu, or run `vidpipe doctor` to see why"
        )


def _broken_pipe(exc: BaseException | None) -> bool:
    while exc is not None:
        if isinstance(exc, BrokenPipeError):
            return True
        exc = exc.__cause__
    return False


def _reader_gone(outputs) -> int:
    """The reader of ``-o -`` closed the pipe: stop quietly, like other Unix filters (exit 141)."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # nothing more to flush there at exit
    os.close(devnull)
    try:
        outputs.abort("the reader closed stdout")
    except Exception:  # noqa: BLE001 - the stream is gone; nothing to finalise
        pass
    logger.debug("stdout closed by its reader; stopping")
    return 141


def _print_annotated(summary, out) -> None:
    """One line per ``--annotate`` video: where, frames, encoding cost, waits."""
    for s in (summary.stages.get("annotate") or {}).get("streams", {}).values():
        enc = s.get("encode_ms_per_frame")
        line = (f"annotated: {s['target']}  {s['frames']} frames"
                + (f", encode {enc:.1f} ms/frame" if enc is not None else "")
                + (f", render {s['render_ms_per_frame']:.1f} ms/frame" if s.get("render_ms_per_frame") else "")
                + (f", inference waited {s['blocked_writes']}x ({s['blocked_ms']:.0f} ms)" if s.get("blocked_writes") else "")
                + (f", audio {s['audio']}" if s.get("audio") else "")
                + (f"  error: {s['error']}" if s.get("error") else ""))
        print(line, file=out, flush=True)


def run(args: argparse.Namespace) -> int:
    import vidpipe
    from vidpipe.sinks.outputs import Outputs
    from vidpipe.cli._progress import progress
    from vidpipe.cli._signals import StopOnSignal
    from vidpipe.data import sample_video
    from vidpipe.sources.redact import redact_text

    spec = _output_spec(args)
    early = _prestart(args)  # before PyTorch is imported (by _check_device): the two starts overlap
    _check_device(args)
    hub, preview_stages = _preview(args)
    inputs = list(args.inputs)
    if not inputs:
        inputs = [str(sample_video())]
        logger.info("no INPUT given: running on the bundled sample video %s", inputs[0])
    trackers = _tracker(args)
    setup = resume_setup(args, spec, inputs, tracking=bool(trackers))  # records options; plans --resume
    if not setup.run_inputs:
        if not args.quiet:
            print(f"vidpipe: --resume: every input is done ({len(setup.skipped)} skipped); nothing to do", flush=True)
        return 0
    if early is not None:  # its NVDEC sessions start while PyTorch imports; none during the CUDA graph's capture
        import torch  # noqa: F401 - imported here rather than in vidpipe.detect (``--device auto``)

        early.settle()
    det_run = vidpipe.detect(
        setup.run_inputs,
        model=args.model,
        device=args.device,
        decoder=args.decoder,
        batch_size=args.batch_size,
        frame_skip=args.frame_skip,
        max_frames=args.max_frames,
        start=args.start,
        end=args.end,
        conf=args.conf,
        iou=args.iou,
        classes=args.classes,
        max_det=args.max_det,
        agnostic=args.agnostic,
        imgsz=args.imgsz,
        names=args.names,
        head=args.head,
        dtype=args.dtype,
        strict_gpu=args.strict_gpu,
        decoder_processes=args.decoder_processes,
        max_gpu_memory=args.max_gpu_memory,
        results_on_host=True,
        letterbox=args.letterbox,
        live=live_options(args),
        # embed, track, zones, preview, annotate (drawn + encoded; it may let go of the frames), embeddings writer
        stages=with_embed_stages(
            args, [*trackers, *zone_stages(args), *preview_stages, *annotate_stages(args, inputs)]
        ),
    )
    try:
        check_blur(args, det_run.detector.names)
    except SystemExit:
        det_run.close()
        raise
    outputs = Outputs(spec, det_run, names=det_run.detector.names, events=detect_events(args, det_run, spec),
                      resume=setup)
    show = args.progress == "on" or (args.progress == "auto" and not args.quiet and sys.stderr.isatty())
    watch = LiveWatch.from_args(args, det_run)  # --metrics-port; the per-stream table when live
    if hub is not None and watch.metrics is not None:
        logger.info("preview at %s", watch.metrics.attach_preview(hub))
    bar = progress(det_run, enabled=show and not watch.table)
    with StopOnSignal(det_run.stop) as interrupt, watch:
        try:
            for batch in det_run.batches():
                watch.observe(batch)
                outputs.write(batch)  # rows reach the file now: a kill loses at most this batch
                bar.update(len(batch))
        except BaseException as exc:
            det_run.close()
            bar.close()
            watch.close()
            if hub is not None:
                hub.close()
            if spec.mode == "stdout" and _broken_pipe(exc):  # `vidpipe detect ... -o - | head`
                return _reader_gone(outputs)
            reason = "interrupted (second signal)" if isinstance(exc, KeyboardInterrupt) else (
                f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            )
            try:
                outputs.abort(reason)
            except Exception as abort_exc:  # noqa: BLE001 - the run's own error is the one to report
                logger.warning("%s", abort_exc)
            raise
        bar.close()
        watch.close()
        if hub is not None:
            hub.close()
        stopped_by = interrupt.signal_name  # a signal during the finalising below changes nothing
        if stopped_by is not None:
            summary = outputs.abort(f"interrupted ({stopped_by})")
        else:
            summary = outputs.close()
    summary_out = sys.stderr if spec.mode == "stdout" else sys.stdout
    if not args.quiet:
        print(summary.format_text(errors=False), file=summary_out, flush=True)
        _print_annotated(summary, summary_out)
    if stopped_by is not None:
        print(
            f"vidpipe: interrupted ({stopped_by}) after {summary.frames} frames; "
            "the outputs hold every one of them and are marked partial",
            file=sys.stderr,
        )
        return interrupt.exit_code or 130
    bad = [s for s in summary.sources if s.status != "ok"]
    for s in bad:
        print(f"vidpipe: error: {redact_text(s.error or s.source + ': ' + s.status)}", file=sys.stderr)
    return 2 if bad else 0
