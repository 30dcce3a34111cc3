"""``vidpipe bench decode|e2e|images|streams|soak|startup``: vidpipe and its peers, measured in one run on one input.

Each prints a markdown table and writes ``<out>/bench_<kind>.{md,json,png}``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from vidpipe.cli._process_args import process_count, process_count_or_auto
from vidpipe.cli._soak_args import frame_size
from vidpipe.sources.options import DECODE_LATENCIES, LiveOptions

CACHE_HELP = ("keep the generated media in DIR and reuse them in later runs (default: a temporary folder, "
              "removed at the end)")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return value


def _copies(text: str) -> int:
    from vidpipe.bench.startup import MAX_COPIES

    value = _positive_int(text)
    if value > MAX_COPIES:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_COPIES} copies, got {text!r}")
    return value


def add_parser(sub, common) -> None:
    p = sub.add_parser("bench", parents=[common], help="benchmark vidpipe against its peers")
    kinds = p.add_subparsers(dest="bench", metavar="KIND")
    kinds.required = True

    d = kinds.add_parser("decode", parents=[common], help="video decode: PyAV, OpenCV, NVDEC, segment-parallel NVDEC, DALI")
    d.add_argument("inputs", nargs="*", metavar="INPUT")
    d.add_argument("--generate", default=None, help="generate clips instead: e.g. 1080p-h264,1080p-hevc,2160p-hevc")
    d.add_argument("--frames", type=_positive_int, default=None, help="frames per generated clip")
    d.add_argument("--device", default="auto")
    d.add_argument("--out", default="bench-out", help="folder for the report (default: %(default)s)")
    d.add_argument("--cache-dir", metavar="DIR", default=None, help=CACHE_HELP)
    d.set_defaults(func=run_decode)

    e = kinds.add_parser("e2e", parents=[common], help="end to end: baseline, OpenCV loader, vidpipe CPU and GPU paths")
    e.add_argument("inputs", nargs="*", metavar="INPUT")
    e.add_argument("--generate", default=None,
                   help="generate a clip instead: e.g. 1080p-h264 (no objects), street-1080p (real footage, "
                        "looped), street-crowd-1080p (the same in 2 x 2 tiles: about 3x the objects)")
    e.add_argument("--frames", type=_positive_int, default=None, help="frames of the generated clip")
    e.add_argument("--device", default="auto")
    e.add_argument("--model", default="yolov3-tiny")
    e.add_argument("--batch-size", type=int, default=32)
    e.add_argument("--cpu-frames", type=_positive_int, default=64, metavar="N",
                   help="frames of the peers whose model runs on the CPU (default: %(default)s)")
    e.add_argument("--out", default="bench-out", help="folder for the report (default: %(default)s)")
    e.add_argument("--cache-dir", metavar="DIR", default=None, help=CACHE_HELP)
    e.add_argument("--annotate", action="store_true",
                   help="also each vidpipe peer with drawing (+draw) and drawing + encoding (+annotate)")
    e.add_argument("--track", action="store_true",
                   help="also each vidpipe peer with tracking (+track: track=True, as detect --track)")
    e.set_defaults(func=run_e2e)

    i = kinds.add_parser("images", parents=[common], help="JPEG datasets: PIL/OpenCV threads, nvJPEG, DALI, vidpipe")
    i.add_argument("inputs", nargs="*", metavar="INPUT")
    i.add_argument("--generate", default="1080p-jpeg", help="preset of generated JPEGs (default: %(default)s)")
    i.add_argument("--count", type=int, default=2000, help="generated images (default: %(default)s)")
    i.add_argument("--device", default="auto")
    i.add_argument("--batch-size", type=int, default=64)
    i.add_argument("--threads", type=int, default=None)
    i.add_argument("--out", default="bench-out", help="folder for the report (default: %(default)s)")
    i.add_argument("--cache-dir", metavar="DIR", default=None, help=CACHE_HELP)
    i.set_defaults(func=run_images)

    s = kinds.add_parser("streams", parents=[common],
                         help="live cameras: N paced 1080p30 RTMP streams from a real server, latency and drops")
    s.add_argument("--streams", default="8,16,32,64", metavar="N[,N...]",
                   help="stream counts to measure, ascending (default: %(default)s)")
    s.add_argument("--seconds", type=float, default=20.0, help="measured seconds per count (default: %(default)s)")
    s.add_argument("--warmup", type=float, default=8.0, help="seconds before measuring (default: %(default)s)")
    s.add_argument("--repeat", type=_positive_int, default=1, metavar="N",
                   help="runs per stream count, each a new run (drops and tails vary between runs; default: 1)")
    s.add_argument("--input", default=None, metavar="CLIP",
                   help="clip to publish (default: the bundled street clip scaled to --size at 30 fps)")
    s.add_argument("--size", default="1920x1080", help="size of the default clip (default: %(default)s)")
    s.add_argument("--device", default="auto")
    s.add_argument("--model", default="yolov3-tiny")
    s.add_argument("--batch-size", type=_positive_int, default=None,
                   help="frames per model call (default: vidpipe.detect's, 32, or the stream count if fewer)")
    s.add_argument("--batch-timeout", type=float, default=None, metavar="S",
                   help="seconds a partial batch waits (default: one frame interval)")
    s.add_argument("--decoder", default="auto", help="video decoder of the streams: auto, nvdec, pyav")
    s.add_argument("--live-processes", type=process_count, default=None, metavar="N",
                   help="decoder processes for the streams (0: threads; default: automatic, see LiveOptions.processes)")
    s.add_argument("--queue-frames", type=_positive_int, default=None, metavar="N",
                   help=f"frames held per stream while the model is busy (LiveOptions.queue_frames; default {LiveOptions.queue_frames})")
    s.add_argument("--decode-latency", default="auto", choices=DECODE_LATENCIES,
                   help="when NVDEC hands frames out (LiveOptions.decode_latency; default: auto)")
    s.add_argument("--in-flight", type=_positive_int, default=None, metavar="N",
                   help="batches on the GPU while the oldest is post-processed "
                        "(PipelineConfig.batches_in_flight; default: vidpipe.detect's)")
    s.add_argument("--nginx-root", default=None, metavar="DIR",
                   help="nginx + libnginx-mod-rtmp unpacked with dpkg -x (default: the system's)")
    s.add_argument("--per-process", type=_positive_int, default=8, help="streams per publisher process")
    s.add_argument("--annotate", action="store_true",
                   help="also draw every stream's frames and encode them to a video per stream (libx264 in a "
                        "process per stream, as detect --annotate DIR/), in a temporary folder")
    s.add_argument("--annotate-option", action="append", default=[], metavar="KEY=VALUE", type=_encoder_option,
                   help="a libx264 option of --annotate over vidpipe's defaults (preset=veryfast, crf=23), "
                        "e.g. preset=ultrafast or threads=2; repeat for several")
    s.add_argument("--out", default="bench-out", help="folder for the report (default: %(default)s)")
    s.add_argument("--cache-dir", metavar="DIR", default=None, help=CACHE_HELP)
    s.set_defaults(func=run_streams)

    u = kinds.add_parser("startup", parents=[common],
                         help="start-up: `vidpipe detect` in fresh processes beside PyTorch's own start (the floor)")
    u.add_argument("input", nargs="?", default=None, metavar="INPUT",
                   help="the video (default: the bundled street clip); with --lengths, the footage to scale and loop")
    u.add_argument("--device", default="auto")
    u.add_argument("--decoder", default="auto", help="passed to vidpipe detect (default: %(default)s)")
    u.add_argument("--repeat", type=_positive_int, default=3, help="runs of each, alternating (default: %(default)s)")
    u.add_argument("--decoder-processes", type=_process_series, default=(None,), metavar="N[,N...]",
                   help="a series of runs per value of detect's --decoder-processes, e.g. auto,0 (default: auto)")
    u.add_argument("--copies", type=_copies, default=1, metavar="K",
                   help="each run decodes K copies of the input at once (several files sharing the decoder "
                        "processes; default: 1)")
    u.add_argument("--api", action="store_true",
                   help="also each run through vidpipe.detect from a Python script (a vidpipe.detect series)")
    u.add_argument("--versus-bench", action="store_true",
                   help="also bench e2e's vidpipe-gpu rate on the input (GPU), and the targets against it")
    u.add_argument("--lengths", type=_lengths, default=None, metavar="N[,N...]",
                   help="measure INPUT scaled to --size and looped to each of these frame counts, e.g. "
                        "4800,15000,30000 with --decoder-processes 0,4: where decoder processes start to pay")
    u.add_argument("--size", type=frame_size, default=(1920, 1080), metavar="WxH",
                   help="frame size of the --lengths clips (default: 1920x1080)")
    u.add_argument("--out", default="bench-out", help="folder for the report (default: %(default)s)")
    u.add_argument("--cache-dir", metavar="DIR", default=None, help="with --lengths: " + CACHE_HELP)
    u.set_defaults(func=run_startup)

    from vidpipe.cli._soak_args import add_soak_parser

    add_soak_parser(kinds, common)

    from vidpipe.cli._track_args import add_bench_track_parser

    add_bench_track_parser(kinds, common)
    from vidpipe.cli.follow import add_bench_follow_parser

    add_bench_follow_parser(kinds, common)


def _show(result, args: argparse.Namespace, name: str) -> int:
    paths = result.write(Path(args.out), name)
    print(result.markdown())
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    if args.cache_dir is not None:
        from vidpipe.bench.workdir import folder_bytes

        mb = folder_bytes(args.cache_dir) / 1e6
        print(f"generated media kept in {args.cache_dir} ({mb:,.1f} MB); delete the folder to free the space")
    return 0


def run_decode(args: argparse.Namespace) -> int:
    from vidpipe.bench.decode import run_decode_bench

    result = run_decode_bench(
        args.inputs or None, generate=args.generate, frames=args.frames, device=args.device, work_dir=args.cache_dir
    )
    return _show(result, args, "bench_decode")


def run_e2e(args: argparse.Namespace) -> int:
    from vidpipe.bench.e2e import run_e2e_bench

    result = run_e2e_bench(
        args.inputs or None,
        generate=args.generate,
        frames=args.frames,
        device=args.device,
        model=args.model,
        batch_size=args.batch_size,
        cpu_frames=args.cpu_frames,
        work_dir=args.cache_dir,
        annotate=args.annotate,
        track=args.track,
    )
    return _show(result, args, "bench_e2e")


def run_images(args: argparse.Namespace) -> int:
    from vidpipe.bench.images import bench_images

    result = bench_images(
        args.inputs or None,
        generate=args.generate,
        count=args.count,
        device=args.device,
        batch_size=args.batch_size,
        threads=args.threads,
        work_dir=args.cache_dir,
    )
    return _show(result, args, "bench_images")


def run_startup(args: argparse.Namespace) -> int:
    from vidpipe.bench.startup import run_startup_bench, run_startup_lengths

    options = dict(device=args.device, repeat=args.repeat, decoder=args.decoder, processes=args.decoder_processes,
                   versus_bench=args.versus_bench, copies=args.copies, api=args.api)  # fmt: skip
    if args.lengths:
        result = run_startup_lengths(args.lengths, source=args.input, size=args.size, cache_dir=args.cache_dir,
                                     **options)  # fmt: skip
    else:
        result = run_startup_bench(args.input, **options)
    return _show(result, args, "bench_startup")


def _lengths(text: str) -> tuple[int, ...]:
    return tuple(_positive_int(part.strip()) for part in text.split(","))


def _process_series(text: str) -> tuple[int | None, ...]:
    return tuple(process_count_or_auto(part.strip()) for part in text.split(","))


def _encoder_option(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip() or not value.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, e.g. preset=ultrafast, got {text!r}")
    return key.strip(), value.strip()


def _stream_counts(text: str) -> list[int]:
    try:
        counts = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise SystemExit(f"vidpipe bench streams: error: invalid --streams {text!r}; expected e.g. 8,16,32,64")
    return counts


def _size(text: str) -> tuple[int, int]:
    w, _, h = text.lower().partition("x")
    if not (w.isdigit() and h.isdigit()) or int(w) < 16 or int(h) < 16 or int(w) % 2 or int(h) % 2:
        raise SystemExit(f"vidpipe bench streams: error: invalid --size {text!r}; expected WIDTHxHEIGHT, even, e.g. 1920x1080")
    return int(w), int(h)


def run_streams(args: argparse.Namespace) -> int:
    from vidpipe.bench.streams import run_streams_bench

    if args.annotate_option and not args.annotate:
        raise SystemExit("vidpipe bench streams: error: --annotate-option needs --annotate")
    result = run_streams_bench(
        streams=_stream_counts(args.streams),
        seconds=args.seconds,
        warmup=args.warmup,
        device=args.device,
        model=args.model,
        batch_size=args.batch_size,
        batch_timeout=args.batch_timeout,
        decoder=args.decoder,
        live_processes=args.live_processes,
        decode_latency=args.decode_latency,
        queue_frames=args.queue_frames,
        clip=args.input,
        size=_size(args.size),
        nginx_root=args.nginx_root,
        per_process=args.per_process,
        work_dir=args.cache_dir,
        repeat=args.repeat,
        annotate=dict(args.annotate_option) if args.annotate else None,
        in_flight=args.in_flight,
    )
    return _show(result, args, "bench_streams")
