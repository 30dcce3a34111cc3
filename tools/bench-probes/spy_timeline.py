"""Probe helper: a thread's time line from a ``py-spy record --idle --threads --format speedscope``
profile, which keeps the samples in order (``docs/bench/h200/startup-prep``).

    py-spy record -r 200 --idle --threads --format speedscope -o p.json -- python3 -m vidpipe detect CLIP --device cuda
    python3 tools/bench-probes/spy_timeline.py p.json "Thread 1360" [BIN_S]
    python3 tools/bench-probes/spy_timeline.py p.json "Thread 1360" FROM_S TO_S [DEPTH]

With a bin width (default 0.25 s): per bin, the two commonest "deepest vidpipe frame > leaf"
pairs and their seconds. With a window: the samples from FROM_S to TO_S (seconds since the
thread's first sample) by the DEPTH frames from the deepest vidpipe frame on, largest first.
THREAD is matched as a substring of the profile's name (py-spy: ``Thread <tid> "<name>"``)."""

import collections
import json
import sys


def _names(frames: list[dict], stack: list[int]) -> list[str]:
    return [f"{frames[i]['name']}:{frames[i].get('file', '').rsplit('/', 1)[-1]}:{frames[i].get('line')}" for i in stack]


def _ours(frames: list[dict], stack: list[int]) -> int:
    """Index in ``stack`` of the deepest frame in vidpipe's code (0 if none)."""
    mine = [k for k, i in enumerate(stack) if "vidpipe" in frames[i].get("file", "")]
    return mine[-1] if mine else 0


def main() -> None:
    path, thread = sys.argv[1:3]
    rest = [float(a) for a in sys.argv[3:]]
    data = json.load(open(path))
    frames = data["shared"]["frames"]
    profile = next(p for p in data["profiles"] if thread in p["name"])
    samples = list(zip(profile["samples"], profile["weights"]))
    if len(rest) >= 2:  # a window
        lo, hi = rest[0], rest[1]
        depth = int(rest[2]) if len(rest) > 2 else 5
        seen: collections.Counter[str] = collections.Counter()
        t = 0.0
        for stack, w in samples:
            if lo <= t < hi:
                k = _ours(frames, stack)
                seen[" > ".join(_names(frames, stack)[k : k + depth])] += w
            t += w
        for key, s in seen.most_common(25):
            print(f"{s:6.2f} {key[:400]}")
        return
    width = rest[0] if rest else 0.25
    bins: dict[int, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    t = 0.0
    for stack, w in samples:
        names = _names(frames, stack)
        k = _ours(frames, stack)
        bins[int(t / width)][f"{names[k] if names else '-'} > {names[-1] if names else '-'}"] += w
        t += w
    for b in sorted(bins):
        top = " | ".join(f"{key[:110]} ({s:.2f})" for key, s in bins[b].most_common(2))
        print(f"{b * width:7.2f} {top}")


if __name__ == "__main__":
    main()
