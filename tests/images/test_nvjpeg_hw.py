"""The direct nvJPEG hardware decoder against torchvision's decoder on the same engines (GPU only)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch
from imgfactory import encode, pattern

PHOTOS = Path(__file__).resolve().parents[1] / "data" / "images"

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def decoder():
    from vidpipe.errors import BackendUnavailableError
    from vidpipe.images.nvjpeg_hw import NvjpegHwDecoder

    try:
        return NvjpegHwDecoder(torch.device("cuda"))
    except BackendUnavailableError as exc:
        pytest.skip(str(exc))


def _blob(data: bytes) -> torch.Tensor:
    return torch.frombuffer(bytearray(data), dtype=torch.uint8)


def _files() -> list[torch.Tensor]:
    out = [_blob(p.read_bytes()) for p in sorted(PHOTOS.glob("*.jpg"))]
    out += [_blob(encode(pattern(70 + k, 90 + 2 * k, seed=k))) for k in range(6)]
    out += [_blob(encode(pattern(64, 96), mode="L")), _blob(encode(pattern(50, 80), progressive=True))]
    return out


def _reference(blobs):
    from torchvision.io import ImageReadMode, decode_jpeg

    return [decode_jpeg([b], mode=ImageReadMode.RGB, device="cuda")[0] for b in blobs]


@pytest.mark.parametrize("with_headers", [True, False], ids=["headers", "library-parsed"])
def test_same_pixels_as_torchvision(decoder, with_headers):
    from vidpipe.images.formats import parse_jpeg_header

    blobs = _files()
    infos = [parse_jpeg_header(b.numpy().tobytes()) for b in blobs] if with_headers else None
    got = decoder.decode(blobs, infos)
    for k, (g, r) in enumerate(zip(got, _reference(blobs))):
        assert not isinstance(g, Exception), (k, g)
        assert g.shape == r.shape and g.device == r.device, k
        assert torch.equal(g, r), f"file {k}: max diff {(g.int() - r.int()).abs().max()}"


def test_bad_file_fails_alone(decoder):
    blobs = _files()[:4]
    bad = blobs[1].numpy().tobytes()[:150]  # cut inside the header
    got = decoder.decode([blobs[0], _blob(bad), blobs[2]])
    assert isinstance(got[1], Exception)
    ref = _reference([blobs[0], blobs[2]])
    assert torch.equal(got[0], ref[0]) and torch.equal(got[2], ref[1])


def test_consecutive_batches_overlap_safely(decoder):
    """Several batches queued back to back (two decode states in turn), read only at the end."""
    blobs = _files()
    want = _reference(blobs)
    runs = [decoder.decode(blobs[k:] + blobs[:k]) for k in range(5)]
    torch.cuda.synchronize()
    for k, got in enumerate(runs):
        assert all(torch.equal(g, w) for g, w in zip(got, want[k:] + want[:k])), k


def test_loader_with_the_hardware_decoder(decoder, tmp_path):
    import vidpipe.images as vi
    from imgfactory import write

    for k in range(3):
        write(tmp_path / f"{k}.jpg", encode(pattern(40, 60, seed=k), orientation=k + 5))
    hw = vi.load(tmp_path, device="cuda", size=32, decoder="nvjpeg-hw", dtype="uint8")
    assert hw.decoder_name == "nvjpeg-hw" and "cuda" in hw.decoder
    (a,) = list(hw)
    (b,) = list(vi.load(tmp_path, device="cuda", size=32, decoder="nvjpeg", dtype="uint8"))
    assert hw.stats.decoded_gpu == 3 and hw.stats.gpu_fallbacks == 0 and torch.equal(a.data, b.data)
    assert vi.load(tmp_path, device="cuda", decoder="nvjpeg-hw")._gpu is hw._gpu  # one per device, shared


def test_concurrent_calls_on_their_own_streams(decoder):
    blobs = _files()
    want = _reference(blobs)
    results: dict[int, list] = {}

    def work(j: int) -> None:
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            outs = [decoder.decode(blobs) for _ in range(3)]
            stream.synchronize()
        results[j] = outs

    threads = [threading.Thread(target=work, args=(j,)) for j in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [0, 1, 2, 3]
    for outs in results.values():
        for got in outs:
            assert all(torch.equal(g, w) for g, w in zip(got, want))
