"""Shared test setup.

- ``tests/`` is put on ``sys.path`` so tests import the media generator as ``from media import ...``.
- Tests marked ``gpu`` are skipped when PyTorch sees no CUDA device; tests marked ``nvdec`` are
  skipped when PyNvVideoCodec cannot be imported (it raises ``RuntimeError``, not ``ImportError``,
  without the NVIDIA driver), with the reason in the skip message.
- ``device`` fixture: parametrized ``"cpu"`` and ``"cuda"`` (the latter marked ``gpu``);
  :func:`device_params` builds the same list for ``pytest.mark.parametrize``.
- ``make_clip`` fixture: :func:`media.make_video` with a per-session cache, so tests asking for the
  same clip share one encode.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent
DATA_DIR = TESTS_DIR / "data"
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

pytest_plugins = ("live.fixtures",)  # real streaming servers for live tests (tests/live/fixtures.py)


@functools.lru_cache(maxsize=1)
def cuda_skip_reason() -> str | None:
    """``None`` when PyTorch sees a CUDA device, else why not."""
    try:
        import torch
    except Exception as exc:  # noqa: BLE001
        return f"PyTorch cannot be imported ({exc})"
    if not torch.cuda.is_available():
        return f"no CUDA device visible to PyTorch {torch.__version__}"
    return None


@functools.lru_cache(maxsize=1)
def nvdec_skip_reason() -> str | None:
    """``None`` when PyNvVideoCodec imports, else why not (any exception counts)."""
    try:
        import PyNvVideoCodec  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - RuntimeError without the driver
        return f"PyNvVideoCodec cannot be imported ({type(exc).__name__}: {exc})"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("gpu") is not None and (reason := cuda_skip_reason()):
            item.add_marker(pytest.mark.skip(reason=f"gpu: {reason}"))
        if item.get_closest_marker("nvdec") is not None and (reason := nvdec_skip_reason()):
            item.add_marker(pytest.mark.skip(reason=f"nvdec: {reason}"))
    # runs that end in real CUDA out-of-memory errors go last: after several of them a process's
    # CUDA-graph captures and cuDNN convolutions failed (docs/gpu-memory.md, "Known problem")
    items.sort(key=lambda item: item.path.name == "test_gpu_memory_gpu.py")


def device_params(*, cpu: bool = True, cuda: bool = True) -> list:
    """``["cpu", pytest.param("cuda", marks=gpu)]`` for ``@pytest.mark.parametrize("device", ...)``."""
    out: list = []
    if cpu:
        out.append("cpu")
    if cuda:
        out.append(pytest.param("cuda", marks=pytest.mark.gpu, id="cuda"))
    return out


@pytest.fixture(params=device_params())
def device(request: pytest.FixtureRequest) -> str:
    """The device under test: ``"cpu"``, and ``"cuda"`` where a GPU is visible."""
    return request.param


@pytest.fixture(scope="session")
def media_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session-wide folder for generated media."""
    return tmp_path_factory.mktemp("media")


@pytest.fixture(scope="session")
def make_clip(media_dir: Path):
    """``make_clip(suffix=".mp4", **make_video_kwargs) -> media.Clip``, cached per session.

    Do not modify the returned file in place; copy it first (``truncate(..., dst=...)``).
    """
    from media import make_video

    cache: dict[str, object] = {}

    def _make(suffix: str = ".mp4", **kwargs):
        key = json.dumps([suffix, sorted((k, str(v)) for k, v in kwargs.items())])
        if key not in cache:
            path = media_dir / f"clip{len(cache):03d}{suffix}"
            cache[key] = make_video(path, **kwargs)
        return cache[key]

    return _make


@pytest.fixture(scope="session")
def bikes_path() -> Path:
    """The bundled sample bikes.mp4: 250 frames, 25 fps, 640x272 H.264 (vidpipe.data)."""
    from vidpipe.data import sample_video

    return sample_video()
