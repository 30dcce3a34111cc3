"""``vidpipe info INPUT...``: what the container says about each input."""

from __future__ import annotations

import argparse
import json
import sys


def add_parser(sub, common) -> None:
    p = sub.add_parser(
        "info", parents=[common], help="streams, codec, size, fps, frame count, duration",
        description="Show what the container says about each video: codec, size, fps, frame count, duration.",
    )
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="video files or stream URLs")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from vidpipe.decode.probe import format_info, probe
    from vidpipe.errors import VidpipeError

    status = 0
    infos = []
    for src in args.inputs:
        try:
            info = probe(src)
        except VidpipeError as exc:
            print(f"vidpipe: error: {exc}", file=sys.stderr)
            status = 2
            continue
        if args.json:
            infos.append(_info_dict(info))
        else:
            print(format_info(info))
    if args.json:
        print(json.dumps(infos, indent=2))
    return status


def _info_dict(info) -> dict:
    from dataclasses import asdict

    d = asdict(info)
    d["time_base"] = str(info.time_base)
    return d
