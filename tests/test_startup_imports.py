"""The run path imports nothing it does not run: no torch._dynamo, sympy, FSDP or torch._inductor.

``import torchvision`` pulls all of them (through ``torchvision.models`` -> ``torchvision.ops`` ->
``torch._dynamo``): ~1.4 s on a 2-core CPU host, ~5 s on a GPU host. vidpipe loads torchvision's
compiled NMS and JPEG operators without the package (``vidpipe._tvops``). Each check runs a fresh
interpreter, since the test process itself has imported everything already.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vidpipe.data import sample_video

HEAVY = ("torch._dynamo", "sympy", "torch.distributed.fsdp", "torch._inductor", "torchvision")
IMAGE = Path(__file__).parent / "data" / "images" / "dog.jpg"

_SCRIPT = """
import json, sys
import vidpipe
run = vidpipe.detect({source!r}, device={device!r}, max_frames=2, conf=0.05)
n = sum(len(r.detections) for r in run)
heavy = sorted(m for m in {heavy!r} if m in sys.modules)
print(json.dumps({{"detections": n, "heavy": heavy}}))
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[1] / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _heavy_after_detect(source: Path, device: str) -> dict:
    code = _SCRIPT.format(source=str(source), device=device, heavy=HEAVY)
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=_env(), check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _check(source: Path, device: str) -> None:
    out = _heavy_after_detect(source, device)
    assert out["detections"] > 0, out  # candidates passed conf, so NMS ran
    assert out["heavy"] == [], f"vidpipe.detect({source.name!r}, device={device!r}) imported {out['heavy']}"


@pytest.mark.parametrize("source", [sample_video(), IMAGE], ids=["video", "image"])
def test_detect_cpu_imports_no_dynamo(source: Path) -> None:
    _check(source, "cpu")


@pytest.mark.gpu
@pytest.mark.parametrize("source", [sample_video(), IMAGE], ids=["video", "image"])
def test_detect_cuda_imports_no_dynamo(source: Path) -> None:
    _check(source, "cuda")


def test_cli_detect_imports_no_dynamo(tmp_path: Path) -> None:
    """The CLI on the bundled video (its default input), with ``-X importtime`` as the witness."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "vidpipe", "detect", "--device", "cpu", "--max-frames", "2",
         "-q", "-o", str(tmp_path / "out.csv")],
        capture_output=True, text=True, timeout=300, env=_env(), cwd=tmp_path, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert imported & set(HEAVY) == set(), sorted(imported & set(HEAVY))
    assert (tmp_path / "out.csv").stat().st_size > 0


@pytest.mark.filterwarnings("ignore:The image decoding and encoding capabilities:DeprecationWarning")
def test_tvops_match_torchvision_wrappers() -> None:
    """The operators called without the package give what torchvision's own wrappers give."""
    import torch
    import torchvision
    from torchvision.io import ImageReadMode
    from torchvision.io import decode_jpeg as tv_decode_jpeg

    from vidpipe import _tvops

    g = torch.Generator().manual_seed(0)
    xy = torch.rand((500, 2), generator=g, dtype=torch.float64) * 600
    boxes = torch.cat([xy, xy + 5 + torch.rand((500, 2), generator=g, dtype=torch.float64) * 80], dim=1)
    scores = torch.rand((500,), generator=g, dtype=torch.float64)
    kept = _tvops.nms(boxes, scores, 0.45)
    assert 0 < kept.numel() < 500
    assert torch.equal(kept, torchvision.ops.nms(boxes, scores, 0.45))
    data = torch.frombuffer(bytearray(IMAGE.read_bytes()), dtype=torch.uint8)
    assert torch.equal(_tvops.decode_jpeg(data), tv_decode_jpeg(data, mode=ImageReadMode.RGB))
    assert _tvops.package_dir() == str(Path(torchvision.__file__).parent)
