"""``vidpipe bench decode|e2e|images``: vidpipe and its peers, measured in one run on one input.

Each prints a markdown table and writes ``<out>/bench_<kind>.{md,json,png}``.
"""

from __future__ import annotations

import argparse
from pathlib import Path


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


def add_parser(sub, common) -> None:
    p = sub.add_parser("bench", parents=[common], help="benchmark vidpipe against its peers")
    kinds = p.add_subparsers(dest="bench", metavar="KIND")
    kinds.required = True

    d = kinds.add_parser("decode", parents=[common], help="video decode: PyAV, OpenCV, NVDEC, segment-parallel NVDEC, DALI")
    d.add_argument("inputs", nargs="*", metavar="INPUT")
    d.add_argument("--generate", default=None, help="generate clips instead: e.g. 1080p-h264,1080p-hevc,2160p-hevc")
    d.add_argument("--frames", type=int, default=None, help="frames per generated clip")
    d.add_argument("--device", default="auto")
    d.add_argument("--out", default="bench-out", help="folder for the report (default: %(default)s)")
    d.add_argument("--cache-dir", metavar="DIR", default=None, help=CACHE_HELP)
    d.set_defaults(func=run_decode)

    e = kinds.add_parser("e2e", parents=[common], help="end to end: baseline, OpenCV loader, vidpipe CPU and GPU paths")
    e.add_argument("inputs", nargs="*", metavar="INPUT")
    e.add_argument("--generate", default=None, help="generate a clip instead: e.g. 1080p-h264")
    e.add_argument("--frames", type=int, default=None, help="frames of the generated clip")
    e.add_argument("--device", default="auto")
    e.add_argument("--model", default="yolov3-tiny")
    e.add_argument("--batch-size", type=int, default=32)
    e.add_argument("--cpu-frames", type=_positive_int, default=64, metavar="N",
                   help="frames of the peers whose model runs on the CPU (default: %(default)s)")
    e.add_argument("--out", default="bench-out", help="folder for the report (default: %(default)s)")
    e.add_argument("--cache-dir", metavar="DIR", default=None, help=CACHE_HELP)
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
