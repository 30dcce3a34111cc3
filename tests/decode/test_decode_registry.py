"""Backend registry: auto order, explicit requests, strict_gpu, registration, lazy imports."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest
import torch
from conftest import nvdec_skip_reason

from vidpipe.decode import registry
from vidpipe.decode.base import DecodeOptions
from vidpipe.decode.probe import probe
from vidpipe.decode.pyav import PyAVDecoder
from vidpipe.decode.registry import BackendChoice, open_decoder, register_backend, select_backend
from vidpipe.errors import BackendUnavailableError, ConfigError, GpuFallbackError, UnsupportedError

CUDA = torch.device("cuda")  # a device object only: select_backend makes no CUDA call
nvdec_usable = pytest.mark.skipif(nvdec_skip_reason() is None, reason="PyNvVideoCodec imports here")


@pytest.fixture
def info(make_clip):
    return probe(make_clip(".mp4", frames=10, gop=5, width=160, height=96).path)


@pytest.fixture
def clean_registry(monkeypatch):
    """Registrations made by a test are undone afterwards."""
    monkeypatch.setattr(registry, "_registered", dict(registry._registered))
    monkeypatch.setattr(registry, "_auto_extra", list(registry._auto_extra))


def test_cpu_picks_pyav(info, caplog):
    with caplog.at_level(logging.INFO, logger="vidpipe.decode.registry"):
        choice = select_backend(info, "cpu")
    assert isinstance(choice, BackendChoice) and choice.name == "pyav"
    # a CPU device is not a fallback from the GPU: no GPU backend is tried, none is mentioned
    assert choice.rejected == () and "nvdec" not in choice.reason.lower()
    assert not any("nvdec" in r.message.lower() for r in caplog.records)
    assert any("decoding with pyav" in r.message and r.levelno == logging.INFO for r in caplog.records)


@nvdec_usable
def test_cuda_without_nvdec_falls_back_with_warning(info, caplog):
    with caplog.at_level(logging.INFO, logger="vidpipe.decode.registry"):
        choice = select_backend(info, CUDA)
    assert choice.name == "pyav" and choice.fell_back
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings and "nvdec" in warnings[0].message and "CPU" in warnings[0].message


def test_explicit_nvdec_unavailable(info):
    with pytest.raises((BackendUnavailableError, UnsupportedError), match="decoder='nvdec' cannot decode") as err:
        select_backend(info, "cpu", "nvdec")
    assert info.source in str(err.value)
    if nvdec_skip_reason() is not None:
        assert isinstance(err.value, BackendUnavailableError)


def test_dali_only_when_asked(info):
    assert "dali" not in registry._auto_order()
    try:
        import nvidia.dali  # noqa: F401
    except Exception:  # noqa: BLE001
        with pytest.raises(BackendUnavailableError, match="dali"):
            select_backend(info, "cpu", "dali")


@nvdec_usable
def test_strict_gpu_auto_raises_with_reasons(info):
    with pytest.raises(GpuFallbackError, match=r"strict_gpu.*nvdec: .*pyav would run on the CPU"):
        select_backend(info, CUDA, strict_gpu=True)


def test_strict_gpu_with_explicit_cpu_decoder(info):
    with pytest.raises(GpuFallbackError, match="decoder='pyav' decodes .* on the CPU"):
        select_backend(info, CUDA, "pyav", strict_gpu=True)


def test_strict_gpu_is_moot_on_cpu(info):
    assert select_backend(info, "cpu", strict_gpu=True).name == "pyav"
    assert select_backend(info, "cpu", "pyav", strict_gpu=True).name == "pyav"


def test_invalid_decoder_name(info):
    with pytest.raises(ConfigError, match="invalid decoder='ffmpeg'; expected one of 'auto', 'nvdec', 'pyav', 'dali'"):
        select_backend(info, "cpu", "ffmpeg")
    with pytest.raises(ConfigError):
        open_decoder(info, device="cpu", decoder="gpu")


def test_open_decoder(info):
    with open_decoder(info.source, device="cpu", options=DecodeOptions(max_frames=4)) as dec:
        assert isinstance(dec, PyAVDecoder) and dec.choice.name == "pyav"
        assert dec.info == info
        assert sum(len(b) for b in dec.batches(8)) == 4


def test_open_decoder_accepts_stream_info(info):
    dec = open_decoder(info, device="cpu", decoder="pyav")
    assert dec.choice == BackendChoice("pyav", "decoder='pyav' was requested")


def _pyav_single_thread(info, *, device, options):
    return PyAVDecoder(info, device=device, options=options, threads=1)


def _hevc_only(info, device):
    return None if info.codec == "hevc" else f"only HEVC, this is {info.codec}"


def test_registered_backend_joins_auto_before_the_cpu_fallback(info, make_clip, clean_registry):
    register_backend("pyav1", _pyav_single_thread, _hevc_only, gpu=False, auto=True)
    assert registry._auto_order() == ("nvdec", "pyav1", "pyav")
    choice = select_backend(info, "cpu")
    assert choice.name == "pyav" and ("pyav1", "only HEVC, this is h264") in choice.rejected
    hevc = probe(make_clip(".mkv", codec="hevc", frames=4, gop=4).path)
    assert select_backend(hevc, "cpu").name == "pyav1"
    dec = open_decoder(hevc, device="cpu")
    assert dec.threads == 1 and sum(len(b) for b in dec.batches(4)) == 4
    with pytest.raises(UnsupportedError, match="only HEVC"):
        select_backend(info, "cpu", "pyav1")


def test_a_failing_check_is_a_rejection(info, clean_registry):
    def broken(info, device):
        raise RuntimeError("driver exploded")

    register_backend("flaky", _pyav_single_thread, broken, gpu=False, auto=True)
    choice = select_backend(info, "cpu")
    assert choice.name == "pyav"
    assert ("flaky", "flaky check failed (RuntimeError: driver exploded)") in choice.rejected


def test_registry_import_is_light():
    code = (
        "import sys, vidpipe.decode.registry, vidpipe.video, vidpipe.sources;"
        "heavy = [m for m in ('av', 'torch', 'numpy', 'vidpipe.decode.pyav') if m in sys.modules];"
        "print(heavy); sys.exit(1 if heavy else 0)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
