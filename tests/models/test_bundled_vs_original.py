"""The bundled FP16 yolov3-tiny against the original FP32 Darknet release, on the real images.

Both run vidpipe's code with the same cfg, so this checks the conversion (batch-norm folding, FP16),
not the cfg or the preprocessing: ``test_reference_opencv.py`` compares with an independent
Darknet. The originals are not in the repo (35 MB): set VIDPIPE_YOLOV3_TINY_DIR to a folder holding
yolov3-tiny.cfg and yolov3-tiny.weights (``tools/fetch-yolov3-tiny DIR`` downloads them; CI's
``.ci/run`` does, and with ``CI=true`` the test fails instead of skipping without them).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
import torch
from torchvision.io import ImageReadMode, decode_image, read_file

from vidpipe.models.darknet import read_bundle
from vidpipe.models.detector import Detector, DetectorConfig
from vidpipe.models.zoo import bundled_path, load_model
from vidpipe.ops.letterbox import letterbox
from vidpipe.post.match import match_detections
from vidpipe.types import FrameMeta, ModelInput

pytestmark = pytest.mark.filterwarnings("ignore:The image decoding:DeprecationWarning")

IMAGES = Path(__file__).resolve().parents[1] / "data" / "images"
NAMES = ("dog.jpg", "person.jpg", "giraffe.jpg", "horses.jpg", "eagle.jpg")
CONF = 0.25
BORDERLINE = CONF + 0.02  # detections this close to the threshold may fall either side
MIN_IOU = 0.9
MAX_SCORE_DIFF = {"cpu": 0.02, "cuda": 0.03}


@pytest.fixture(scope="module")
def original_dir() -> Path:
    env = os.environ.get("VIDPIPE_YOLOV3_TINY_DIR")
    if not env:
        why = (
            "VIDPIPE_YOLOV3_TINY_DIR is not set: point it at a folder with the original Darknet "
            "yolov3-tiny.cfg and yolov3-tiny.weights (tools/fetch-yolov3-tiny DIR fetches them)"
        )
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{why} (CI=true: this comparison must run in CI)")
        pytest.skip(why)
    folder = Path(env)
    missing = [n for n in ("yolov3-tiny.cfg", "yolov3-tiny.weights") if not (folder / n).is_file()]
    if missing:
        pytest.fail(f"VIDPIPE_YOLOV3_TINY_DIR={env} lacks {', '.join(missing)}")
    return folder


@pytest.fixture(scope="module")
def original(original_dir):
    return load_model(original_dir / "yolov3-tiny.cfg", device="cpu", dtype="fp32")


def _input(name: str, size: tuple[int, int], device: str, dtype: torch.dtype) -> ModelInput:
    img = decode_image(read_file(str(IMAGES / name)), mode=ImageReadMode.RGB).to(device)
    x, geo = letterbox(img[None], size, dtype=dtype)
    meta = FrameMeta(source=name, stream_id=0, index=0, pts=None, height=geo.src_h, width=geo.src_w)
    scale = torch.tensor([[geo.sx, geo.sy]], device=device)
    pad = torch.tensor([[float(geo.pad_x), float(geo.pad_y)]], device=device)
    return ModelInput(x, (meta,), scale, pad)


def test_the_bundle_was_made_from_these_originals(original_dir):
    digest = hashlib.sha256((original_dir / "yolov3-tiny.weights").read_bytes()).hexdigest()
    assert read_bundle(bundled_path("yolov3-tiny")).provenance["originals"]["weights"]["sha256"] == digest


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_same_detections_as_the_original(original, device):
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    bundled = load_model("yolov3-tiny", device=device)  # FP32 compute on the CPU, FP16 on CUDA
    ref_det = Detector(original, config=DetectorConfig(conf=CONF))
    got_det = Detector(bundled, config=DetectorConfig(conf=CONF))
    total = 0
    for name in NAMES:
        ref_inp = _input(name, original.info.input_size, "cpu", torch.float32)
        got_inp = _input(name, bundled.info.input_size, device, bundled.dtype)
        with torch.inference_mode():
            ref_raw, got_raw = original(ref_inp.tensor), bundled(got_inp.tensor).cpu()
        ref_scores = ref_raw[..., 4] * ref_raw[..., 5:].max(-1).values
        got_scores = got_raw[..., 4] * got_raw[..., 5:].max(-1).values
        assert float((ref_scores - got_scores).abs().max()) <= MAX_SCORE_DIFF[device], name
        ref, got = ref_det(ref_inp), got_det(got_inp).cpu()
        rep = match_detections(ref, got, iou=0.5)
        lost = [s for s in rep.unmatched_a + rep.unmatched_b if s >= BORDERLINE]
        assert not lost, f"{name}: detections without a partner: {rep}"
        assert rep.min_iou >= MIN_IOU and rep.max_score_diff <= MAX_SCORE_DIFF[device], f"{name}: {rep}"
        total += rep.matched
    assert total >= 10  # the images do give detections to compare
