"""``vidpipe detect INPUT...``: detections of videos, image folders or images to CSV/JSONL/Parquet."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

logger = logging.getLogger("vidpipe.cli")

WRITE_EVERY = 256  # frames buffered per sink before a write (one host copy per write)


def add_parser(sub, common) -> None:
    p = sub.add_parser(
        "detect",
        parents=[common],
        help="detect objects in videos, image folders or images",
        description="Detect objects and write one row per detection. Without INPUT, runs on the bundled sample video.",
    )
    p.add_argument("inputs", nargs="*", metavar="INPUT", help="video files, folders of images, globs, images")
    p.add_argument("--model", default="yolov3-tiny", help="bundled model name or a model file (default: %(default)s)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default: %(default)s)")
    p.add_argument("--decoder", default="auto", help="auto, nvdec, pyav or dali (default: %(default)s)")
    p.add_argument("--batch-size", type=int, default=32, help="frames per model call (default: %(default)s)")
    p.add_argument("--frame-skip", type=int, default=1, metavar="N", help="keep every N-th frame (default: 1, all)")
    p.add_argument("--max-frames", type=int, default=None, metavar="N", help="at most N frames per video")
    p.add_argument("--start", type=float, default=None, metavar="SECONDS", help="first time to process")
    p.add_argument("--end", type=float, default=None, metavar="SECONDS", help="time to stop at (exclusive)")
    p.add_argument("--conf", type=float, default=0.25, help="confidence threshold (default: %(default)s)")
    p.add_argument("--iou", type=float, default=0.45, help="NMS IoU threshold (default: %(default)s)")
    p.add_argument("--classes", default=None, help="comma-separated class names or ids to keep, e.g. person,car")
    p.add_argument("--imgsz", type=int, default=None, help="model input size (default: the model's)")
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
        help="one table for all inputs (.csv, .jsonl, .parquet); default: <input>.detections.csv per input",
    )
    p.add_argument("--strict-gpu", action="store_true", help="fail instead of falling back to the CPU on a GPU device")
    p.add_argument("--progress", choices=("auto", "on", "off"), default="auto", help="progress bar (auto: on a terminal)")
    p.set_defaults(func=run)


def _output_for(source: str) -> Path:
    """``<input>.detections.csv`` beside the input, or in the current folder if that is read-only."""
    from vidpipe.sinks.paths import default_output_path

    path = default_output_path(source)
    if not os.access(path.parent, os.W_OK):
        fallback = Path.cwd() / path.name
        logger.info("%s is not writable; writing %s instead", path.parent, fallback)
        return fallback
    return path


def run(args: argparse.Namespace) -> int:
    import vidpipe
    from vidpipe.data import sample_video

    inputs = list(args.inputs)
    if not inputs:
        inputs = [str(sample_video())]
        logger.info("no INPUT given: running on the bundled sample video %s", inputs[0])
    det_run = vidpipe.detect(
        inputs,
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
        imgsz=args.imgsz,
        names=args.names,
        head=args.head,
        dtype=args.dtype,
        strict_gpu=args.strict_gpu,
        results_on_host=True,
        letterbox=args.letterbox,
    )
    names = det_run.detector.names
    sinks = _SinkRouter(args.output, names=names, sample=not args.inputs)
    show = args.progress == "on" or (args.progress == "auto" and not args.quiet and sys.stderr.isatty())
    bar = _progress(det_run, enabled=show)
    try:
        pending = []
        for result in det_run:
            pending.append(result)
            bar.update(1)
            if len(pending) >= WRITE_EVERY:
                sinks.write(pending)
                pending = []
        sinks.write(pending)
    except BaseException as exc:
        det_run.close()
        sinks.abort(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__, det_run)
        raise
    finally:
        bar.close()
    summary = sinks.close(det_run)
    print(summary.format_text())
    bad = [s for s in summary.sources if s.status != "ok"]
    for s in bad:
        print(f"vidpipe: error: {s.error or s.source + ': ' + s.status}", file=sys.stderr)
    return 2 if bad else 0


class _SinkRouter:
    """One table for all inputs (``--output``) or one per input, created on its first frame."""

    def __init__(self, output: str | None, *, names, sample: bool) -> None:
        from vidpipe.sinks import make_sink

        self._names = names
        self._sample = sample
        self._single = make_sink(output, names=names) if output else None
        self._per_source: dict[int, object] = {}

    def _sink_for(self, result):
        if self._single is not None:
            return self._single
        sink = self._per_source.get(result.stream_id)
        if sink is None:
            from vidpipe.sinks import make_sink

            # The bundled sample lives inside the installed package: write its table here instead.
            path = Path.cwd() / _output_for(result.source).name if self._sample else _output_for(result.source)
            sink = make_sink(path, names=self._names)
            self._per_source[result.stream_id] = sink
        return sink

    def _all(self):
        return ([self._single] if self._single is not None else []) + list(self._per_source.values())

    def write(self, results) -> None:
        if not results:
            return
        groups: dict[int, list] = {}
        for r in results:
            groups.setdefault(id(self._sink_for(r)), []).append(r)
        by_id = {id(s): s for s in self._all()}
        for key, rs in groups.items():
            by_id[key].write(rs)

    def _outputs(self) -> list[str]:
        return [o for s in self._all() for o in s.outputs]

    def close(self, det_run):
        summary = det_run.summary(outputs=self._outputs())
        for s in self._all():
            s.close(summary)
        return summary

    def abort(self, reason: str, det_run) -> None:
        summary = det_run.summary(outputs=self._outputs())
        for s in self._all():
            s.abort(reason, summary)


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _progress(det_run, *, enabled: bool):
    """A tqdm bar over frames whose total grows as each input reports its frame count."""
    if not enabled:
        return _NoBar()
    from tqdm import tqdm

    bar = tqdm(unit="frame", dynamic_ncols=True, file=sys.stderr, smoothing=0.1)

    class _Bar:
        def update(self, n: int) -> None:
            known = [st.expected_frames for st in det_run.states]
            if all(k is not None for k in known):
                total = sum(known)
                if bar.total != total:
                    bar.total = total
                    bar.refresh()
            bar.update(n)

        def close(self) -> None:
            bar.close()

    return _Bar()
