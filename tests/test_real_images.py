"""The bundled yolov3-tiny on Darknet's sample photos finds what the original Darknet finds.

Expected classes are those the original Darknet yolov3-tiny reports (threshold 0.25-0.5); the
reference boxes were drawn by hand on the photos (source pixels, approximate), so a box must
overlap its reference by IoU >= 0.5.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torchvision.io import ImageReadMode, decode_image, read_file
from torchvision.ops import box_iou

from vidpipe.models.detector import Detector
from vidpipe.models.zoo import load_model
from vidpipe.ops.letterbox import letterbox
from vidpipe.types import FrameMeta, ModelInput

pytestmark = pytest.mark.filterwarnings("ignore:The image decoding:DeprecationWarning")

IMAGES = Path(__file__).resolve().parent / "data" / "images"

# image -> (classes that must all be found, groups of which one class must be found)
EXPECTED: dict[str, tuple[set[str], list[set[str]]]] = {
    "dog.jpg": ({"dog", "bicycle"}, [{"truck", "car"}]),
    "person.jpg": ({"person", "horse", "dog"}, []),
    "giraffe.jpg": ({"giraffe"}, []),
    "horses.jpg": ({"horse"}, []),
    "eagle.jpg": ({"bird"}, []),
}

# image -> [(classes any of which may label it, x1, y1, x2, y2)], drawn by hand
REFERENCE_BOXES: dict[str, list[tuple[set[str], tuple[float, float, float, float]]]] = {
    "dog.jpg": [
        ({"dog"}, (130, 220, 315, 540)),
        ({"bicycle"}, (125, 125, 570, 420)),
        ({"truck", "car"}, (470, 75, 690, 170)),
    ],
    "person.jpg": [
        ({"person"}, (190, 98, 275, 378)),
        ({"dog"}, (68, 262, 200, 348)),
        ({"horse"}, (400, 138, 605, 345)),
    ],
}


@pytest.fixture(scope="module", params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def detector(request) -> Detector:
    if request.param == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    return Detector(load_model("yolov3-tiny", device=request.param))


def _detect(detector: Detector, name: str):
    """Decode, letterbox and detect one image; return (labels, scores, boxes on the CPU, (h, w))."""
    dev = detector.device
    img = decode_image(read_file(str(IMAGES / name)), mode=ImageReadMode.RGB).to(dev)
    x, geo = letterbox(img[None], detector.input_size, dtype=detector.dtype)
    meta = FrameMeta(source=name, stream_id=0, index=0, pts=None, height=geo.src_h, width=geo.src_w)
    inp = ModelInput(
        x,
        (meta,),
        torch.tensor([[geo.sx, geo.sy]], device=dev),
        torch.tensor([[float(geo.pad_x), float(geo.pad_y)]], device=dev),
    )
    dets = detector(inp)
    assert dets.device == dev and dets.boxes.dtype == torch.float32
    dets = dets.cpu()
    labels = [detector.names[c] for c in dets.class_ids.tolist()]
    return labels, dets.scores.tolist(), dets.boxes, (geo.src_h, geo.src_w)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_finds_what_darknet_finds(detector, name):
    labels, scores, boxes, (h, w) = _detect(detector, name)
    found = set(labels)
    shown = ", ".join(f"{c} {s:.2f}" for c, s in zip(labels, scores))
    must, one_of = EXPECTED[name]
    assert must <= found, f"{name}: expected {sorted(must)}, got {shown}"
    for group in one_of:
        assert group & found, f"{name}: expected one of {sorted(group)}, got {shown}"
    if name == "horses.jpg":
        assert labels.count("horse") >= 2, f"horses.jpg: expected several horses, got {shown}"
    assert bool((boxes[:, 0] >= 0).all() and (boxes[:, 2] <= w).all() and (boxes[:, 3] <= h).all())
    assert bool((boxes[:, 2] > boxes[:, 0]).all() and (boxes[:, 3] > boxes[:, 1]).all())


@pytest.mark.parametrize("name", sorted(REFERENCE_BOXES))
def test_boxes_land_on_the_objects_in_source_pixels(detector, name):
    labels, _, boxes, _ = _detect(detector, name)
    for classes, ref in REFERENCE_BOXES[name]:
        rows = [i for i, c in enumerate(labels) if c in classes]
        assert rows, f"{name}: no {sorted(classes)}"
        best = float(box_iou(boxes[rows], torch.tensor([ref], dtype=torch.float32)).max())
        assert best >= 0.5, f"{name}: best {sorted(classes)} box overlaps the reference by IoU {best:.2f}"
