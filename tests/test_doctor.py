"""vidpipe doctor: every check answers, and every "no" comes with a reason."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest
import torch

from vidpipe.doctor import Check, format_report, run_checks


@pytest.fixture(scope="module")
def checks() -> list[Check]:
    return run_checks()


def by_name(checks: list[Check], name: str) -> Check:
    found = [c for c in checks if c.name == name]
    assert len(found) == 1, f"{name}: {found}"
    return found[0]


def test_every_check_has_a_state_and_every_no_a_reason(checks):
    assert len({c.name for c in checks}) == len(checks)  # names are unique
    for c in checks:
        assert c.ok in (True, False, None)
        assert c.detail.strip(), c
        assert json.loads(json.dumps(c.to_dict()))["name"] == c.name
    names = {c.name for c in checks}
    expected = {
        "Python", "vidpipe", "torch", "CUDA", "NVIDIA driver", "NVDEC PyNvVideoCodec",
        "NVDEC libnvcuvid.so.1", "NVENC", "nvJPEG", "PyAV", "decoder h264", "decoder hevc",
        "decoder vp9", "decoder av1", "decoder mjpeg", "encoder libx264", "encoder libx265",
        "encoder libsvtav1", "onnxruntime", "TensorRT", "DALI", "OpenCV", "nvidia-ml-py",
        "nvImageCodec", "Triton", "CuPy",
    }
    assert expected <= names, expected - names


def test_basics(checks):
    assert by_name(checks, "Python").ok is True
    assert by_name(checks, "torch").detail.startswith(torch.__version__)
    pyav = by_name(checks, "PyAV")
    assert pyav.ok is True and "FFmpeg" in pyav.detail
    assert by_name(checks, "decoder h264").ok is True  # every PyAV wheel has it
    assert by_name(checks, "encoder libx264").ok is True


def test_cuda_and_gpu_path_match_torch(checks):
    cuda, nvjpeg = by_name(checks, "CUDA"), by_name(checks, "nvJPEG")
    if torch.cuda.is_available():
        assert cuda.ok is True
        assert by_name(checks, "GPU 0").ok is True
    else:
        assert cuda.ok is False and len(cuda.detail) > 20
        assert nvjpeg.ok is False and nvjpeg.detail.startswith("needs CUDA")
        assert not [c for c in checks if c.name.startswith("GPU ")]


def test_pynvvideocodec_reported_with_reason(checks):
    check = by_name(checks, "NVDEC PyNvVideoCodec")
    if importlib.util.find_spec("PyNvVideoCodec") is None:
        assert check.ok is False and "not installed" in check.detail and "pip install" in check.detail


def test_import_that_raises_runtime_error_is_a_reason_not_a_crash(tmp_path, monkeypatch):
    """PyNvVideoCodec raises RuntimeError at import without the driver; an optional package may
    raise ImportError for a missing shared library. Both must become reasons."""
    pkg = tmp_path / "PyNvVideoCodec"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('raise RuntimeError("Failed to load libnvidia-encode.so.1")\n')
    trt = tmp_path / "tensorrt"
    trt.mkdir()
    (trt / "__init__.py").write_text('raise ImportError("libnvinfer.so.10: cannot open shared object file")\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("PyNvVideoCodec", "tensorrt"):
        monkeypatch.delitem(sys.modules, name, raising=False)

    checks = run_checks()
    nvdec = by_name(checks, "NVDEC PyNvVideoCodec")
    assert nvdec.ok is False
    assert "RuntimeError: Failed to load libnvidia-encode.so.1" in nvdec.detail
    trt_check = by_name(checks, "TensorRT")
    assert trt_check.ok is False and "libnvinfer.so.10" in trt_check.detail
    report = format_report(checks)
    assert "video decode:  PyAV on the CPU" in report


def test_format_report(checks):
    report = format_report(checks)
    lines = report.splitlines()
    marks = {"yes": True, "no": False, "--": None}
    for c in checks:
        line = next(x for x in lines if x[7:].startswith(c.name + " "))  # "  yes  NAME  detail"
        assert marks[line[2:5].strip()] is c.ok and line.endswith(c.detail)
    assert "What vidpipe will use here" in report
    assert any(x.strip().startswith("video decode:") for x in lines)


def test_tracking_verdict_follows_numba(tmp_path, monkeypatch):
    """The verdict names the tracker a run would use: compiled where numba imports, numpy (with
    the reason) where it does not (here: a numba that fails to import)."""
    checks = run_checks()
    assert "tracking:      compiled (numba)" in format_report(checks)
    pkg = tmp_path / "numba"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('raise ImportError("Numba needs NumPy 2.5 or less")\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "numba", raising=False)
    checks = run_checks()
    assert by_name(checks, "numba").ok is False
    assert "tracking:      numpy (no numba, see above)" in format_report(checks)
