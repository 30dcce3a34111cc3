"""Probe helper: where a thread's time goes under one frame of a ``py-spy record --format raw
--threads [--idle | --gil]`` profile (``docs/bench/h200/post-priority``).

    py-spy record -r 250 --idle --threads --format raw -o prof.txt -- python3 -m vidpipe detect CLIP --device cuda --track
    python3 tools/bench-probes/spy_children.py prof.txt MainThread "DetectionRun._consume (" [DEPTH]

Prints the samples of THREAD whose stack holds FRAME, by the DEPTH frames called from it (line
numbers kept), largest first."""

import collections
import sys


def main() -> None:
    path, thread, parent = sys.argv[1:4]
    depth = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    under: collections.Counter[str] = collections.Counter()
    total = 0
    with open(path) as f:
        for line in f:
            stack, n = line.rstrip().rsplit(" ", 1)
            frames = stack.split(";")
            if thread not in frames[0]:
                continue
            at = next((i for i, fr in enumerate(frames) if parent in fr), None)
            if at is None:
                continue
            total += int(n)
            under[" > ".join(frames[at + 1 : at + 1 + depth]) or "(self)"] += int(n)
    print("samples", total)
    for key, n in under.most_common(40):
        print(f"{n:6d} {100 * n / max(total, 1):5.1f}% {key[:230]}")


if __name__ == "__main__":
    main()
