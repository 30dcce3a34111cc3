"""load_model: the bundled model offline, Darknet cfg/weights pairs, bundles, errors."""

from __future__ import annotations

import json

import pytest
import torch
from darknet_helpers import YOLOV3_LIKE, YOLOV4_TINY_LIKE, darknet_model_files

from vidpipe.errors import BackendUnavailableError, ConfigError, ModelError
from vidpipe.models.base import Model
from vidpipe.models.darknet import DarknetModel, read_bundle, write_bundle
from vidpipe.models.zoo import BUNDLED, LOADERS, bundled_models, bundled_path, load_model, register_loader


@pytest.fixture(scope="module")
def bundled():
    return load_model("yolov3-tiny", device="cpu")


def test_bundled_model_loads_offline(bundled):
    assert isinstance(bundled, Model) and isinstance(bundled, DarknetModel)
    info = bundled.info
    assert (info.name, info.format, info.head, info.stride) == ("yolov3-tiny", "darknet", "yolov5", 32)
    assert info.input_size == (416, 416) and info.num_classes == 80
    assert info.dynamic_batch and info.dynamic_shape and info.max_batch is None
    assert info.names[:3] == ("person", "bicycle", "car") and info.names[16] == "dog"
    assert bundled.device == torch.device("cpu") and bundled.dtype == torch.float32  # auto on CPU
    out = bundled(torch.full((1, 3, 416, 416), 0.5))
    assert out.shape == (1, 3 * (13 * 13 + 26 * 26), 85)
    wide = bundled(torch.full((2, 3, 256, 416), 0.5))  # any multiple of the stride runs
    assert wide.shape == (2, 3 * (8 * 13 + 16 * 26), 85)


def test_bundled_file_is_small_fp16_with_provenance():
    path = bundled_path("yolov3-tiny")
    assert path.stat().st_size <= 18 * 1024 * 1024
    bundle = read_bundle(path)
    assert bundle.metadata["dtype"] == "float16"
    assert all(t.dtype == torch.float16 for t in bundle.state.values())
    originals = bundle.provenance["originals"]
    assert originals["weights"]["sha256"] == "dccea06f59b781ec1234ddf8d1e94b9519a97f4245748a7d4db75d5b7080a42c"
    agreement = bundle.agreement
    for key in ("fp16_weights_fp32_compute", "fp16_weights_fp16_compute"):
        assert agreement[key]["ok"] and agreement[key]["min_iou"] >= 0.9
    assert bundled_models() == tuple(BUNDLED)


def test_default_is_the_bundled_model():
    assert load_model(device="cpu").info.name == "yolov3-tiny"


def test_input_size_and_dtype_options():
    m = load_model(input_size=(320, 480), dtype="fp32", device="cpu")
    assert m.info.input_size == (320, 480)
    assert load_model(input_size=608, device="cpu").info.input_size == (608, 608)
    with pytest.raises(ModelError, match="multiples of 32"):
        load_model(input_size=300, device="cpu")
    with pytest.raises(ModelError, match="expected an int or"):
        load_model(input_size="big", device="cpu")
    with pytest.raises(ConfigError, match="'auto', 'fp16', 'fp32'"):
        load_model(dtype="int8", device="cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without CUDA")
def test_cuda_without_gpu_is_an_error():
    with pytest.raises(BackendUnavailableError):
        load_model(device="cuda")


def test_unknown_model_lists_choices(tmp_path):
    with pytest.raises(ModelError, match=r"unknown model 'yolov99'.*yolov3-tiny.*\.cfg.*\.weights"):
        load_model("yolov99", device="cpu")
    with pytest.raises(ModelError, match="not found"):
        load_model(tmp_path / "missing.cfg", device="cpu")


def test_darknet_cfg_with_weights_and_names_beside(tmp_path):
    cfg = darknet_model_files(tmp_path)
    m = load_model(cfg, device="cpu")
    assert m.info.names == ("class0", "class1") and m.info.name == "tiny" and m.info.input_size == (64, 64)
    (tmp_path / "coco.names").write_text("cat\ndog\n")
    assert load_model(str(cfg), device="cpu").info.names == ("cat", "dog")
    (tmp_path / "tiny.names").write_text("a\nb\n\n")
    assert load_model(cfg, device="cpu").info.names == ("a", "b")  # <stem>.names wins
    assert load_model(tmp_path / "tiny.weights", device="cpu").info.names == ("a", "b")
    (tmp_path / "tiny.names").write_text("a\nb\nc\n")
    with pytest.raises(ModelError, match="has 3 names but the cfg has 2 classes"):
        load_model(cfg, device="cpu")


def test_darknet_weights_elsewhere(tmp_path):
    cfg = darknet_model_files(tmp_path)
    moved = tmp_path / "sub" / "other.weights"
    moved.parent.mkdir()
    (tmp_path / "tiny.weights").rename(moved)
    with pytest.raises(ModelError, match="weights .* not found for cfg"):
        load_model(cfg, device="cpu")
    assert load_model(cfg, weights=moved, device="cpu").info.name == "tiny"
    with pytest.raises(ModelError, match="cfg .* not found for weights"):
        load_model(moved, device="cpu")
    with pytest.raises(ModelError, match="only used with a Darknet .cfg"):
        load_model("yolov3-tiny", weights=moved, device="cpu")


def test_bundle_round_trip(tmp_path):
    cfg = darknet_model_files(tmp_path)
    original = load_model(cfg, device="cpu")
    x = torch.rand(2, 3, 64, 64)
    for fp16 in (False, True):
        out = tmp_path / f"b{int(fp16)}.safetensors"
        write_bundle(original.net, out, name="tiny", names=["p", "q"], fp16=fp16, provenance={"source": "test"})
        loaded = load_model(out, device="cpu")
        assert loaded.info.names == ("p", "q") and loaded.info.name == "tiny"
        a, b = original(x), loaded(x)
        if fp16:
            assert torch.allclose(a[..., 4:], b[..., 4:], atol=1e-2)
        else:
            assert torch.equal(a, b)
        assert read_bundle(out).provenance == {"source": "test"}


def test_foreign_or_corrupt_safetensors(tmp_path):
    from safetensors.torch import save_file

    save_file({"w": torch.zeros(2)}, str(tmp_path / "other.safetensors"), metadata={"format": "pt"})
    with pytest.raises(ModelError, match="not a vidpipe Darknet bundle"):
        load_model(tmp_path / "other.safetensors", device="cpu")
    (tmp_path / "junk.safetensors").write_bytes(b"junk" * 10)
    with pytest.raises(ModelError, match="cannot read model file"):
        load_model(tmp_path / "junk.safetensors", device="cpu")
    cfg = darknet_model_files(tmp_path)
    net = load_model(cfg, device="cpu").net
    write_bundle(net, tmp_path / "bad.safetensors", name="x", names=["a", "b"], fp16=False, provenance={})
    from safetensors import safe_open

    with safe_open(str(tmp_path / "bad.safetensors"), framework="pt") as f:
        meta = dict(f.metadata())
        state = {k: f.get_tensor(k) for k in f.keys()}
    meta["cfg"] = YOLOV3_LIKE.replace("filters=32", "filters=48")
    save_file(state, str(tmp_path / "bad.safetensors"), metadata=meta)
    with pytest.raises(ModelError, match="do not match the cfg stored with them"):
        load_model(tmp_path / "bad.safetensors", device="cpu")
    meta["names"] = "not json"
    save_file(state, str(tmp_path / "bad.safetensors"), metadata=meta)
    with pytest.raises(ModelError, match="'names' is not JSON"):
        load_model(tmp_path / "bad.safetensors", device="cpu")
    assert json.loads(read_bundle(bundled_path("yolov3-tiny")).metadata["names"])[0] == "person"


def test_register_loader_dispatches_by_suffix(tmp_path):
    cfg = darknet_model_files(tmp_path)
    seen = []

    def load_vpm(path, req):
        seen.append((path.name, req.name, req.dtype))
        return LOADERS[".cfg"](cfg, req)

    register_loader("VPM", load_vpm)
    try:
        (tmp_path / "m.vpm").write_bytes(b"x")
        model = load_model(tmp_path / "m.vpm", device="cpu")
        assert seen == [("m.vpm", "m", torch.float32)] and model.info.num_classes == 2
    finally:
        LOADERS.pop(".vpm", None)


def test_forward_checks_its_input(bundled):
    with pytest.raises(ModelError, match="expected a \\(B, 3, H, W\\) batch"):
        bundled(torch.zeros(1, 1, 416, 416))
    with pytest.raises(ModelError, match="input is float16 on cpu, the model runs float32"):
        bundled(torch.zeros(1, 3, 416, 416, dtype=torch.float16))
    with pytest.raises(ModelError, match="not a multiple of the stride 32"):
        bundled(torch.zeros(1, 3, 416, 400))


@pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning", "ignore:.*torch.jit.trace:FutureWarning")
def test_other_backends_dispatch_by_suffix(tmp_path):
    """A TorchScript trace of a Darknet net goes through the backends' loader and decodes the same."""
    cfg = darknet_model_files(tmp_path)
    darknet = load_model(cfg, device="cpu")
    x = torch.rand(1, 3, 64, 64)
    with torch.inference_mode():
        traced = torch.jit.trace(darknet.net, x)
    traced.save(str(tmp_path / "tiny.torchscript"))
    scripted = load_model(tmp_path / "tiny.torchscript", device="cpu", input_size=64)
    assert scripted.info.format == "torchscript" and scripted.info.head == "yolov5"
    with torch.inference_mode():
        assert torch.allclose(scripted(x), darknet(x), rtol=1e-4, atol=1e-4)
    with pytest.raises(ModelError, match=r"unknown model .*\.onnx.*\.torchscript"):
        load_model(tmp_path / "model.xyz", device="cpu")


def test_cfg_size_must_fit_the_stride(tmp_path):
    cfg = darknet_model_files(tmp_path, YOLOV4_TINY_LIKE.replace("width=64", "width=68"))
    with pytest.raises(ModelError, match=r"\[net\] size 64x68 is not a multiple of the stride 8"):
        load_model(cfg, device="cpu")
    assert load_model(cfg, device="cpu", input_size=(64, 72)).info.input_size == (64, 72)
