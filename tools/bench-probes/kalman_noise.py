"""How much real detections move and jitter, against the tracker's Kalman noise model.

    python3 tools/bench-probes/kalman_noise.py [VIDEO] [--device cpu]

Detects VIDEO (default: the bundled bikes.mp4) with YOLOv3-tiny, tracks it, and for every run of
6+ consecutive frames of one track takes the second differences of the box centre (x and y), in
units of the box height. For a detection = true position + white noise r, and a velocity that
changes by a random step q each frame: ``var(d2) = q^2 + 6 r^2`` and ``cov(d2_t, d2_t+1) = -4 r^2``,
so both are read off. Prints them beside ByteTrack's model (r = 1/20 of the height, q = 1/160) and
vidpipe's (q = 1/80). A rough estimate: detection noise is not white, and tracks are few.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def main() -> None:
    import vidpipe
    from vidpipe.track import ByteTrack

    ap = argparse.ArgumentParser(description="real detections' motion against the Kalman noise model")
    ap.add_argument("video", nargs="?", default=str(Path(vidpipe.__file__).parent / "data" / "bikes.mp4"))
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    video, device = args.video, args.device
    tracker = ByteTrack()
    seqs: dict[int, list[tuple[int, float, float, float]]] = {}
    for r in vidpipe.detect(video, device=device, results_on_host=True):
        d = r.detections
        boxes = d.boxes.numpy()
        t = r.meta.pts if r.meta.pts is not None else r.meta.index / 30
        ids = tracker.update(boxes, d.scores.numpy(), d.class_ids.numpy(), t=float(t))
        for b, i in zip(boxes, ids):
            if i >= 0:
                seqs.setdefault(int(i), []).append((r.meta.index, (b[0] + b[2]) / 2, (b[1] + b[3]) / 2, b[3] - b[1]))
    v0, v1, runs = [], [], 0
    for s in seqs.values():
        a = np.array(s)
        for run in np.split(a, np.flatnonzero(np.diff(a[:, 0]) != 1) + 1):
            if len(run) < 6:
                continue
            runs += 1
            for col in (1, 2):
                d2 = np.diff(run[:, col], 2) / run[:, 3].mean()
                v0.append(np.mean(d2 * d2))
                v1.append(np.mean(d2[1:] * d2[:-1]))
    if not runs:
        print("no track ran 6 frames in a row")
        return
    r2 = max(-np.mean(v1) / 4, 0.0)
    q2 = max(np.mean(v0) - 6 * r2, 0.0)
    print(f"{video}: {len(seqs)} tracks, {runs} runs of 6+ frames")
    print(f"detection noise r / height: {np.sqrt(r2):.4f}   (ByteTrack's model: {1 / 20:.4f})")
    print(f"velocity step q / height:   {np.sqrt(q2):.4f}   (ByteTrack's model: {1 / 160:.4f}; vidpipe's: {1 / 80:.4f})")


if __name__ == "__main__":
    main()
