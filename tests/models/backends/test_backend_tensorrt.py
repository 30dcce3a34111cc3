"""TensorRT: only what can be checked without the package (it cannot be installed here)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from vidpipe.errors import BackendUnavailableError
from vidpipe.models.backends import MODEL_LOADERS, backend_status
from vidpipe.models.backends.tensorrt import split_ultralytics_header

HAVE_TRT = importlib.util.find_spec("tensorrt") is not None


@pytest.mark.skipif(HAVE_TRT, reason="tensorrt is installed here")
@pytest.mark.parametrize("suffix", [".engine", ".plan"])
def test_engine_without_tensorrt_says_what_to_install(tmp_path, suffix):
    path = tmp_path / f"model{suffix}"
    path.write_bytes(b"\0" * 64)
    with pytest.raises(BackendUnavailableError, match="pip install tensorrt"):
        MODEL_LOADERS[suffix](path, device="cpu")


def test_doctor_status_mentions_tensorrt_unverified():
    status = {s.name: s for s in backend_status()}
    assert status["tensorrt"].available == HAVE_TRT
    assert "unverified" in status["tensorrt"].detail
    assert "onnxruntime" in status and "cuda-graphs" in status


def test_ultralytics_engine_header():
    meta = {"names": {"0": "person"}, "imgsz": [640, 640], "stride": 32}
    text = json.dumps(meta).encode()
    blob = b"ENGINEBYTES"
    got, rest = split_ultralytics_header(len(text).to_bytes(4, "little") + text + blob)
    assert got == meta and rest == blob
    assert split_ultralytics_header(blob * 3) == ({}, blob * 3)  # a plain engine stays as is


def test_importing_backends_loads_no_optional_package():
    code = (
        "import sys, vidpipe.models.backends, vidpipe.models.heads.detect, vidpipe.models.names; "
        "print(sorted(m for m in ('onnxruntime', 'tensorrt', 'onnx') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
