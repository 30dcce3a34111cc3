"""``vidpipe follow INPUT --target "sports ball" --size 1280x720 -o out.mp4|rtmp://...``: the
auto-follow virtual camera to a video file or a live stream; and ``vidpipe bench follow``.

The run: decode -> detect (only the target classes) -> track -> follow (plan + render on the
device) -> encode (:class:`vidpipe.encode.VideoWriter`, on its own threads). The per-stage
timings in ms per frame (decode, inference, tracking, camera, encode) are logged every
``--stats-every`` seconds and printed at the end.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from typing import Any

from vidpipe.cli._live_args import LiveWatch, add_live_args, live_options
from vidpipe.cli._track_args import track_options

logger = logging.getLogger("vidpipe.cli")

__all__ = ["add_parser", "add_bench_follow_parser"]

#: FollowConfig fields set by flags: flag dest -> field
_CAMERA = ("margin", "max_zoom", "smooth", "dead_zone", "hold", "ease", "lead")


def _size(text: str) -> tuple[int, int]:
    from vidpipe.follow.window import parse_size

    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_parser(sub, common) -> None:
    from vidpipe.cli._track_args import _buffer
    from vidpipe.cli.detect import _device, _float_in, _int_in

    p = sub.add_parser(
        "follow", parents=[common], help="auto-follow virtual camera: crop that follows a tracked object, to video",
        description="Follow a tracked object (a ball, a person) with a smooth virtual camera cropped out of the "
        "input, and write it to a video file or publish it live (RTMP/RTSP). Prints per-stage timings.",
    )
    p.add_argument("input", metavar="INPUT", help="a video file or a live URL (rtsp://, rtmp://, http://)")
    p.add_argument("--target", default="sports ball",
                   help="class names or ids to follow, comma-separated (default: %(default)s)")
    p.add_argument("--size", type=_size, default=(1280, 720), metavar="WxH",
                   help="output size, even numbers (default: 1280x720)")
    p.add_argument("-o", "--output", required=True, metavar="FILE|URL",
                   help="video file (.mp4, .mkv, .mov, .flv) or live URL (rtmp://..., rtsp://...)")
    p.add_argument("--fps", type=_float_in(0.0, 1000.0, low_open=True), default=None,
                   help="output frame rate (default: the input's, else 30)")
    p.add_argument("--codec", default="libx264", help="video encoder (default: %(default)s)")
    p.add_argument("--audio", action="store_true", help="copy the input's audio into the output")
    p.add_argument("--stats-every", type=_float_in(0.0), default=5.0, metavar="SECONDS",
                   help="log the per-stage timings this often, 0: only at the end (default: %(default)s)")
    g = p.add_argument_group("detection")
    g.add_argument("--model", default="yolov3-tiny", help="bundled model name or a model file (default: %(default)s)")
    g.add_argument("--device", type=_device, default="auto", help="auto, cpu, cuda or cuda:N (default: %(default)s)")
    g.add_argument("--decoder", default="auto", choices=("auto", "nvdec", "pyav", "dali"),
                   help="video decoder (default: %(default)s)")
    g.add_argument("--batch-size", type=_int_in(1, 4096), default=8, metavar="N",
                   help="frames per model call (default: %(default)s; small keeps latency low)")
    g.add_argument("--conf", type=_float_in(0.0, 1.0), default=0.25, help="confidence threshold (default: %(default)s)")
    g.add_argument("--iou", type=_float_in(0.0, 1.0), default=0.45, help="NMS IoU threshold (default: %(default)s)")
    g.add_argument("--imgsz", type=_int_in(32, 8192), default=None, metavar="PIXELS", help="model input size")
    g.add_argument("--dtype", default="auto", choices=("auto", "fp16", "fp32"), help="model precision")
    g.add_argument("--max-frames", type=_int_in(1), default=None, metavar="N", help="at most N frames")
    g.add_argument("--start", type=_float_in(0.0), default=None, metavar="SECONDS", help="first time to process")
    g.add_argument("--end", type=_float_in(0.0, low_open=True), default=None, metavar="SECONDS",
                   help="time to stop at (exclusive)")
    g.add_argument("--strict-gpu", action="store_true", help="fail instead of falling back to the CPU")
    c = p.add_argument_group("camera")
    c.add_argument("--margin", type=_float_in(1.0, 100.0), default=None,
                   help="the window is at least this many times the target's size (default: 4)")
    c.add_argument("--max-zoom", type=_float_in(1.0, 50.0), default=None,
                   help="closest zoom, relative to the wide shot (default: 3)")
    c.add_argument("--smooth", type=_float_in(0.0, 30.0, low_open=True), default=None, metavar="SECONDS",
                   help="time the camera takes to settle on a new aim (default: 0.8)")
    c.add_argument("--dead-zone", type=_float_in(0.0, 0.45), default=None, metavar="SHARE",
                   help="share of the window the target may move without moving the camera (default: 0.08)")
    c.add_argument("--lead", type=_float_in(0.0, 5.0), default=None, metavar="SECONDS",
                   help="aim this far ahead of the target's motion (default: 0.35)")
    c.add_argument("--hold", type=_float_in(0.0, 3600.0), default=None, metavar="SECONDS",
                   help="hold the window this long after the target is lost (default: 1)")
    c.add_argument("--ease", type=_float_in(0.0, 60.0, low_open=True), default=None, metavar="SECONDS",
                   help="then ease back to the wide shot over about this long (default: 1.5)")
    g.add_argument("--track-buffer", type=_buffer, default=None, metavar="SECONDS",
                   help="keep a lost track this long for it to come back (default: 1)")
    add_live_args(p)
    p.set_defaults(func=run, parser=p)


def add_bench_follow_parser(kinds, common) -> None:
    """``vidpipe bench follow``: the camera's smoothness and framing on generated scenes."""
    from vidpipe.follow.scenes import SCENES

    b = kinds.add_parser("follow", parents=[common],
                         help="follow-cam smoothing on generated scenes (jerk, target-in-frame) against naive cameras")
    b.add_argument("--scenes", default=",".join(SCENES), help="generated scenes, comma-separated (default: %(default)s)")
    b.add_argument("--seeds", type=int, default=5, help="seeds per scene, averaged (default: %(default)s)")
    b.add_argument("--json", default=None, metavar="PATH", help="also write the results as JSON to PATH")
    b.add_argument("--pipeline", action="store_true",
                   help="instead: the broadcaster's pipeline live on loopback (RTMP camera -> detect -> track -> "
                   "follow-cam -> RTMP out; needs nginx with the RTMP module)")
    b.add_argument("--seconds", type=float, default=20.0, help="--pipeline: seconds measured (default: %(default)s)")
    b.add_argument("--warmup", type=float, default=5.0, help="--pipeline: seconds before measuring (default: %(default)s)")
    b.add_argument("--device", default="auto", help="--pipeline: device (default: %(default)s)")
    b.add_argument("--input-size", type=_size, default=(1280, 720), metavar="WxH",
                   help="--pipeline: the camera's size (default: 1280x720)")
    b.add_argument("--size", type=_size, default=(1280, 720), metavar="WxH",
                   help="--pipeline: the output's size (default: 1280x720)")
    b.add_argument("--fps", type=float, default=30.0, help="--pipeline: the camera's frame rate (default: %(default)s)")
    b.add_argument("--nginx-root", default=None, metavar="DIR",
                   help="--pipeline: a dpkg -x tree of nginx and libnginx-mod-rtmp (default: the system's)")
    b.set_defaults(func=run_bench_follow)


def run_bench_follow(args: argparse.Namespace) -> int:
    from vidpipe.bench.follow import run_follow_bench, write_json
    from vidpipe.follow.scenes import SCENES

    from vidpipe.cli._track_args import checked_scenes

    scenes = checked_scenes(args, SCENES, "vidpipe bench follow")
    if scenes is None:
        return 2
    if args.pipeline:
        return _bench_pipeline(args)
    result = run_follow_bench(scenes, seeds=args.seeds)
    print(result.table())
    if args.json:
        print(f"wrote {write_json(result, args.json)}")
    return 0


def _bench_pipeline(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from vidpipe.bench.follow_live import format_pipeline, run_pipeline_bench

    if not (args.seconds > 0 and args.warmup >= 0 and args.fps > 0):
        print("vidpipe bench follow: error: --seconds and --fps must be > 0, --warmup >= 0", file=sys.stderr)
        return 2
    try:
        result = run_pipeline_bench(seconds=args.seconds, warmup=args.warmup, device=args.device,
                                    in_size=args.input_size, out_size=args.size, fps=args.fps,
                                    nginx_root=args.nginx_root)  # fmt: skip
    except FileNotFoundError as exc:  # no nginx
        print(f"vidpipe bench follow: error: {exc}", file=sys.stderr)
        return 2
    print(format_pipeline(result))
    if args.json:
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {path}")
    return 0


def _camera_config(args: argparse.Namespace):
    from vidpipe.follow.planner import FollowConfig

    w, h = args.size
    options = {k: getattr(args, k) for k in _CAMERA if getattr(args, k, None) is not None}
    return FollowConfig(aspect=w / h, **options)


def _output_fps(args: argparse.Namespace) -> float:
    if args.fps is not None:
        return float(args.fps)
    from vidpipe.decode.probe import is_url, probe

    if not is_url(args.input):
        try:
            fps = probe(args.input).fps
        except Exception:  # noqa: BLE001 - the run reports an unreadable input itself
            fps = None
        if fps:
            return float(fps)
    logger.info("output frame rate: 30 (give --fps to change it)")
    return 30.0


def _detector(args: argparse.Namespace):
    """The model with NMS keeping only the ``--target`` classes (errors name ``--target``)."""
    from vidpipe.api import build_detector
    from vidpipe.errors import ConfigError
    from vidpipe.models.detector import resolve_classes
    from vidpipe.models.zoo import load_model

    size = None if args.imgsz is None else (args.imgsz, args.imgsz)
    model = load_model(args.model, device=args.device, dtype=args.dtype, input_size=size)
    try:
        ids = resolve_classes(args.target, model.info.names)
    except ConfigError as exc:
        raise ConfigError(f"--target {args.target!r}: {exc}") from None
    return build_detector(model, conf=args.conf, iou=args.iou, classes=list(ids))


def _open_writer(args: argparse.Namespace, fps: float):
    try:
        from vidpipe.encode import VideoWriter
    except ImportError as exc:
        args.parser.error(f"-o {args.output}: video output needs vidpipe.encode, which this build lacks ({exc})")
    w, h = args.size
    return VideoWriter(args.output, width=w, height=h, fps=fps, codec=args.codec,
                       audio_from=args.input if args.audio else None)  # fmt: skip


def run(args: argparse.Namespace) -> int:
    import vidpipe
    from vidpipe.cli._signals import StopOnSignal
    from vidpipe.cli.detect import _check_device
    from vidpipe.follow.stage import FollowStage
    from vidpipe.follow.timing import TimedStage, format_timings, pipeline_timings
    from vidpipe.sources.redact import redact_text
    from vidpipe.track.config import TrackConfig
    from vidpipe.track.stage import TrackerStage

    _check_device(args)
    from vidpipe.decode.probe import is_url

    if args.audio and is_url(args.input):
        args.parser.error("--audio copies the audio of a file INPUT; a live INPUT's audio cannot be copied yet")
    config = _camera_config(args)
    fps = _output_fps(args)
    # one stream at its own rate: a helper process would add a round trip and overlap nothing
    tracker = TimedStage(TrackerStage(track_options(args) or TrackConfig(), worker="inline"))
    state: dict[str, Any] = {"written": 0, "writer": None}

    def sink(meta, image) -> None:
        state["writer"].write(image, pts=meta.pts)
        state["written"] += 1

    detector = _detector(args)
    follow = FollowStage(list(detector.config.classes or ()), sink=sink, size=args.size, config=config,
                         nominal_fps=fps)  # fmt: skip
    det_run = vidpipe.detect(
        args.input, model=detector, device=args.device, decoder=args.decoder, batch_size=args.batch_size,
        max_frames=args.max_frames, start=args.start, end=args.end, strict_gpu=args.strict_gpu,
        live=live_options(args), stages=[tracker, follow],
    )  # fmt: skip
    try:
        writer = state["writer"] = _open_writer(args, fps)
    except BaseException:
        det_run.close()
        raise
    watch = LiveWatch.from_args(args, det_run)
    last = time.monotonic()
    with StopOnSignal(det_run.stop) as interrupt, watch:
        try:
            for batch in det_run.batches():
                watch.observe(batch)
                if args.stats_every and time.monotonic() - last >= args.stats_every:
                    last = time.monotonic()
                    logger.info("follow: %d frames; ms per frame: %s", state["written"],
                                format_timings(pipeline_timings(det_run, tracker, follow, writer)))  # fmt: skip
        finally:
            det_run.close()
            watch.close()
            writer.close()  # flushes; raises the encoder's error, if any
    summary = det_run.summary()
    timings = pipeline_timings(det_run, tracker, follow, writer)
    rep = follow.report()
    stats = det_run.get_stats()
    if not args.quiet:
        share = rep.get("target_in_frame")
        lat = stats.get("latency_ms") or {}
        print(f"followed {args.target!r}: {state['written']} frames at {args.size[0]}x{args.size[1]} to "
              f"{redact_text(args.output)}; target detected in {rep.get('frames_with_target', 0)} frames, inside the "
              f"window in {'-' if share is None else f'{100 * share:.1f} %'} of them; {summary.fps:.1f} fps")  # fmt: skip
        print(f"ms per frame: {format_timings(timings)}")
        if lat.get("count"):
            print(f"latency capture->result ms: p50 {lat['p50']:.1f}, p99 {lat['p99']:.1f}")
    stopped_by = interrupt.signal_name
    if stopped_by is not None:
        print(f"vidpipe: interrupted ({stopped_by}) after {state['written']} frames", file=sys.stderr)
        return interrupt.exit_code or 130
    bad = [s for s in summary.sources if s.status != "ok"]
    for s in bad:
        print(f"vidpipe: error: {redact_text(s.error or s.source + ': ' + s.status)}", file=sys.stderr)
    return 2 if bad else 0
