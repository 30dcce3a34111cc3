"""Bad input to the backends: not a model, wrong input shape, NaN outputs, wrong head or names."""

from __future__ import annotations

import logging
import warnings

import known_nets as kn
import pytest
import torch

from vidpipe.errors import ModelError
from vidpipe.models.backends import (
    MODEL_LOADERS,
    check_finite,
    finite_flag,
    from_module,
)
from vidpipe.models.heads import get_head

# ------------------------------------------------------------------ files that are not models


@pytest.mark.parametrize(
    ("suffix", "fmt"),
    [(".onnx", "ONNX"), (".torchscript", "TorchScript"), (".pt2", "torch.export"), (".pt", "PyTorch")],
)
def test_text_file_with_a_model_suffix(tmp_path, suffix, fmt):
    if suffix == ".onnx":
        pytest.importorskip("onnxruntime")
    path = tmp_path / f"notes{suffix}"
    path.write_text("this is not a model\n")
    with pytest.raises(ModelError, match=fmt) as err:
        MODEL_LOADERS[suffix](path, device="cpu")
    assert str(path) in str(err.value)


@pytest.mark.parametrize("suffix", [".torchscript", ".pt"])
def test_truncated_torchscript(tmp_path, suffix):
    good = tmp_path / "good.torchscript"
    kn.to_torchscript(kn.YoloV8Net(), good)
    data = good.read_bytes()
    bad = tmp_path / f"cut{suffix}"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelError) as err:
        MODEL_LOADERS[suffix](bad, device="cpu")
    assert str(bad) in str(err.value)


def test_truncated_onnx(tmp_path):
    pytest.importorskip("onnxruntime")
    good = tmp_path / "good.onnx"
    kn.to_onnx(kn.YoloV8Net(), good, output_names=["output0"])
    bad = tmp_path / "cut.onnx"
    bad.write_bytes(good.read_bytes()[:200])
    with pytest.raises(ModelError, match="ONNX"):
        MODEL_LOADERS[".onnx"](bad, device="cpu")


def test_pickled_checkpoint_is_refused_with_advice(tmp_path):
    path = tmp_path / "ckpt.pt"
    torch.save(kn.YoloV8Net().state_dict(), path)
    with pytest.raises(ModelError, match="pickled") as err:
        MODEL_LOADERS[".pt"](path, device="cpu")
    assert "from_module" in str(err.value)


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(ModelError, match="no such model file"):
        MODEL_LOADERS[".pt2"](tmp_path / "nope.pt2", device="cpu")
    empty = tmp_path / "empty.torchscript"
    empty.write_bytes(b"")
    with pytest.raises(ModelError, match="empty"):
        MODEL_LOADERS[".torchscript"](empty, device="cpu")


# ------------------------------------------------------------------ wrong input shapes


class _Gray(torch.nn.Module):
    def forward(self, x):
        return kn.YoloV8Net()(x.expand(-1, 3, -1, -1))


def test_onnx_with_one_channel_input(tmp_path):
    pytest.importorskip("onnxruntime")
    path = tmp_path / "gray.onnx"
    kn.to_onnx(_Gray(), path, output_names=["output0"], input_shape=(1, 1, kn.H, kn.W))
    with pytest.raises(ModelError, match=r"input has shape \[.*1, 64, 96\]"):
        MODEL_LOADERS[".onnx"](path, device="cpu")


class _TwoInputs(torch.nn.Module):
    def forward(self, x, size):
        return kn.YoloV8Net()(x) * size.float().mean()


def test_onnx_with_two_inputs(tmp_path):
    pytest.importorskip("onnxruntime")
    path = tmp_path / "two.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(_TwoInputs(), (kn.example(), torch.tensor([kn.H, kn.W])), str(path), dynamo=False,
                          input_names=["images", "orig_size"], output_names=["output0"])
    with pytest.raises(ModelError, match="2 inputs"):
        MODEL_LOADERS[".onnx"](path, device="cpu")


def test_exported_program_with_one_channel_input(tmp_path):
    path = tmp_path / "gray.pt2"
    ep = torch.export.export(_Gray(), (torch.full((1, 1, kn.H, kn.W), 0.5),))
    torch.export.save(ep, str(path))
    with pytest.raises(ModelError, match="input has shape"):
        MODEL_LOADERS[".pt2"](path, device="cpu")


def test_module_that_wants_four_channels():
    net = torch.nn.Conv2d(4, 8, 3)
    with pytest.raises(ModelError, match=r"test run on a \(1, 3, 64, 64\) float32 input failed"):
        from_module(net, input_size=64, device="cpu")


def test_forward_checks_the_batch():
    model = from_module(kn.YoloV8Net(), input_size=(kn.H, kn.W), device="cpu")
    with pytest.raises(ModelError, match=r"\(B, 3, H, W\)"):
        model(torch.zeros(3, kn.H, kn.W))
    with pytest.raises(ModelError, match=r"\(B, 3, H, W\)"):
        model(torch.zeros(1, 4, kn.H, kn.W))


# ------------------------------------------------------------------ NaN / Inf outputs


class _NanWhenDark(torch.nn.Module):
    """Finite on the grey probe, NaN for images darker than 0.4 on average (0/0)."""

    def forward(self, x):
        out = kn.YoloV8Net()(x)
        m = x.mean(dim=(1, 2, 3))
        bad = (m < 0.4).to(x.dtype)
        return out * (1 + bad * 0 / (1 - bad))[:, None, None]


def test_nan_outputs_are_caught():
    model = from_module(_NanWhenDark(), input_size=(kn.H, kn.W), device="cpu")  # probe is grey: fine
    check_finite(model(torch.full((1, 3, kn.H, kn.W), 0.5)))
    raw = model(kn.batch_of_two())  # second image is dark
    flag = finite_flag(raw)
    assert isinstance(flag, torch.Tensor) and flag.ndim == 0 and not bool(flag)  # no sync until asked
    with pytest.raises(ModelError, match="NaN or infinite"):
        check_finite(raw, model_name="dark", dtype=torch.float16)


def test_check_finite_walks_structures():
    good = {"a": torch.ones(2, 3), "b": [torch.zeros(1), torch.arange(3)]}
    check_finite(good)
    assert finite_flag({"i": torch.arange(3)}) is None  # no float tensor: nothing to check
    with pytest.raises(ModelError, match="float32"):
        check_finite([{"scores": torch.tensor([1.0, float("inf")])}], dtype=torch.float16)


class _AlwaysNan(torch.nn.Module):
    def forward(self, x):
        return kn.YoloV8Net()(x) * float("nan")


def test_model_that_always_gives_nan_fails_to_load():
    with pytest.raises(ModelError, match="NaN or infinite"):
        from_module(_AlwaysNan(), input_size=(kn.H, kn.W), device="cpu")


class _MixedPrecision(torch.nn.Module):
    """Works in float32 only: a float32 activation meets the (converted) weight."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(3, 3))
        self.net = kn.YoloV8Net()

    def forward(self, x):
        s = x.float().mean(dim=(2, 3)) @ self.w  # fails when w is float16
        return self.net(x) * (s.mean() * 0 + 1)


def test_float16_failure_falls_back_to_float32(caplog):
    with caplog.at_level(logging.WARNING):
        model = from_module(_MixedPrecision(), input_size=(kn.H, kn.W), device="cpu", dtype="float16")
    assert model.dtype == torch.float32
    assert "retrying in float32" in caplog.text


# ------------------------------------------------------------------ heads and names


class _Square(torch.nn.Module):
    """``[B, 8, 8]``: YOLOv5 with 3 classes or YOLOv8 with 4? Only head= can say."""

    def forward(self, x):
        return x.mean(dim=(1, 2, 3))[:, None, None].expand(-1, 8, 8) * 100


def test_ambiguous_output_asks_for_head():
    with pytest.raises(ModelError, match="head="):
        from_module(_Square(), input_size=32, device="cpu")
    model = from_module(_Square(), input_size=32, device="cpu", head="yolov8")
    assert model.info.head == "yolov8" and model.info.num_classes == 4
    c = get_head("yolov8")(model(torch.full((1, 3, 32, 32), 0.5)), (32, 32))
    assert c.boxes.shape == (1, 8, 4)


def test_head_override_wins_and_is_checked():
    model = from_module(kn.YoloV5Net(), input_size=(kn.H, kn.W), device="cpu", head="yolov5")
    assert model.info.head == "yolov5"
    with pytest.raises(ModelError, match="cannot decode"):
        from_module(kn.YoloV8Net(), input_size=(kn.H, kn.W), device="cpu", head="detr")
    with pytest.raises(ModelError, match="known heads"):
        from_module(kn.YoloV8Net(), input_size=(kn.H, kn.W), device="cpu", head="nope")


def test_too_few_names_for_the_classes(tmp_path):
    names = tmp_path / "two.names"
    names.write_text("cat\ndog\n")
    with pytest.raises(ModelError, match=r"fits neither YOLOv5 \[B, N, 5 \+ 2\]"):
        from_module(kn.YoloV5Net(), input_size=(kn.H, kn.W), device="cpu", names=names)  # names hint the head
    with pytest.raises(ModelError, match="2 class names but .* predicts 3 classes"):
        from_module(kn.YoloV5Net(), input_size=(kn.H, kn.W), device="cpu", names=names, head="yolov5")


def test_coco_names_for_80_classes():
    # only 12 boxes: [B, 12, 85] does not look like YOLOv5 by size (N >> 5 + C), so say the head
    model = from_module(kn.YoloV5Net(num_classes=80), input_size=(kn.H, kn.W), device="cpu", head="yolov5")
    assert model.info.num_classes == 80
    assert model.info.names[0] == "person" and model.info.names[79] == "toothbrush"
