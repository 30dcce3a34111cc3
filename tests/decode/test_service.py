"""``vidpipe.decoder_service`` where there is no NVDEC (this CPU machine, or ``device="cpu"``):
nothing starts, the calls in the block run as without it, and bad ``processes`` are refused. Its
processes on a GPU: ``test_service_gpu.py``."""

from __future__ import annotations

import logging

import pytest

import vidpipe
from vidpipe.decode.service import DecoderService
from vidpipe.errors import ConfigError


def test_cpu_device_starts_nothing_and_the_calls_run(bikes_path, caplog):
    from vidpipe.decode.procpool import describe

    caplog.set_level(logging.INFO, logger="vidpipe.decode.service")
    with vidpipe.decoder_service(device="cpu") as svc:
        assert svc == DecoderService(device=None, processes=0, started=False)
        run = vidpipe.detect(bikes_path, device="cpu", max_frames=8, batch_size=4)
        results = list(run)
    assert [r.index for r in results] == list(range(8))
    assert describe() == ""
    rec = [r for r in caplog.records if "no decoder process started" in r.getMessage()]
    assert rec and rec[0].levelno == logging.INFO  # asked for the CPU: not worth a warning


@pytest.mark.parametrize("missing", ["gpu", "PyNvVideoCodec"])
def test_cuda_without_nvdec_warns(caplog, monkeypatch, missing):
    """Asked for a GPU where NVDEC cannot run (made so on any machine): a warning with the
    reason, nothing started."""
    import importlib.util

    from vidpipe.decode.procpool import describe

    if missing == "gpu":
        monkeypatch.setattr("vidpipe.decode.prestart.gpu_name", lambda device: None)
    else:
        monkeypatch.setattr("vidpipe.decode.prestart.gpu_name", lambda device: "cuda:0")
        find_spec = importlib.util.find_spec
        monkeypatch.setattr("importlib.util.find_spec", lambda n: None if n == "PyNvVideoCodec" else find_spec(n))
    caplog.set_level(logging.INFO, logger="vidpipe.decode.service")
    with vidpipe.decoder_service(2, device="cuda") as svc:
        assert svc.device is None and not svc.started
    assert describe() == ""
    rec = [r for r in caplog.records if "no decoder process started" in r.getMessage()]
    assert rec and rec[0].levelno == logging.WARNING
    assert ("no NVIDIA GPU" if missing == "gpu" else "PyNvVideoCodec is not installed") in rec[0].getMessage()


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "4", 65])
def test_bad_process_counts_are_refused(bad):
    with pytest.raises(ConfigError, match="processes"):
        with vidpipe.decoder_service(bad, device="cpu"):
            pass  # pragma: no cover - never entered
    assert issubclass(ConfigError, ValueError)


def test_is_public_and_lazy():
    assert "decoder_service" in vidpipe.__all__ and callable(vidpipe.decoder_service)
