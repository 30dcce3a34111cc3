"""The loader as an iterable: batching, order, threads, options, ModelInput."""

from __future__ import annotations

import threading
import time

import pytest
import torch
from imgtools import jpeg_folder, make_loader, routes

import vidpipe.images as vi
from vidpipe.errors import ConfigError
from vidpipe.types import ModelInput


@routes
def test_batches_in_listing_order_with_metadata(route, tmp_path):
    folder = jpeg_folder(tmp_path)
    loader = make_loader(route, folder, batch_size=2, size=(32, 48))
    batches = list(loader)
    assert [len(b) for b in batches] == [2, 2, 1]
    assert [i for b in batches for i in b.indices] == [0, 1, 2, 3, 4]
    assert [p for b in batches for p in b.paths] == vi.list_images(folder)
    assert [s for b in batches for s in b.sizes] == [(48, 64), (64, 48), (30, 90), (50, 50), (40, 60)]
    b = batches[0]
    assert b.data.shape == (2, 3, 32, 48) and b.data.dtype in (torch.float16, torch.float32)
    assert b.scale.shape == (2, 2) and b.pad.shape == (2, 2) and b.scale.device == b.data.device
    assert loader.total == 5 and loader.stats.images == 5 and not loader.skipped


def test_to_model_input_frames(tmp_path):
    folder = jpeg_folder(tmp_path)
    (batch,) = list(vi.load(folder, device="cpu", batch_size=8, size=64, stream_id=3))
    mi = batch.to_model_input()
    assert isinstance(mi, ModelInput) and mi.tensor is batch.data and mi.scale.shape == (5, 2)
    f = mi.frames[2]
    assert (f.source, f.stream_id, f.index, f.pts, f.height, f.width) == (batch.paths[2], 3, 2, None, 30, 90)
    assert mi.scale[2].tolist() == pytest.approx([64 / 90, 21 / 30]) and mi.pad[2].tolist() == pytest.approx([0.0, 21.0])
    with pytest.raises(ConfigError, match="letterbox"):
        next(iter(vi.load(folder, device="cpu", mode="resize"))).to_model_input()


def test_uint8_and_prefetch_zero_give_the_same_pixels(tmp_path):
    folder = jpeg_folder(tmp_path)
    a = torch.cat([b.data for b in vi.load(folder, device="cpu", dtype="uint8", prefetch=0, batch_size=2)])
    b = torch.cat([b.data for b in vi.load(folder, device="cpu", dtype="uint8", prefetch=3, batch_size=5)])
    f = torch.cat([b.data for b in vi.load(folder, device="cpu", dtype=torch.float32)])
    assert a.dtype == torch.uint8 and torch.equal(a, b)
    assert (a.float() / 255 - f).abs().max() <= 0.5 / 255 + 1e-6


def test_breaking_out_stops_the_threads(tmp_path):
    folder = jpeg_folder(tmp_path)
    before = threading.active_count()
    loader = vi.load(folder, device="cpu", batch_size=1, prefetch=1, num_threads=4)
    for _ in loader:
        break
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert threading.active_count() <= before
    assert sum(len(b) for b in loader) == 5  # a loader can be iterated again


def test_errors_in_the_producer_reach_the_consumer(tmp_path, monkeypatch):
    folder = jpeg_folder(tmp_path)
    from vidpipe.images import loader as loader_mod

    def boom(*a, **k):
        raise RuntimeError("resize exploded")

    monkeypatch.setattr(loader_mod, "resize_images", boom)
    with pytest.raises(RuntimeError, match="resize exploded"):
        list(vi.load(folder, device="cpu"))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mode": "crop"}, "mode"),
        ({"dtype": "int8"}, "dtype"),
        ({"decoder": "nvjpeg"}, "CUDA"),
        ({"size": (0, 10)}, "size"),
        ({"size": None}, "size"),
        ({"batch_size": 0}, "batch_size"),
        ({"device": "tpu"}, "device"),
    ],
)
def test_invalid_options_raise_config_error(tmp_path, kwargs, match):
    folder = jpeg_folder(tmp_path)
    with pytest.raises(ConfigError, match=match):
        vi.load(folder, **{"device": "cpu", **kwargs})


def test_native_size_mode(tmp_path):
    folder = jpeg_folder(tmp_path)
    (batch,) = list(vi.load(folder, device="cpu", mode="none", batch_size=8))
    assert [tuple(t.shape[1:]) for t in batch.data] == list(batch.sizes)
    assert "native" in repr(batch)
