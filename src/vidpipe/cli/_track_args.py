"""The tracking flags of ``vidpipe detect`` and ``vidpipe serve``: ``--track`` (a ByteTrack
tracker per input or camera; tables get a ``track_id`` column) and ``--track-buffer SECONDS``
(how long a lost track is kept; implies ``--track``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vidpipe.track.config import TrackConfig

__all__ = ["add_track_args", "track_options"]


def _buffer(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not 0 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"expected seconds from 0 to 3600, got {text}")
    return value


def add_track_args(parser: argparse.ArgumentParser) -> None:
    """Add ``--track`` and ``--track-buffer`` (defaults ``None``: not given)."""
    g = parser.add_argument_group("tracking")
    g.add_argument("--track", action="store_true", default=None,
                   help="follow objects over frames (ByteTrack, one tracker per input or camera): tables get a "
                   "track_id column (empty for detections not in a confirmed track)")
    g.add_argument("--track-buffer", type=_buffer, default=None, metavar="SECONDS",
                   help="keep a lost track this long for it to come back (default: 1; implies --track)")


def track_options(args: argparse.Namespace, *, base: "TrackConfig | None" = None) -> "TrackConfig | None":
    """The tracker's options from the flags over ``base`` (a config file's); ``None``: no tracking."""
    from dataclasses import replace

    from vidpipe.track.config import TrackConfig

    on = bool(getattr(args, "track", None)) or getattr(args, "track_buffer", None) is not None
    if not on:
        return base
    config = base if base is not None else TrackConfig()
    if args.track_buffer is not None:
        config = replace(config, track_buffer=args.track_buffer)
    return config


def add_bench_track_parser(kinds, common) -> None:
    """``vidpipe bench track``: tracker quality on generated scenes (see :mod:`vidpipe.bench.track`)."""
    t = kinds.add_parser("track", parents=[common],
                         help="tracker quality on generated scenes (MOTA, IDF1, ID switches) beside trackers' ByteTrack")
    t.add_argument("--scenes", default="easy,crossing,crowd,drops",
                   help="generated scenes, comma-separated (default: %(default)s)")
    t.add_argument("--seeds", type=int, default=8,
                   help="seeds per scene, averaged (default: %(default)s; with 3, one seed's spread is "
                        "as large as the differences between the trackers)")
    t.add_argument("--clip", default="bundled", metavar="PATH",
                   help="a real video to count tracks on (no ground truth): a path, 'bundled' (bikes.mp4) or 'none'")
    t.add_argument("--device", default="cpu", help="device of the detections (default: %(default)s)")
    t.add_argument("--no-rate", action="store_true", help="skip the rate measurement")
    t.add_argument("--json", default=None, metavar="PATH", help="also write the results as JSON to PATH")
    t.set_defaults(func=run_bench_track)


def checked_scenes(args: argparse.Namespace, known, command: str) -> "list[str] | None":
    """``--scenes`` (comma-separated names among ``known``) and ``--seeds`` (>= 1) of a bench on
    generated scenes: the scene names, or ``None`` after printing the error (exit code 2)."""
    import sys

    scenes = [s.strip() for s in args.scenes.split(",") if s.strip()]
    unknown = [s for s in scenes if s not in known]
    if unknown or not scenes:
        print(f"{command}: error: unknown --scenes {','.join(unknown) or repr(args.scenes)}; "
              f"expected some of {','.join(known)}", file=sys.stderr)  # fmt: skip
        return None
    if args.seeds < 1:
        print(f"{command}: error: --seeds must be 1 or more, got {args.seeds}", file=sys.stderr)
        return None
    return scenes


def run_bench_track(args: argparse.Namespace) -> int:
    import importlib.util
    import sys

    from vidpipe.bench.track_scenes import PRESETS

    if importlib.util.find_spec("motmetrics") is None:
        print('vidpipe bench track: error: needs the motmetrics package; pip install "vidpipe[track-bench]" '
              "(or pip install motmetrics trackers)", file=sys.stderr)  # fmt: skip
        return 2
    scenes = checked_scenes(args, PRESETS, "vidpipe bench track")
    if scenes is None:
        return 2
    clip = None
    if args.clip.lower() == "bundled":
        from vidpipe.data import sample_video

        clip = str(sample_video())
    elif args.clip.lower() != "none":
        clip = args.clip
    from vidpipe.bench.track import run_track_bench, write_json

    result = run_track_bench(scenes, seeds=args.seeds, rate=not args.no_rate, clip=clip, device=args.device)
    print(result.table())
    if args.json:
        print(f"wrote {write_json(result, args.json)}")
    return 0
