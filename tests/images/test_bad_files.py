"""Every kind of bad file is skipped with its reason; the good ones arrive, in order."""

from __future__ import annotations

import os

import pytest
from imgfactory import bad_files, encode, pattern, write
from imgtools import make_loader, routes

from vidpipe.errors import SourceError


@routes
def test_bad_files_skipped_with_reasons_rest_in_order(route, tmp_path):
    folder = tmp_path / "mixed"
    expected = bad_files(folder)
    big = encode(pattern(300, 400, seed=1))
    expected["j_truncated_scan.jpg"] = "truncated"
    write(folder / "j_truncated_scan.jpg", big[: len(big) * 3 // 4])
    good = ["a_good.jpg", "k_png_named.jpg", "m_good.png", "z_good.jpg"]
    write(folder / "a_good.jpg", encode(pattern(40, 50, seed=2)))
    write(folder / "k_png_named.jpg", encode(pattern(30, 30, seed=3), "PNG"))
    write(folder / "m_good.png", encode(pattern(20, 70, seed=4), "PNG"))
    write(folder / "z_good.jpg", encode(pattern(64, 48, seed=5)))
    loader = make_loader(route, [str(folder), str(folder / "missing.jpg")], batch_size=3, size=(32, 32))
    batches = list(loader)
    delivered = [os.path.basename(p) for b in batches for p in b.paths]
    assert delivered == good
    got = {os.path.basename(s.path): s.reason for s in loader.skipped}
    assert got == {**expected, "missing.jpg": "missing"}
    # Skips are reported with the batch that follows them (or only in loader.skipped at the end),
    # each exactly once, and every detail says something.
    in_batches = [s for b in batches for s in b.skipped]
    assert len(set(in_batches)) == len(in_batches) <= len(loader.skipped)
    assert all(s.detail for s in loader.skipped)
    indices = [i for b in batches for i in b.indices]
    assert indices == sorted(indices)
    assert loader.stats.images == 4 and loader.stats.skipped == len(expected) + 1


@routes
def test_only_bad_files_yields_no_batch(route, tmp_path):
    expected = bad_files(tmp_path / "bad")
    loader = make_loader(route, tmp_path / "bad", batch_size=4)
    assert list(loader) == []
    assert {os.path.basename(s.path): s.reason for s in loader.skipped} == expected
    failure = loader.failure(str(tmp_path / "bad"))  # the pass delivered nothing: a clear error
    assert isinstance(failure, SourceError) and "\n" not in str(failure)
    assert str(failure).startswith(f"{tmp_path / 'bad'}: none of its {len(expected)} image files could be read")


def test_failure_only_when_nothing_was_read(tmp_path):
    import vidpipe.images as vi

    good = write(tmp_path / "good.jpg", encode(pattern(10, 10)))
    cut = encode(pattern(64, 64, seed=1))
    bad = write(tmp_path / "cut.jpg", cut[: len(cut) // 2])
    loader = vi.load(bad, device="cpu")
    assert list(loader) == [] and loader.failure() is not None
    assert str(loader.failure()).startswith(f"{bad}: cannot read this image (truncated: ")
    loader = vi.load([bad, good], device="cpu")
    assert [len(b) for b in loader] == [1] and loader.failure() is None  # one bad file is a skip
    assert vi.load(bad, device="cpu").failure() is None  # no pass run yet: nothing to judge


def test_directory_named_like_an_image_in_a_list(tmp_path):
    import vidpipe.images as vi

    (tmp_path / "folder.jpg").mkdir()
    ok = write(tmp_path / "ok.jpg", encode(pattern(10, 10)))
    loader = vi.load([str(tmp_path / "folder.jpg" / "nothing.jpg"), str(ok)], device="cpu")
    assert [len(b) for b in loader] == [1]
    assert [s.reason for s in loader.skipped] == ["missing"]


@pytest.mark.parametrize("max_pixels", [100, 10_000])
def test_max_pixels_limit(max_pixels, tmp_path):
    import vidpipe.images as vi

    p = write(tmp_path / "x.jpg", encode(pattern(50, 60)))
    loader = vi.load(p, device="cpu", max_pixels=max_pixels)
    n = sum(len(b) for b in loader)
    assert n == (1 if max_pixels >= 3000 else 0)
    if n == 0:
        (s,) = loader.skipped
        assert s.reason == "too_large" and "max_pixels=100" in s.detail


@pytest.mark.parametrize("whole", [True, False], ids=["read-whole", "sniffed-first"])
def test_reader_results_with_both_read_strategies(whole, tmp_path, monkeypatch):
    """Files up to a size are read in one call and sniffed after; larger ones sniffed first:
    both give the same bytes and the same skip reasons."""
    import torch

    from vidpipe.images import reader

    if not whole:
        monkeypatch.setattr(reader, "_READ_WHOLE_BYTES", 10)
    good = encode(pattern(40, 50, seed=2))
    files = {"ok.jpg": good, "text.jpg": b"hello, this is not an image" * 10, "empty.jpg": b"",
             "tiny.jpg": b"\xff\xd8\xff", "cut.jpg": good[: len(good) // 2]}  # fmt: skip
    for name, data in files.items():
        write(tmp_path / name, data)
    opts = reader.ReadOptions(gpu_jpeg=True, max_pixels=10**8)
    got = {name: reader.read_image(0, str(tmp_path / name), opts) for name in files}
    ok = got.pop("ok.jpg")
    assert isinstance(ok, reader.Prepared) and ok.size == (40, 50)
    assert ok.encoded.dtype == torch.uint8 and bytes(ok.encoded.numpy()) == good
    reasons = {name: r.reason for name, r in got.items()}
    assert reasons == {
        "text.jpg": "not_image",
        "empty.jpg": "empty",
        "tiny.jpg": "corrupt",
        "cut.jpg": "truncated",
    }
