"""ONNX specifics: metadata names, fixed batch and size, FP16 input models, providers, zoo adapter."""

from __future__ import annotations

import logging

import pytest
import torch

pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

import known_nets as kn  # noqa: E402

from vidpipe.errors import ConfigError, ModelError  # noqa: E402
from vidpipe.models.backends import MODEL_LOADERS, ZOO_LOADERS  # noqa: E402
from vidpipe.models.backends.onnx import load_onnx  # noqa: E402
from vidpipe.models.heads import get_head  # noqa: E402


def _add_metadata(path, **props) -> None:
    model = onnx.load(str(path))
    for k, v in props.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = k, v
    onnx.save(model, str(path))


def test_names_and_imgsz_from_ultralytics_metadata(tmp_path):
    path = tmp_path / "yolo.onnx"
    kn.to_onnx(kn.YoloV8Net(), path, output_names=["output0"])
    _add_metadata(path, names=str({0: "cat", 1: "dog", 2: "bird"}), imgsz=str([kn.H, kn.W]), stride="16")
    model = load_onnx(path, device="cpu")
    assert model.info.names == ("cat", "dog", "bird")
    assert model.info.input_size == (kn.H, kn.W)  # from metadata: the exported input is static anyway
    assert model.info.stride == 16
    assert model.provider == "CPUExecutionProvider"


def test_names_argument_beats_metadata(tmp_path):
    path = tmp_path / "yolo.onnx"
    kn.to_onnx(kn.YoloV8Net(), path, output_names=["output0"])
    _add_metadata(path, names=str({0: "cat", 1: "dog", 2: "bird"}))
    model = load_onnx(path, device="cpu", names=["x", "y", "z"])
    assert model.info.names == ("x", "y", "z")


def test_metadata_names_decide_detr_vs_rfdetr(tmp_path):
    path = tmp_path / "detr.onnx"
    kn.to_onnx(kn.DetrNet(), path, output_names=["pred_logits", "pred_boxes"])
    with pytest.raises(ModelError, match="head"):
        load_onnx(path, device="cpu")  # 4 logits: DETR with 3 classes or RF-DETR with 4?
    _add_metadata(path, names=str({0: "a", 1: "b", 2: "c"}))
    assert load_onnx(path, device="cpu").info.head == "detr"


def test_rfdetr_detected_by_output_name_without_names(tmp_path):
    path = tmp_path / "rf.onnx"
    kn.to_onnx(kn.RfDetrNet(), path, output_names=["dets", "labels"])
    model = load_onnx(path, device="cpu")
    assert model.info.head == "rfdetr" and model.info.num_classes == kn.C


def test_fixed_batch_pads_and_splits(tmp_path):
    path = tmp_path / "fixed.onnx"
    kn.to_onnx(kn.YoloV8Net(), path, output_names=["output0"], dynamic_batch=False)  # batch 2 baked in
    model = load_onnx(path, device="cpu")
    assert not model.info.dynamic_batch and model.info.max_batch == 2
    head = get_head("yolov8")
    factors = [1.0, 0.5, 0.25]
    x = torch.stack([torch.full((3, kn.H, kn.W), f / 2) for f in factors])
    for rows in (1, 3):  # padded to 2; split into 2 + (1 padded to 2)
        c = head(model(x[:rows]), model.info.input_size)
        assert c.boxes.shape == (rows, kn.N, 4)
        for i in range(rows):
            torch.testing.assert_close(c.boxes[i], kn.expected_xyxy(factors[i]))


def test_fixed_size_rejects_other_input_size(tmp_path):
    path = tmp_path / "fixed.onnx"
    kn.to_onnx(kn.YoloV8Net(), path, output_names=["output0"])
    with pytest.raises(ModelError, match=r"fixed input of 64x96"):
        load_onnx(path, device="cpu", input_size=(128, 128))
    assert not load_onnx(path, device="cpu").info.dynamic_shape


def test_dynamic_size_uses_requested_size(tmp_path):
    path = tmp_path / "dyn.onnx"
    net = kn.YoloV8Net().eval()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            net, (kn.example(),), str(path), dynamo=False, input_names=["images"], output_names=["output0"],
            dynamic_axes={"images": {0: "b", 2: "h", 3: "w"}},
        )
    model = load_onnx(path, device="cpu", input_size=(32, 48))
    assert model.info.input_size == (32, 48) and model.info.dynamic_shape
    assert model(torch.full((1, 3, 32, 48), 0.5)).shape == (1, 4 + kn.C, kn.N)


class _HalfIn(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = kn.YoloV8Net()

    def forward(self, x):
        return self.net(x.float())


def test_fp16_input_model_sets_dtype(tmp_path, caplog):
    path = tmp_path / "half.onnx"
    x = torch.full((2, 3, kn.H, kn.W), 0.5, dtype=torch.float16)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(_HalfIn().eval(), (x,), str(path), dynamo=False, input_names=["images"],
                          output_names=["output0"], dynamic_axes={"images": {0: "batch"}})
    with caplog.at_level(logging.INFO):
        model = load_onnx(path, device="cpu", dtype="float32")
    assert model.dtype == torch.float16  # the file decides
    assert "dtype" in caplog.text
    out = model(torch.full((1, 3, kn.H, kn.W), 0.5))  # float32 in, converted
    torch.testing.assert_close(get_head("yolov8")(out, (kn.H, kn.W)).boxes[0], kn.expected_xyxy(1.0))


def test_several_outputs_come_back_by_name(tmp_path):
    path = tmp_path / "detr.onnx"
    kn.to_onnx(kn.DetrNet(), path, output_names=["pred_logits", "pred_boxes"])
    model = load_onnx(path, device="cpu", names=["a", "b", "c"])
    raw = model(kn.batch_of_two())
    assert set(raw) == {"pred_logits", "pred_boxes"}
    assert raw["pred_logits"].shape == (2, kn.N, kn.C + 1)


def test_invalid_provider_choice(tmp_path):
    path = tmp_path / "m.onnx"
    kn.to_onnx(kn.YoloV8Net(), path, output_names=["output0"])
    with pytest.raises(ConfigError, match="providers"):
        load_onnx(path, device="cpu", providers="gpu")


@pytest.mark.gpu
def test_cuda_device_runs_and_reports_provider(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    import onnxruntime as ort

    path = tmp_path / "m.onnx"
    kn.to_onnx(kn.YoloV8Net(), path, output_names=["output0"])
    model = load_onnx(path, device="cuda")
    gpu_ep = "CUDAExecutionProvider" in ort.get_available_providers()
    assert model.provider == ("CUDAExecutionProvider" if gpu_ep else "CPUExecutionProvider")
    out = model(kn.batch_of_two(model.dtype, "cuda"))
    assert out.device.type == "cuda"  # on the caller's device either way
    torch.testing.assert_close(get_head("yolov8")(out, (kn.H, kn.W)).boxes[1].cpu(), kn.expected_xyxy(0.5))


def test_zoo_adapter_takes_a_load_request(tmp_path):
    zoo = pytest.importorskip("vidpipe.models.zoo")
    path = tmp_path / "m.onnx"
    kn.to_onnx(kn.YoloV5Net(), path, output_names=["output0"])
    req = zoo.LoadRequest(name="m", device=torch.device("cpu"), dtype=torch.float32, input_size=None)
    model = ZOO_LOADERS[".onnx"](path, req)
    assert model.info.head == "yolov5" and model.info.format == "onnx"
    assert set(ZOO_LOADERS) == set(MODEL_LOADERS)
