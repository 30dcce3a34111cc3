"""ImageDataset: cache filled once and served after, shuffle determinism, DataLoader, bad files."""

from __future__ import annotations

import pytest
import torch
from imgfactory import encode, pattern, write
from torch.utils.data import DataLoader

from vidpipe.errors import DecodeError, SourceError
from vidpipe.images import ImageDataset


@pytest.fixture
def dataset_folder(tmp_path):
    for k in range(10):
        write(tmp_path / "ds" / f"{k:02d}.jpg", encode(pattern(30 + k, 40, seed=k)))
    return tmp_path / "ds"


def _make(folder, device, **kw):
    return ImageDataset(folder, size=(24, 32), device=device, **kw)


def test_second_epoch_served_from_cache(device, dataset_folder):
    ds = _make(dataset_folder, device)
    first = torch.cat([b.data for b in ds.batches(4)])
    assert ds.stats.decoded == 10 and ds.stats.cache_hits == 0 and len(ds.cache) == 10
    # Make the files unreadable: a second epoch must not touch them.
    for p in dataset_folder.iterdir():
        p.write_bytes(b"")
    second = torch.cat([b.data for b in ds.batches(4)])
    assert ds.stats.decoded == 10 and ds.stats.cache_hits == 10 and not ds.skipped
    assert torch.equal(first, second)
    assert first.device.type == device and first.shape == (10, 3, 24, 32)


def test_partial_budget_caches_what_fits(dataset_folder):
    ds = _make(dataset_folder, "cpu", cache_bytes=3 * 3 * 24 * 32 + 5)
    assert ds.cache.capacity == 3
    a = torch.cat([b.data for b in ds.batches(4)])
    b = torch.cat([b.data for b in ds.batches(4)])
    assert torch.equal(a, b)
    assert ds.stats.cache_hits == 3 and ds.stats.decoded == 10 + 7
    assert ds.cache.nbytes == 3 * 3 * 24 * 32


def test_preload_reports_progress_and_fills_cache(dataset_folder):
    seen = []
    ds = _make(dataset_folder, "cpu").preload(batch_size=4, progress=lambda d, t: seen.append((d, t)))
    assert seen == [(4, 10), (8, 10), (10, 10)]
    assert len(ds.cache) == 10
    assert torch.equal(ds[3], next(iter(ds.batches(10))).data[3])
    assert ds.stats.decoded == 10


def test_shuffle_is_deterministic_per_seed_and_epoch(dataset_folder):
    ds = _make(dataset_folder, "cpu", cache_bytes=0)
    a = ds.order(shuffle=True, seed=7, epoch=0)
    assert a == _make(dataset_folder, "cpu").order(shuffle=True, seed=7, epoch=0)
    assert sorted(a) == list(range(10)) and a != list(range(10))
    assert ds.order(shuffle=True, seed=7, epoch=1) != a
    assert ds.order(shuffle=True, seed=8, epoch=0) != a
    got = [i for b in ds.batches(3, shuffle=True, seed=7) for i in b.indices]
    assert got == a
    assert [len(b) for b in ds.batches(3, shuffle=True, seed=7, drop_last=True)] == [3, 3, 3]


def test_getitem_and_dataloader(dataset_folder):
    ds = _make(dataset_folder, "cpu", dtype="fp32")
    x = ds[5]
    assert x.shape == (3, 24, 32) and x.dtype == torch.float32
    assert torch.equal(ds[-5], x)
    order = ds.order(shuffle=True, seed=1)
    batches = list(DataLoader(ds, batch_size=4, sampler=order))  # DataLoader calls __getitems__
    assert [tuple(b.shape) for b in batches] == [(4, 3, 24, 32)] * 2 + [(2, 3, 24, 32)]
    torch.testing.assert_close(batches[0][1], ds[order[1]])
    torch.testing.assert_close(batches[2][0], ds[order[8]])
    with pytest.raises(IndexError):
        ds[10]


def test_bad_files_in_a_dataset(dataset_folder):
    (dataset_folder / "03.jpg").write_bytes(b"not a jpeg at all")
    (dataset_folder / "07.jpg").unlink()
    ds = ImageDataset([str(p) for p in sorted(dataset_folder.iterdir())] + [str(dataset_folder / "07.jpg")],
                      size=(24, 32), device="cpu")  # fmt: skip
    with pytest.raises(DecodeError, match="03.jpg: not_image"):
        ds[3]
    with pytest.raises(SourceError, match="missing"):
        ds[9]
    got = [i for b in ds.batches(4) for i in b.indices]
    assert got == [0, 1, 2, 4, 5, 6, 7, 8]
    assert [(s.index, s.reason) for s in ds.skipped] == [(3, "not_image"), (9, "missing")]
    assert 3 not in ds.order() and len(ds) == 10
