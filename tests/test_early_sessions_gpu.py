"""``vidpipe detect`` on a video file that NVDEC decodes in the command's own process starts the
decode's NVDEC sessions while it imports PyTorch (vidpipe.decode.prestart): as many as the decode
would start, pooled before the run, all taken by the decode. The run's CUDA graph is captured with
no session starting beside it (no fall-back to the eager model), every frame FFmpeg counts is
read, and the detections are those of ``vidpipe.detect`` decoding the same file with NVDEC from a
Python script, which starts its sessions at the decode."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import textwrap
from collections import Counter

import av
import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.nvdec]

FRAMES = 600  # 1080p: past auto's PyAV limit (300), short of the decoder processes' (15,000)

API = """
import json, sys
import vidpipe
run = vidpipe.detect(sys.argv[1], device="cuda", decoder="nvdec")
rows = []
for batch in run.batches():
    for r in batch:
        d = r.detections
        for box, score, cls in zip(d.boxes.cpu().tolist(), d.scores.cpu().tolist(), d.class_ids.cpu().tolist()):
            rows.append([r.meta.index, int(cls), round(score, 4), *[round(v, 2) for v in box]])
s = run.summary()
print(json.dumps(dict(rows=rows, frames=s.frames, sessions=s.sources[0].extra.get("decode_sessions"))))
"""


@pytest.fixture(scope="module")
def street_1080p(tmp_path_factory):
    pytest.importorskip("PyNvVideoCodec")
    from vidpipe.bench.realclip import build_real_clip
    from vidpipe.decode.prestart import PROBE_BYTES

    clip = build_real_clip(tmp_path_factory.mktemp("early"), frames=FRAMES)
    assert clip.stat().st_size >= PROBE_BYTES  # the command probes it
    return clip


def _ffmpeg_frames(path) -> int:
    with av.open(str(path)) as c:
        return sum(1 for _ in c.decode(video=0))


def test_the_command_starts_its_sessions_while_pytorch_imports(street_1080p, tmp_path):
    import torch

    from vidpipe.decode.nvdec import default_workers
    from vidpipe.decode.nvdec_pool import sessions_worth_starting

    out = tmp_path / "early.csv"
    p = subprocess.run([sys.executable, "-m", "vidpipe", "detect", str(street_1080p), "--debug", "--progress", "off",
                        "-o", str(out)], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    log = p.stderr
    n = sessions_worth_starting(FRAMES, idle=0, most=default_workers(torch.device("cuda", 0), "h264"))
    assert n > 1
    assert f"{n} NVDEC sessions started for {street_1080p} before PyTorch" in log, log[-3000:]
    assert "eager" not in log.lower(), "the CUDA graph's capture failed beside the early sessions"
    summary = json.loads(out.with_name(out.name + ".meta.json").read_text())["summary"]
    src = summary["sources"][0]
    assert src["decoder"] == "nvdec" and src["status"] == "ok"
    assert src["extra"]["decode_sessions"] == n  # the decode took every pooled session
    assert summary["frames"] == _ffmpeg_frames(street_1080p) == FRAMES

    ref = subprocess.run([sys.executable, "-c", textwrap.dedent(API), str(street_1080p)], capture_output=True,
                         text=True, timeout=300)  # fmt: skip
    assert ref.returncode == 0, ref.stderr[-3000:]
    want = json.loads(ref.stdout.strip().splitlines()[-1])
    assert want["frames"] == FRAMES
    with out.open() as f:
        got = [[int(r["frame"]), int(r["class_id"]), float(r["confidence"]), float(r["x1"]), float(r["y1"]),
                float(r["x2"]), float(r["y2"])] for r in csv.DictReader(f)]  # fmt: skip
    assert len(got) == len(want["rows"]) > FRAMES // 2  # real people and bicycles in most frames
    assert Counter(r[0] for r in got) == Counter(r[0] for r in want["rows"])
    for a, b in zip(sorted(got), sorted(want["rows"])):
        assert a[:2] == b[:2] and abs(a[2] - b[2]) <= 2e-4
        assert max(abs(x - y) for x, y in zip(a[3:], b[3:])) <= 0.02
