"""Darknet cfg parsing: every supported layer type, defaults, resolved indices, errors with file:line."""

from __future__ import annotations

import pytest
from darknet_helpers import YOLOV3_LIKE, YOLOV4_TINY_LIKE

from vidpipe.errors import ModelError
from vidpipe.models.darknet.cfg import (
    ConvSection,
    MaxpoolSection,
    RouteSection,
    ShortcutSection,
    UpsampleSection,
    YoloSection,
    parse_cfg,
    read_cfg,
)


def test_yolov3_like_sections_and_resolved_indices():
    cfg = parse_cfg(YOLOV3_LIKE, source="v3.cfg")
    kinds = [type(s) for s in cfg.layers]
    assert kinds == [
        ConvSection, ConvSection, ConvSection, ConvSection, ShortcutSection, ConvSection, ConvSection,
        YoloSection, RouteSection, ConvSection, UpsampleSection, RouteSection, ConvSection, YoloSection,
    ]  # fmt: skip
    assert (cfg.net.width, cfg.net.height, cfg.net.channels) == (64, 64, 3)
    first = cfg.layers[0]
    assert (first.filters, first.size, first.stride, first.padding) == (8, 3, 1, 1)
    assert first.batch_normalize and first.activation == "leaky"
    assert cfg.layers[2].padding == 0  # size 1 with pad=1 -> size // 2 = 0
    assert not cfg.layers[6].batch_normalize and cfg.layers[6].activation == "linear"
    assert cfg.layers[4].sources == (1,) and cfg.layers[4].activation == "linear"  # from=-3 at layer 4
    assert cfg.layers[8].layers == (5,)
    assert cfg.layers[11].layers == (10, 4)  # -1 relative, 4 absolute
    assert cfg.layers[10].stride == 2
    y = cfg.layers[7]
    assert y.mask == (3, 4, 5) and y.classes == 2 and y.scale_x_y == 1.0
    assert y.masked_anchors == ((30.0, 61.0), (62.0, 45.0), (59.0, 119.0))
    assert cfg.num_classes == 2 and len(cfg.yolo_layers) == 2
    assert cfg.text == YOLOV3_LIKE


def test_yolov4_tiny_like_groups_maxpool_scale_and_activations():
    cfg = parse_cfg(YOLOV4_TINY_LIKE)
    route = cfg.layers[2]
    assert isinstance(route, RouteSection)
    assert (route.layers, route.groups, route.group_id) == ((1,), 2, 1)
    assert cfg.layers[4].layers == (3, 1)
    pools = [s for s in cfg.layers if isinstance(s, MaxpoolSection)]
    assert [(p.size, p.stride, p.padding) for p in pools] == [(2, 2, 1), (2, 2, 1), (2, 1, 1)]
    acts = [s.activation for s in cfg.layers if isinstance(s, ConvSection)]
    assert acts == ["mish", "swish", "relu", "logistic", "linear"]
    y = cfg.yolo_layers[0]
    assert y.scale_x_y == pytest.approx(1.05) and y.classes == 3 and len(y.anchors) == 4


def test_darknet_defaults():
    cfg = parse_cfg(
        "[net]\n[convolutional]\nfilters=18\n[maxpool]\nstride=2\n[yolo]\nanchors=1,2,3,4,5,6\nnum=3\nclasses=1\n"
    )
    conv, pool, yolo = cfg.layers
    assert conv.activation == "logistic"  # Darknet's default for [convolutional]
    assert (conv.size, conv.stride, conv.padding, conv.batch_normalize) == (1, 1, 0, False)
    assert (pool.size, pool.stride, pool.padding) == (2, 2, 1)  # size defaults to stride, padding to size-1
    assert yolo.mask == (0, 1, 2)  # no mask: all anchors
    assert (cfg.net.width, cfg.net.height) == (416, 416)


def test_read_cfg_from_file(tmp_path):
    path = tmp_path / "m.cfg"
    path.write_text(YOLOV3_LIKE)
    assert read_cfg(path).source == str(path)
    with pytest.raises(ModelError, match="cannot read Darknet cfg"):
        read_cfg(tmp_path / "missing.cfg")


def _bad(text: str) -> str:
    with pytest.raises(ModelError) as info:
        parse_cfg(text, source="bad.cfg")
    return str(info.value)


@pytest.mark.parametrize(
    ("text", "where", "words"),
    [
        ("[net]\n[region]\nclasses=2\n", "bad.cfg:2", "[region] is not supported"),
        ("[net]\n[convolutional]\nfilters=abc\n", "bad.cfg:3", "filters='abc' is not an integer"),
        ("[net]\n[convolutional]\nactivation=gelu\n", "bad.cfg:3", "activation='gelu' is not supported"),
        ("[net]\n[route]\nlayers=-1\n", "bad.cfg:3", "layer 0 is the first layer"),
        ("[net]\n[convolutional]\n[route]\nlayers=5\n", "bad.cfg:4", "can only use layers 0..0"),
        ("[net]\n[convolutional]\n[yolo]\nnum=3\nanchors=1,2,3\n", "bad.cfg:3", "anchors has 3 numbers"),
        ("[net]\n[convolutional]\n[yolo]\nnum=1\nanchors=1,2\nmask=0,1\n", "bad.cfg:3", "mask=0,1"),
        ("[net]\n[convolutional]\n[yolo]\nanchors=1,2\nnew_coords=1\n", "bad.cfg:5", "new_coords=1 is not supported"),
        ("[convolutional]\nfilters=2\n", "bad.cfg:1", "must start with a [net]"),
        ("width=3\n[net]\n", "bad.cfg:1", "before the first [section]"),
        ("[net]\nthis is not an option\n", "bad.cfg:2", "expected 'key=value'"),
        ("[net]\n[route]\n", "bad.cfg:2", "needs layers="),
        ("[net]\n[convolutional]\n", "bad.cfg", "no [yolo] layer"),
        ("[net]\n[maxpool]\nmaxpool_depth=1\n", "bad.cfg:3", "maxpool_depth=1 is not supported"),
    ],
)
def test_errors_name_file_and_line(text, where, words):
    message = _bad(text)
    assert message.startswith(where + ":")
    assert words in message


def test_yolo_layers_must_agree_on_classes():
    text = "[net]\n[convolutional]\n[yolo]\nanchors=1,2\nclasses=2\n[convolutional]\n[yolo]\nanchors=1,2\nclasses=3\n"
    message = _bad(text)
    assert "bad.cfg:7" in message and "classes=3 differs" in message


def test_no_anchor_warning_when_each_anchor_has_one_layer(caplog):
    with caplog.at_level("WARNING", logger="vidpipe.models.darknet.cfg"):
        parse_cfg(YOLOV3_LIKE, source="v3.cfg")
    assert not caplog.records


def test_warns_once_naming_the_file_and_layers_for_a_shared_and_an_unused_anchor(caplog, tmp_path):
    """The released yolov3-tiny layout (mask 3,4,5 and 1,2,3): anchor 3 twice, anchor 0 never."""
    path = tmp_path / "tiny.cfg"
    path.write_text(YOLOV3_LIKE.replace("mask = 0,1,2", "mask = 1,2,3"))
    with caplog.at_level("WARNING", logger="vidpipe.models.darknet.cfg"):
        cfg = read_cfg(path)
    assert [y.mask for y in cfg.yolo_layers] == [(3, 4, 5), (1, 2, 3)]  # still loads
    (rec,) = caplog.records
    msg = rec.getMessage()
    assert rec.levelname == "WARNING" and "\n" not in msg
    assert str(path) in msg and "anchor 3" in msg and "anchor 0 by no [yolo] layer" in msg
    assert "layer 7 (line" in msg and "layer 13 (line" in msg and "mask=1,2,3" in msg


def test_warns_for_unused_anchors_only(caplog):
    text = YOLOV3_LIKE.replace("mask = 0,1,2", "mask = 0,1")
    with caplog.at_level("WARNING", logger="vidpipe.models.darknet.cfg"):
        parse_cfg(text, source="two.cfg")
    (rec,) = caplog.records
    assert "two.cfg" in rec.getMessage() and "anchor 2 by no [yolo] layer" in rec.getMessage()
    assert "used by" not in rec.getMessage()


def test_bundles_are_not_warned_about_again(caplog):
    """The bundled yolov3-tiny carries the released layout on purpose; its cfg was checked when converted."""
    from vidpipe.models.darknet import read_bundle
    from vidpipe.models.zoo import bundled_path

    with caplog.at_level("WARNING", logger="vidpipe.models.darknet.cfg"):
        b = read_bundle(bundled_path("yolov3-tiny"))
    assert [y.mask for y in b.cfg.yolo_layers] == [(3, 4, 5), (1, 2, 3)]
    assert not caplog.records
