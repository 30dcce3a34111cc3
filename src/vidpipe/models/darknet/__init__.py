"""Darknet YOLO models in PyTorch: cfg parser, network builder, ``.weights`` reader, bundles.

Supported layer types: ``[convolutional]`` (with or without batch-norm; leaky, linear, relu, mish,
swish, logistic), ``[maxpool]`` (including size 2 stride 1), ``[route]`` (including
``groups``/``group_id``), ``[shortcut]``, ``[upsample]`` and ``[yolo]`` (including
``scale_x_y``): enough for yolov3, yolov3-tiny, yolov4 and yolov4-tiny.

Importing this package imports torch.
"""

from vidpipe.models.darknet.bundle import Bundle, build_net, read_bundle, write_bundle
from vidpipe.models.darknet.cfg import DarknetCfg, parse_cfg, read_cfg
from vidpipe.models.darknet.model import DarknetModel
from vidpipe.models.darknet.net import DarknetNet
from vidpipe.models.darknet.weights import count_weights, fold_batchnorm, load_darknet_weights, read_weights

__all__ = [
    "Bundle",
    "DarknetCfg",
    "DarknetModel",
    "DarknetNet",
    "build_net",
    "count_weights",
    "fold_batchnorm",
    "load_darknet_weights",
    "parse_cfg",
    "read_bundle",
    "read_cfg",
    "read_weights",
    "write_bundle",
]
