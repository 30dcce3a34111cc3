"""tools/convert_darknet.py: cfg + weights + names -> a bundle load_model reads."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import pytest
import torch
from darknet_helpers import YOLOV4_TINY_LIKE, darknet_model_files

from vidpipe.models.darknet import read_bundle
from vidpipe.models.zoo import load_model

pytestmark = pytest.mark.filterwarnings("ignore:The image decoding:DeprecationWarning")

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("convert_darknet", ROOT / "tools" / "convert_darknet.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_convert_with_agreement(tool, tmp_path, capsys):
    cfg = darknet_model_files(tmp_path, YOLOV4_TINY_LIKE, stem="v4t")
    (tmp_path / "v4t.names").write_text("a\nb\nc\n")
    out = tmp_path / "out" / "v4t.safetensors"
    args = [str(cfg), str(tmp_path / "v4t.weights"), str(tmp_path / "v4t.names"), str(out), "--fp16"]
    args += ["--images", str(ROOT / "tests" / "data" / "images"), "--conf", "0.05", "--source", "unit test", "--force"]
    assert tool.main(args) == 0
    assert "wrote" in capsys.readouterr().out
    bundle = read_bundle(out)
    assert bundle.names == ("a", "b", "c") and bundle.metadata["dtype"] == "float16"
    weights_sha = hashlib.sha256((tmp_path / "v4t.weights").read_bytes()).hexdigest()
    assert bundle.provenance["originals"]["weights"]["sha256"] == weights_sha
    assert bundle.provenance["source"] == "unit test"
    images = bundle.agreement["fp16_weights_fp32_compute"]["images"]
    assert set(images) == {"dog.jpg", "eagle.jpg", "giraffe.jpg", "horses.jpg", "person.jpg"}
    original, converted = load_model(cfg, device="cpu"), load_model(out, device="cpu")
    x = torch.rand(1, 3, 64, 64)
    assert torch.allclose(original(x)[..., 4:], converted(x)[..., 4:], atol=1e-2)


def test_names_must_match_the_classes(tool, tmp_path):
    cfg = darknet_model_files(tmp_path, YOLOV4_TINY_LIKE, stem="v4t")
    (tmp_path / "two.names").write_text("a\nb\n")
    with pytest.raises(SystemExit, match="has 2 names but .* has 3 classes"):
        tool.main(
            [str(cfg), str(tmp_path / "v4t.weights"), str(tmp_path / "two.names"), str(tmp_path / "o.safetensors")]
        )
