"""``vidpipe bench soak``: its arguments and its run (files or live streams for N minutes; memory
and fps over time; samples written as they are taken)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, NoReturn

__all__ = ["add_soak_parser", "run_soak", "frame_size"]

CMD = "vidpipe bench soak"


def _user_error(message: str) -> NoReturn:
    """Print ``vidpipe bench soak: error: message`` and exit with the user-error code (2)."""
    from vidpipe.cli import EXIT_USER

    print(f"{CMD}: error: {message}", file=sys.stderr)
    raise SystemExit(EXIT_USER)


def _option(text: str) -> tuple[str, Any]:
    key, eq, value = text.partition("=")
    if not eq or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE (a vidpipe.detect argument), got {text!r}")
    try:
        parsed = json.loads(value)  # numbers, true/false, null, lists
    except ValueError:
        parsed = value  # a text: "8GiB", "nvdec"
    return key, parsed


def frame_size(text: str) -> tuple[int, int]:
    w, _, h = text.lower().partition("x")
    if not (w.isdigit() and h.isdigit()) or int(w) < 16 or int(h) < 16 or int(w) % 2 or int(h) % 2:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT, even, e.g. 1920x1080, got {text!r}")
    return int(w), int(h)


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}")
    return int(text)


def add_soak_parser(kinds: Any, common: Any) -> None:
    k = kinds.add_parser("soak", parents=[common],
                         help="a long run: host and GPU memory, threads, descriptors and fps over time")
    k.add_argument("inputs", nargs="*", metavar="INPUT",
                   help="files (run again and again) or stream URLs (one run); default: the bundled street clip; "
                        "with --streams: the clip to publish")
    k.add_argument("--minutes", type=float, default=5.0, help="how long to run (default: %(default)s)")
    k.add_argument("--interval", type=float, default=10.0, help="seconds between samples (default: %(default)s)")
    k.add_argument("--settle", type=float, default=1.0,
                   help="minutes of warm-up before the baseline sample (default: %(default)s)")
    k.add_argument("--streams", type=_count, default=0, metavar="N",
                   help="soak N live RTMP streams of the clip, published (paced, looped) to a local nginx-rtmp "
                        "server (needs nginx and libnginx-mod-rtmp)")
    k.add_argument("--stream-size", type=frame_size, default=(1920, 1080), metavar="WxH",
                   help="size of the published clip (default: 1920x1080)")
    k.add_argument("--stream-fps", type=_count, default=30, metavar="FPS", help="its frame rate (default: 30)")
    k.add_argument("--nginx-root", default=None, metavar="DIR",
                   help="nginx + libnginx-mod-rtmp unpacked with dpkg -x (default: the system's)")
    k.add_argument("--device", default="auto")
    k.add_argument("--model", default="yolov3-tiny")
    k.add_argument("--batch-size", type=int, default=32)
    k.add_argument("--option", action="append", type=_option, default=[], metavar="NAME=VALUE",
                   help="another vidpipe.detect argument, e.g. decoder_processes=4 or max_gpu_memory=8GiB "
                        "(VALUE read as JSON when it is JSON, else as text); repeatable")
    k.add_argument("--out", default="bench-out",
                   help="folder for the report; bench_soak.jsonl there gets each sample as it is taken "
                        "(default: %(default)s)")
    k.add_argument("--cache-dir", metavar="DIR", default=None,
                   help="keep the clip made for --streams in DIR and reuse it (default: a temporary folder)")
    k.add_argument("--from-samples", metavar="JSONL", default=None,
                   help="run nothing: make the report from the samples of an earlier run (one that was killed too)")
    k.set_defaults(func=run_soak)


def run_soak(args: argparse.Namespace) -> int:
    import threading

    from vidpipe.bench.soak import SoakResult, run_soak_bench
    from vidpipe.cli._signals import StopOnSignal
    from vidpipe.errors import ConfigError

    if args.minutes <= 0 or args.interval <= 0 or args.settle < 0:
        _user_error("--minutes and --interval must be positive, --settle >= 0")
    if args.batch_size < 1:
        _user_error("--batch-size must be at least 1")
    if args.streams and len(args.inputs) > 1:
        _user_error(f"--streams publishes one clip; got {len(args.inputs)} inputs")
    signalled = None
    if args.from_samples is not None:
        if not Path(args.from_samples).is_file():
            _user_error(f"--from-samples: no such file: {args.from_samples}")
        result = SoakResult.from_samples(args.from_samples)
    else:
        stop = threading.Event()

        def show(row: dict) -> None:
            gpu = row.get("gpu_process_mib") or row.get("gpu_device_used_mib")
            print(f"soak {row['minutes']:7.2f} min: {row['fps'] or 0:7.0f} fps, RSS {row['rss_mib']:,.0f} MiB"
                  + (f", GPU {gpu:,.0f} MiB" if gpu is not None else "")
                  + f", {row['threads']} threads, {row['fds']} fds, {row['children']} children", flush=True)

        print(f"{CMD}: samples go to {Path(args.out) / 'bench_soak.jsonl'} as they are taken", flush=True)
        with StopOnSignal(stop.set) as signalled:
            try:
                result = run_soak_bench(
                    args.inputs or None, minutes=args.minutes, interval=args.interval, settle=args.settle,
                    device=args.device, model=args.model, batch_size=args.batch_size, streams=args.streams,
                    stream_size=args.stream_size, stream_fps=args.stream_fps, nginx_root=args.nginx_root,
                    work_dir=args.cache_dir, out_dir=args.out, options=dict(args.option), stop=stop,
                    on_sample=show,
                )
            except ConfigError as exc:
                if str(exc).startswith("options:"):
                    _user_error(f"--option: {str(exc).removeprefix('options: ')}")
                raise
            except FileNotFoundError as exc:
                if args.streams and ("nginx" in str(exc) or "rtmp" in str(exc).lower()):
                    _user_error(f"--streams: {exc}")
                raise
    paths = result.write(Path(args.out), "bench_soak")
    print(result.markdown())
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    for key, value in {**result.machine, **result.targets}.items():
        print(f"{key}: {value}")
    sys.stdout.flush()
    return signalled.exit_code if signalled is not None and signalled.exit_code else 0
