"""Every head through every backend: tiny nets with known outputs, exported, loaded, decoded."""

from __future__ import annotations

import logging
import warnings

import pytest
import torch

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

import known_nets as kn  # noqa: E402

from vidpipe.models.backends import MODEL_LOADERS, from_module  # noqa: E402
from vidpipe.models.heads import get_head  # noqa: E402

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
FORMATS = ["module", "torchscript", "export", "onnx"]
NAMES3 = ("a", "b", "c")

# head -> (net factory, ONNX output names, names to pass)
CASES = {
    "yolov8": (kn.YoloV8Net, ["output0"], None),
    "yolov5": (kn.YoloV5Net, ["output0"], None),
    "detr": (kn.DetrNet, ["pred_logits", "pred_boxes"], NAMES3),
    "rfdetr": (kn.RfDetrNet, ["dets", "labels"], NAMES3),
}


def _device(name: str) -> str:
    if name == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    return name


def load(fmt, net, tmp_path, *, device="cpu", names=None, head=None, onnx_outputs=("output0",), **kw):
    """Export ``net`` to ``fmt`` (in tmp_path) and load it through vidpipe's loader for that suffix."""
    if fmt == "module":
        return from_module(net, device=device, names=names, head=head, input_size=(kn.H, kn.W), **kw)
    if fmt == "torchscript":
        path = tmp_path / "net.torchscript"
        kn.to_torchscript(net, path, script=kw.pop("script", False))
    elif fmt == "export":
        path = tmp_path / "net.pt2"
        kn.to_exported(net, path, dynamic_batch=kw.pop("dynamic_batch", True), device=device)
    elif fmt == "onnx":
        path = tmp_path / "net.onnx"
        kn.to_onnx(net, path, output_names=onnx_outputs)
    else:
        raise ValueError(fmt)
    return MODEL_LOADERS[path.suffix](path, device=device, names=names, head=head, input_size=(kn.H, kn.W), **kw)


def _tol(model) -> dict:
    return dict(atol=5e-2, rtol=1e-2) if model.dtype == torch.float16 else dict(atol=1e-4, rtol=1e-4)


def check_yolo(c, model, score) -> None:
    for i, f in enumerate((1.0, 0.5)):
        torch.testing.assert_close(c.boxes[i].cpu(), kn.expected_xyxy(f), **_tol(model))
        want = torch.tensor([score(j, f) for j in range(kn.N)])
        torch.testing.assert_close(c.scores[i].cpu(), want, **_tol(model))
        assert torch.equal(c.class_ids[i].cpu(), kn.expected_classes())
    assert c.needs_nms


def check_detr(c, model) -> None:
    for i, f in enumerate((1.0, 0.5)):
        torch.testing.assert_close(c.boxes[i].cpu(), kn.expected_xyxy(f), **_tol(model))
        want = torch.tensor([kn.detr_score(j, f) for j in range(kn.N)])
        torch.testing.assert_close(c.scores[i].cpu(), want, **_tol(model))
        assert torch.equal(c.class_ids[i].cpu(), kn.expected_classes())
    assert not c.needs_nms


def check_rfdetr(c, model) -> None:
    assert c.scores.shape == (2, kn.N * kn.C)  # top-k over all (query, class) pairs, k capped by Q*C
    order = list(reversed(range(kn.N)))  # scores grow with j, so the best come last
    for i, f in enumerate((1.0, 0.5)):
        want = torch.tensor([kn.rfdetr_score(j, f) for j in order])
        torch.testing.assert_close(c.scores[i, : kn.N].cpu(), want, **_tol(model))
        torch.testing.assert_close(c.boxes[i, : kn.N].cpu(), kn.expected_xyxy(f)[order], **_tol(model))
        assert torch.equal(c.class_ids[i, : kn.N].cpu(), kn.expected_classes()[order])
        assert float(c.scores[i, kn.N :].max()) < float(c.scores[i, kn.N - 1])
    assert not c.needs_nms


CHECKS = {
    "yolov8": lambda c, m: check_yolo(c, m, kn.yolov8_score),
    "yolov5": lambda c, m: check_yolo(c, m, kn.yolov5_score),
    "detr": check_detr,
    "rfdetr": check_rfdetr,
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("head", list(CASES))
def test_known_outputs_through_each_format(head, fmt, device, tmp_path):
    device = _device(device)
    factory, outputs, names = CASES[head]
    model = load(fmt, factory(), tmp_path, device=device, names=names, onnx_outputs=outputs)
    assert model.info.head == head  # detected from the output shapes
    assert model.info.input_size == (kn.H, kn.W)
    assert model.info.names == (names or ("0", "1", "2"))
    assert model.device.type == device
    if device == "cuda" and fmt in ("module", "torchscript"):
        assert model.dtype == torch.float16  # FP16 by default on the GPU (ONNX and .pt2: the file decides)
    x = kn.batch_of_two(model.dtype, device)
    raw = model(x)
    candidates = get_head(model.info.head)(raw, model.info.input_size)
    assert candidates.boxes.device.type == device
    CHECKS[head](candidates, model)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fmt", ["module", "torchscript", "export"])
def test_torchvision_lists_of_dicts(fmt, device, tmp_path):
    device = _device(device)
    kw = {"script": True} if fmt == "torchscript" else {"dynamic_batch": False} if fmt == "export" else {}
    model = load(fmt, kn.TorchvisionNet(), tmp_path, device=device, **kw)
    assert model.info.head == "torchvision"
    assert model.info.names[1] == "person"  # torchvision's COCO categories by default
    if fmt == "export":
        assert not model.info.dynamic_batch and model.info.max_batch == 2
    c = get_head("torchvision")(model(kn.batch_of_two(model.dtype, device)), model.info.input_size)
    assert c.boxes.shape == (2, 2, 4) and not c.needs_nms
    tol = _tol(model)
    torch.testing.assert_close(c.boxes[0, 0].cpu(), kn.expected_xyxy(1.0)[0], **tol)
    assert float(c.scores[0, 1]) == 0.0 and torch.all(c.boxes[0, 1] == 0)  # padding
    torch.testing.assert_close(c.boxes[1].cpu(), kn.expected_xyxy(0.5)[:2], **tol)
    torch.testing.assert_close(c.scores[1].cpu(), torch.tensor([0.15, 0.175]), **tol)
    assert c.class_ids[1].tolist() == [1, 2]


@pytest.mark.slow
def test_real_torchvision_model_is_detected():
    """A real (random-weight) torchvision detector: its output format and tensor input as vidpipe expects."""
    torchvision = pytest.importorskip("torchvision")
    net = torchvision.models.detection.ssdlite320_mobilenet_v3_large(
        weights=None, weights_backbone=None, topk_candidates=20, detections_per_img=20
    )
    model = from_module(net, input_size=320, device="cpu")
    assert model.info.head == "torchvision"
    assert len(model.info.names) == 91 and model.info.names[1] == "person"
    c = get_head("torchvision")(model(torch.rand(2, 3, 320, 320)), (320, 320))
    assert c.boxes.shape[0] == 2 and not c.needs_nms


def test_pt_suffix_holding_torchscript(tmp_path):
    path = tmp_path / "net.pt"
    kn.to_torchscript(kn.YoloV8Net(), path)
    model = MODEL_LOADERS[".pt"](path, device="cpu", input_size=(kn.H, kn.W))
    assert model.info.format == "torchscript" and model.info.head == "yolov8"


def test_pt_suffix_holding_export(tmp_path):
    path = tmp_path / "net.pt"
    kn.to_exported(kn.YoloV5Net(), path)
    model = MODEL_LOADERS[".pt"](path, device="cpu")
    assert model.info.format == "export" and model.info.head == "yolov5"
    assert model.info.input_size == (kn.H, kn.W)  # static H, W of the exported program
    assert not model.info.dynamic_shape
    assert from_module(kn.YoloV5Net(), device="cpu", input_size=64, dynamic_shape=True).info.dynamic_shape


def test_torchscript_config_metadata(tmp_path):
    """Ultralytics TorchScript exports carry config.txt with names and imgsz."""
    import json

    path = tmp_path / "net.torchscript"
    cfg = {"names": {"0": "cat", "1": "dog", "2": "bird"}, "imgsz": [kn.H, kn.W], "stride": 16}
    kn.to_torchscript(kn.YoloV8Net(), path, extra_files={"config.txt": json.dumps(cfg)})
    model = MODEL_LOADERS[".torchscript"](path, device="cpu")
    assert model.info.names == ("cat", "dog", "bird")
    assert model.info.input_size == (kn.H, kn.W) and model.info.stride == 16


def test_export_batch_bound_splits_larger_batches(tmp_path):
    path = tmp_path / "bounded.pt2"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = torch.export.export(
            kn.YoloV8Net().eval(), (kn.example(),), dynamic_shapes={"x": {0: torch.export.Dim("b", min=1, max=4)}}
        )
    torch.export.save(ep, str(path))
    model = MODEL_LOADERS[".pt2"](path, device="cpu")
    assert model.info.dynamic_batch and model.info.max_batch == 4
    x = torch.cat([kn.batch_of_two()] * 3)  # 6 rows > 4: split into 4 + 2
    c = get_head("yolov8")(model(x), model.info.input_size)
    for i in range(6):
        torch.testing.assert_close(c.boxes[i], kn.expected_xyxy(1.0 if i % 2 == 0 else 0.5))


def test_export_input_dtype_decides(tmp_path, caplog):
    path32, path16 = tmp_path / "f32.pt2", tmp_path / "f16.pt2"
    kn.to_exported(kn.YoloV8Net(), path32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = torch.export.export(kn.YoloV8Net().half().eval(), (kn.example().half(),))
    torch.export.save(ep, str(path16))
    with caplog.at_level(logging.INFO):
        m32 = MODEL_LOADERS[".pt2"](path32, device="cpu", dtype="float16")
    assert m32.dtype == torch.float32 and "dtype='float16' ignored" in caplog.text
    m16 = MODEL_LOADERS[".pt2"](path16, device="cpu")
    assert m16.dtype == torch.float16
    c = get_head("yolov8")(m16(kn.batch_of_two()), m16.info.input_size)  # float32 input converted
    torch.testing.assert_close(c.boxes[1], kn.expected_xyxy(0.5), atol=5e-2, rtol=1e-2)
