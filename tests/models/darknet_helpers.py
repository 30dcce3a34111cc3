"""Small Darknet cfgs and a writer of ``.weights`` files in Darknet's format, for the model tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np

# A yolov3-like network: strided convs, a residual [shortcut], two [yolo] outputs, [upsample] and
# a two-layer [route]. 64x64 input, 2 classes, 3 anchors per output: 3 * (2 + 5) = 21 filters.
YOLOV3_LIKE = """\
[net]
# comments and odd spacing are part of real cfgs
width=64
height = 64
channels=3

[convolutional]
batch_normalize=1
filters=8
size=3
stride=1
pad=1
activation=leaky

[convolutional]
batch_normalize=1
filters=16
size=3
stride=2
pad=1
activation=leaky

[convolutional]
batch_normalize=1
filters=8
size=1
stride=1
pad=1
activation=leaky

[convolutional]
batch_normalize=1
filters=16
size=3
stride=1
pad=1
activation=leaky

[shortcut]
from=-3
activation=linear

[convolutional]
batch_normalize=1
filters=32
size=3
stride=2
pad=1
activation=leaky

[convolutional]
size=1
stride=1
pad=1
filters=21
activation=linear

[yolo]
mask = 3,4,5
anchors = 10,13,  16,30,  33,23,  30,61,  62,45,  59,119
classes=2
num=6

[route]
layers = -3

[convolutional]
batch_normalize=1
filters=8
size=1
stride=1
pad=1
activation=leaky

[upsample]
stride=2

[route]
layers = -1, 4

[convolutional]
size=1
stride=1
pad=1
filters=21
activation=linear

[yolo]
mask = 0,1,2
anchors = 10,13,  16,30,  33,23,  30,61,  62,45,  59,119
classes=2
num=6
"""

# A yolov4-tiny-like network: [route] groups/group_id (CSP), maxpool stride 2 and the size-2
# stride-1 maxpool, scale_x_y, every supported activation. 64x64 input, 3 classes:
# 3 * (3 + 5) = 24 filters.
YOLOV4_TINY_LIKE = """\
[net]
width=64
height=64
channels=3

[convolutional]
batch_normalize=1
filters=8
size=3
stride=2
pad=1
activation=mish

[convolutional]
batch_normalize=1
filters=16
size=3
stride=1
pad=1
activation=swish

[route]
layers=-1
groups=2
group_id=1

[convolutional]
batch_normalize=1
filters=8
size=3
stride=1
pad=1
activation=relu

[route]
layers = -1,-3

[maxpool]
size=2
stride=2

[convolutional]
batch_normalize=1
filters=16
size=3
stride=1
pad=1
activation=logistic

[maxpool]
size=2
stride=2

[maxpool]
size=2
stride=1

[convolutional]
filters=24
size=1
stride=1
pad=1
activation=linear

[yolo]
mask = 1,2,3
anchors = 10,14,  23,27,  37,58,  81,82
classes=3
num=4
scale_x_y = 1.05
"""


def write_weights(
    path: Path,
    net,
    *,
    seed: int = 0,
    major: int = 0,
    minor: int = 2,
    extra: int = 0,
) -> list[dict[str, np.ndarray]]:
    """Write random weights for ``net`` (a DarknetNet) in Darknet's ``.weights`` layout.

    Returns the raw (unfolded) parameters of each ``[convolutional]`` in file order, with keys
    ``bias`` and, for batch-normalized ones, ``gamma``, ``mean``, ``var``; plus ``weight``.
    ``extra`` appends that many stray floats (to provoke the size check).
    """
    from vidpipe.models.darknet.layers import Conv

    rng = np.random.default_rng(seed)
    chunks: list[np.ndarray] = []
    params: list[dict[str, np.ndarray]] = []
    for m in net.layers:
        if not isinstance(m, Conv):
            continue
        f = m.conv.out_channels
        p = {"bias": rng.normal(0.0, 0.5, f).astype(np.float32)}
        chunks.append(p["bias"])
        if m.batch_normalize:
            p["gamma"] = rng.uniform(0.5, 1.5, f).astype(np.float32)
            p["mean"] = rng.normal(0.0, 0.3, f).astype(np.float32)
            p["var"] = rng.uniform(0.05, 2.0, f).astype(np.float32)
            chunks += [p["gamma"], p["mean"], p["var"]]
        p["weight"] = rng.normal(0.0, 0.2, tuple(m.conv.weight.shape)).astype(np.float32)
        chunks.append(p["weight"].ravel())
        params.append(p)
    chunks.append(rng.normal(size=extra).astype(np.float32))
    with open(path, "wb") as fh:
        fh.write(np.array([major, minor, 0], dtype="<i4").tobytes())
        if major * 10 + minor >= 2 and major < 1000 and minor < 1000:
            fh.write(np.array([123456], dtype="<u8").tobytes())
        else:
            fh.write(np.array([123456], dtype="<i4").tobytes())
        fh.write(np.concatenate(chunks).astype("<f4").tobytes())
    return params


def darknet_model_files(tmp_path: Path, cfg_text: str = YOLOV3_LIKE, *, stem: str = "tiny", seed: int = 0) -> Path:
    """Write ``<stem>.cfg`` and random ``<stem>.weights`` into ``tmp_path``; return the cfg path."""
    from vidpipe.models.darknet import DarknetNet, parse_cfg

    cfg_path = tmp_path / f"{stem}.cfg"
    cfg_path.write_text(cfg_text)
    write_weights(tmp_path / f"{stem}.weights", DarknetNet(parse_cfg(cfg_text)), seed=seed)
    return cfg_path
