"""``vidpipe doctor``: what this machine can accelerate, and why not."""

from __future__ import annotations

import argparse


def add_parser(sub, common) -> None:
    p = sub.add_parser("doctor", parents=[common], help="what this machine can accelerate, and why not")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from vidpipe.doctor import format_report, run_checks

    checks = run_checks()
    if args.json:
        import json
        from dataclasses import asdict

        print(json.dumps([asdict(c) for c in checks], indent=2))
    else:
        print(format_report(checks))
    return 0
