"""NVENC through PyNvVideoCodec: YUV 4:2:0 frames on the GPU to H.264/HEVC, without a copy to
the host (``VideoWriter(codec="h264_nvenc" | "hevc_nvenc")``).

**Not verified on NVENC hardware**: the GPUs this project is measured on (H100, H200) have no
NVENC; on them PyNvVideoCodec's ``CreateEncoder`` fails with ``nvEncOpenEncodeSessionEx returned
error 2`` and :func:`nvenc_unavailable` says so (seen on an H200). What runs everywhere is the
rest of the path: the I420 -> NV12 interleave (checked against swscale), the split of the
encoder's Annex-B output into pictures and their muxing with their times
(:mod:`vidpipe.encode.bitstream`; checked with libx264's Annex-B output).

The encoder is created with B-frames off (each picture keeps its ``pts``, as the writer's
libx264 streams do), a keyframe every ``gop`` frames, and PyNvVideoCodec's defaults otherwise
(``preset="P4"``); ``options`` are passed to ``CreateEncoder`` as they are (``preset``,
``bitrate``, ``rc``, ``tuning_info``, ...).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from vidpipe.encode.bitstream import Codec, access_units
from vidpipe.errors import BackendUnavailableError

if TYPE_CHECKING:
    import torch

__all__ = ["NVENC_CODECS", "NvencEncoder", "nvenc_unavailable", "i420_to_nv12"]

logger = logging.getLogger(__name__)

#: the writer's codec names for NVENC, and the bitstream each makes
NVENC_CODECS: dict[str, Codec] = {"h264_nvenc": "h264", "hevc_nvenc": "hevc"}


def _pynvc() -> Any:
    try:
        import PyNvVideoCodec
    except Exception as exc:  # noqa: BLE001 - missing, or its libraries fail to load
        raise BackendUnavailableError(f"NVENC encoding needs the Python package PyNvVideoCodec, which cannot be "
                                      f"imported here ({type(exc).__name__}: {exc}); pip install PyNvVideoCodec, "
                                      "or use codec='libx264'") from None
    return PyNvVideoCodec


#: the probe of :func:`nvenc_unavailable`, run in a child process: on an H200, a failed
#: ``CreateEncoder`` left the calling process's CUDA context unusable (the next PyTorch CUDA call
#: aborted the process with ``c10::AcceleratorError``)
_PROBE = """import sys
try:
    import PyNvVideoCodec as nvc
    nvc.CreateEncoder(256, 256, "NV12", False, codec="h264", gpu_id=sys.argv[1])
except Exception as exc:
    print(" ".join(str(exc).split())[:300], file=sys.stderr)
    sys.exit(3)
"""


def nvenc_unavailable(device: "torch.device | str" = "cuda", *, timeout_s: float = 60.0) -> str | None:
    """``None`` when an H.264 NVENC session opens on ``device``, else why not (no CUDA, no
    PyNvVideoCodec, or a GPU without NVENC: the H100, H200 and A100 have none). The session is
    tried in a child process (see :data:`_PROBE`), about a second, once per GPU and process."""
    import torch

    dev = torch.device(device)
    if dev.type != "cuda" or not torch.cuda.is_available():
        return "NVENC needs a CUDA device"
    try:
        _pynvc()
    except BackendUnavailableError as exc:
        return str(exc)
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    return _probe(index, torch.cuda.get_device_name(index), timeout_s)


@functools.lru_cache(maxsize=None)
def _probe(index: int, name: str, timeout_s: float) -> str | None:
    """The child's answer for GPU ``index``, asked once per process (a GPU's encoder does not come
    and go; each stream's writer would otherwise wait a second for it)."""
    import subprocess
    import sys

    from vidpipe.lifetime.keeper import python_env

    try:
        probe = subprocess.run([sys.executable, "-c", _PROBE, str(index)], capture_output=True, text=True,
                               timeout=timeout_s, env=python_env())  # (PyNvVideoCodec where this process finds it)
    except subprocess.TimeoutExpired:
        return f"{name}: opening an NVENC session did not finish within {timeout_s:g} s"
    if probe.returncode == 0:
        return None
    lines = probe.stderr.strip().splitlines()
    return f"{name} cannot open an NVENC session ({lines[-1] if lines else f'exit code {probe.returncode}'})"


def i420_to_nv12(planes: "torch.Tensor", height: int, width: int) -> "torch.Tensor":
    """``(height * 3 // 2, width)`` uint8 I420 (Y, then U, then V) -> the same in NV12 (Y, then
    U and V interleaved), on the planes' device and current stream."""
    import torch

    y = planes[:height]
    q = height // 4
    u = planes[height : height + q].reshape(height // 2, width // 2)
    v = planes[height + q :].reshape(height // 2, width // 2)
    return torch.cat((y, torch.stack((u, v), dim=-1).reshape(height // 2, width)))


class NvencEncoder:
    """One NVENC session: I420 planes on the GPU in, one Annex-B access unit per picture out.

    Args:
        width, height: the (even) frame size.
        codec: ``"h264_nvenc"`` or ``"hevc_nvenc"``.
        fps: the nominal rate (rate control's budget).
        gop: frames from one keyframe to the next.
        options: passed to PyNvVideoCodec's ``CreateEncoder`` over the defaults.

    Raises:
        BackendUnavailableError: no PyNvVideoCodec, or NVENC cannot encode here (see
            :func:`nvenc_unavailable`).
    """

    def __init__(self, *, width: int, height: int, codec: str, fps: Fraction, gop: int,
                 options: Mapping[str, str] | None = None) -> None:  # fmt: skip
        import torch

        why = nvenc_unavailable("cuda")  # (never a failing CreateEncoder in this process)
        if why is not None:
            raise BackendUnavailableError(f"codec={codec!r}: {why}; H100, H200 and A100 GPUs have no NVENC: "
                                          "use codec='libx264'")
        nvc = _pynvc()
        self.codec: Codec = NVENC_CODECS[codec]
        self.width, self.height = width, height
        #: the CUDA device it encodes on (the current one); frames are moved there
        self.device = device = torch.device("cuda", torch.cuda.current_device())
        self._stream = torch.cuda.Stream(device)
        settings: dict[str, Any] = {"codec": self.codec, "fps": str(round(float(fps))), "gop": str(gop),
                                    "idrperiod": str(gop), "bf": "0", "gpu_id": str(device.index or 0),
                                    "cudastream": self._stream.cuda_stream}
        settings.update(options or {})
        try:
            with torch.cuda.device(device):
                self._enc = nvc.CreateEncoder(width, height, "NV12", False, **settings)
                self.sequence = bytes(self._enc.GetSequenceParams())
        except Exception as exc:  # noqa: BLE001 - PyNvVCException
            name = torch.cuda.get_device_name(device)
            raise BackendUnavailableError(
                f"codec={codec!r}: {name} cannot open an NVENC session for {width}x{height} "
                f"({' '.join(str(exc).split())[:200]}); H100, H200 and A100 GPUs have no NVENC: "
                "use codec='libx264'") from None
        logger.info("NVENC %s session, %dx%d, %s", self.codec, width, height,
                    ", ".join(f"{k}={v}" for k, v in settings.items() if k != "cudastream"))

    def encode(self, planes: "torch.Tensor", ready: Any = None) -> list[bytes]:
        """Encode one frame: ``(height * 3 // 2, width)`` uint8 I420 planes on the device, usable
        once the CUDA event ``ready`` has completed. Returns the pictures the encoder finished
        (it may hold a few frames back; :meth:`flush` returns the rest), oldest first. The
        planes may be reused when this returns."""
        import torch

        with torch.cuda.stream(self._stream):
            if ready is not None:
                self._stream.wait_event(ready)
            nv12 = i420_to_nv12(planes, self.height, self.width)
            out = self._enc.Encode(nv12)
            self._stream.synchronize()  # NVENC has copied the input before it is freed
        return self._pictures(out)

    def flush(self) -> list[bytes]:
        """The pictures still held by the encoder; the session ends."""
        return self._pictures(self._enc.EndEncode())

    def _pictures(self, out: Any) -> list[bytes]:
        """PyNvVideoCodec's output (one buffer, or a list of buffers or of dicts with ``"data"``,
        depending on its version) as one access unit per picture."""
        chunks = out if isinstance(out, list) else [out]
        data = b"".join(bytes(c["data"] if isinstance(c, dict) else c) for c in chunks if c is not None)
        return access_units(data, self.codec) if data else []
