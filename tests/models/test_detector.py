"""DetectorConfig validation, resolve_classes, and the Detector on real images (CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torchvision.io import ImageReadMode, decode_image, read_file

from vidpipe.errors import ConfigError, ModelError
from vidpipe.models.detector import Detector, DetectorConfig, resolve_classes
from vidpipe.models.zoo import load_model
from vidpipe.ops.letterbox import letterbox
from vidpipe.types import FrameMeta, ModelInput

pytestmark = pytest.mark.filterwarnings("ignore:The image decoding:DeprecationWarning")

IMAGES = Path(__file__).resolve().parents[1] / "data" / "images"
COCO_SOME = ("person", "bicycle", "car", "motorbike", "aeroplane", "bus", "train", "truck", "boat", "traffic light")


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"conf": 1.5}, "conf=1.5"),
        ({"conf": "high"}, "expected a number"),
        ({"iou": -0.1}, "iou=-0.1"),
        ({"max_det": 0}, "max_det=0"),
        ({"max_det": 2.5}, "expected an integer"),
        ({"classes": ()}, "non-empty tuple"),
        ({"classes": (-1,)}, "class ids >= 0"),
        ({"classes": ("person",)}, "resolve_classes"),
        ({"classes": 3}, "classes=3"),
    ],
)
def test_config_validation(kwargs, words):
    with pytest.raises(ConfigError, match=words.replace("(", r"\(")):
        DetectorConfig(**kwargs)


def test_config_defaults_and_list_classes():
    cfg = DetectorConfig()
    assert (cfg.conf, cfg.iou, cfg.classes, cfg.max_det) == (0.25, 0.45, None, 300)
    assert DetectorConfig(classes=[0, 2]).classes == (0, 2)


def test_resolve_classes():
    assert resolve_classes("person,car", COCO_SOME) == (0, 2)
    assert resolve_classes(" Person , 2 ,car", COCO_SOME) == (0, 2)  # dedupe, case, ids as text
    assert resolve_classes(["traffic_light", 1], COCO_SOME) == (9, 1)
    assert resolve_classes([7], COCO_SOME) == (7,)


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("persn", "unknown class 'persn'; did you mean 'person'"),
        ("bicycel,car", "did you mean 'bicycle'"),
        ("zebra", "unknown class 'zebra' \\(the model's 10 classes: person"),
        ("10", "class id 10 is out of range; the model has 10 classes"),
        ([-1], "class id -1 is out of range"),
        (" , ", "no class given"),
        ([True], "expected a name or an id"),
        (3, "expected names or ids"),
    ],
)
def test_resolve_classes_errors(spec, words):
    with pytest.raises(ConfigError, match=words):
        resolve_classes(spec, COCO_SOME)


@pytest.fixture(scope="module")
def model():
    return load_model("yolov3-tiny", device="cpu")


def _inputs(names: list[str], size: tuple[int, int]) -> ModelInput:
    """Letterbox each image separately (different sizes) and stack them into one ModelInput."""
    tensors, metas, scales, pads = [], [], [], []
    for i, name in enumerate(names):
        img = decode_image(read_file(str(IMAGES / name)), mode=ImageReadMode.RGB)
        x, geo = letterbox(img[None], size)
        tensors.append(x)
        metas.append(FrameMeta(source=name, stream_id=0, index=i, pts=None, height=geo.src_h, width=geo.src_w))
        scales.append((geo.sx, geo.sy))
        pads.append((float(geo.pad_x), float(geo.pad_y)))
    return ModelInput(torch.cat(tensors), tuple(metas), torch.tensor(scales), torch.tensor(pads))


def test_batch_equals_single_frames(model):
    det = Detector(model)
    batch = det(_inputs(["dog.jpg", "person.jpg"], model.info.input_size))
    per_frame = batch.split(2)
    for i, name in enumerate(["dog.jpg", "person.jpg"]):
        alone = det(_inputs([name], model.info.input_size))
        assert len(alone) > 0
        assert per_frame[i].class_ids.tolist() == alone.class_ids.tolist()
        assert torch.allclose(per_frame[i].boxes, alone.boxes, atol=1e-2)
        assert torch.allclose(per_frame[i].scores, alone.scores, atol=1e-4)
    assert batch.frame.tolist() == sorted(batch.frame.tolist())


def test_class_filter_and_thresholds(model):
    inp = _inputs(["person.jpg"], model.info.input_size)
    names = model.info.names
    everything = Detector(model)(inp)
    assert {names[c] for c in everything.class_ids.tolist()} >= {"person", "dog", "horse"}
    only = Detector(model, config=DetectorConfig(classes=resolve_classes("dog,horse", names)))(inp)
    assert {names[c] for c in only.class_ids.tolist()} == {"dog", "horse"}
    strict = Detector(model, config=DetectorConfig(conf=0.9))(inp)
    assert len(strict) < len(everything) and bool((strict.scores > 0.9).all())
    one = Detector(model, config=DetectorConfig(max_det=1))(inp)
    assert len(one) == 1 and float(one.scores[0]) == pytest.approx(float(everything.scores.max()))


def test_results_are_ordinary_tensors(model):
    dets = Detector(model)(_inputs(["eagle.jpg"], model.info.input_size))
    assert len(dets) == 1
    for t in (dets.boxes, dets.scores, dets.class_ids, dets.frame):
        assert not t.is_inference() and not t.requires_grad
    dets.boxes.add_(1.0)  # a consumer may update them in place
    dets.scores.mul_(0.5)


def test_detector_properties_and_errors(model):
    det = Detector(model)
    assert det.names == model.info.names and det.input_size == (416, 416)
    assert det.device == torch.device("cpu") and det.dtype == torch.float32
    with pytest.raises(ConfigError, match=r"classes \[80\] out of range"):
        Detector(model, config=DetectorConfig(classes=(80,)))
    inp = _inputs(["eagle.jpg"], (320, 320))
    half = ModelInput(inp.tensor.half(), inp.frames, inp.scale, inp.pad)
    assert Detector(model)(half).class_ids.tolist() == Detector(model)(inp).class_ids.tolist()  # cast to fp32
    if torch.cuda.is_available():  # pragma: no cover - GPU hosts
        moved = ModelInput(inp.tensor.cuda(), inp.frames, inp.scale.cuda(), inp.pad.cuda())
        with pytest.raises(ModelError, match="is on cuda"):
            det(moved)


def test_multi_label_follows_the_model_unless_set():
    """Darknet models get Darknet's multi-label NMS by default; the option overrides it."""
    model = load_model("yolov3-tiny", device="cpu")
    assert model.info.format == "darknet" and Detector(model).multi_label is True
    assert Detector(model, config=DetectorConfig(multi_label=False)).multi_label is False
    with pytest.raises(ConfigError, match="multi_label"):
        DetectorConfig(multi_label="yes")


def test_warmup_runs_a_whole_batch(model):
    """The pipeline's CUDA warm-up builds its own ModelInput (scale ``(B, 2)``); the CPU runs the same code."""
    assert Detector(model).warmup(2) > 0.0
