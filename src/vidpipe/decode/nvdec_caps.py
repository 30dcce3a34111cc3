"""Can NVDEC decode this stream here? Availability and per-codec hardware limits, cached.

Everything a wrong guess would cost is checked *before* a decoder is created: PyNvVideoCodec
ends the whole process (``exit(1)``) on a CUDA driver error, and raises for an unsupported
sequence only once frames flow. :func:`nvdec_unavailable` says why NVDEC cannot run at all
(no CUDA, no PyNvVideoCodec, no driver library); :func:`stream_unsupported` says why one stream
cannot, from its :class:`~vidpipe.decode.base.StreamInfo` and the GPU's decoder capabilities
(``GetDecoderCaps``, queried once per codec, chroma format and bit depth).

:func:`stream_unsupported` takes the capability lookup as an argument, so the decision can be
made (and tested) with any table of :class:`DecoderCaps`.

Policy (vidpipe's NVDEC path outputs NV12 / P016 4:2:0 only):

- codecs: H.264, HEVC, AV1, VP9, VP8, MPEG-1/2, MPEG-4 Part 2, VC-1 when the GPU lists them;
  MJPEG and everything else go to PyAV (NVDEC's JPEG engine is not a video decoder here);
- chroma 4:2:0, 8 or 10 bit (4:4:4 and 4:2:2 surfaces would need another pixel format);
- even width and height (an odd-sized NV12 frame has no well-defined chroma rows);
- size within the GPU's ``width/height_min..max`` and macroblock count.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vidpipe._capture_turns import driver_work
from vidpipe.decode.base import StreamInfo

if TYPE_CHECKING:
    import torch

__all__ = [
    "DecoderCaps",
    "CapsLookup",
    "NVDEC_CODECS",
    "canonical_codec",
    "nvdec_module",
    "nvdec_unavailable",
    "query_caps",
    "stream_unsupported",
    "num_engines",
]

logger = logging.getLogger(__name__)

#: canonical FFmpeg codec name -> ``PyNvVideoCodec.cudaVideoCodec`` member
NVDEC_CODECS: dict[str, str] = {
    "h264": "H264",
    "hevc": "HEVC",
    "av1": "AV1",
    "vp9": "VP9",
    "vp8": "VP8",
    "mpeg1video": "MPEG1",
    "mpeg2video": "MPEG2",
    "mpeg4": "MPEG4",
    "vc1": "VC1",
    "wmv3": "VC1",
}

# PyAV reports the *decoder* name (``libdav1d`` for AV1 in the PyAV wheels); map it back.
_ALIASES = {
    "libdav1d": "av1",
    "libaom-av1": "av1",
    "av1_cuvid": "av1",
    "h264_cuvid": "h264",
    "hevc_cuvid": "hevc",
    "libvpx-vp9": "vp9",
    "libvpx": "vp8",
    "mpeg2_cuvid": "mpeg2video",
}

_INSTALL = "pip install PyNvVideoCodec (needs an NVIDIA driver with NVDEC)"


def canonical_codec(name: str) -> str:
    """The FFmpeg codec name of a PyAV decoder name (``libdav1d`` -> ``av1``)."""
    return _ALIASES.get(name, name)


@dataclass(frozen=True, slots=True)
class DecoderCaps:
    """What the GPU's NVDEC can do for one codec / chroma format / bit depth.

    From ``PyNvVideoCodec.GetDecoderCaps`` (CUVIDDECODECAPS). ``mb_max`` is the largest frame in
    16x16 macroblocks; ``engines`` the number of NVDEC engines on the GPU.
    """

    codec: str
    chroma: str
    bit_depth: int
    supported: bool
    engines: int = 0
    width_min: int = 0
    height_min: int = 0
    width_max: int = 0
    height_max: int = 0
    mb_max: int = 0


#: ``(codec, chroma, bit_depth) -> DecoderCaps``; ``codec`` canonical, ``chroma`` "420"/"444"/...
CapsLookup = Callable[[str, str, int], DecoderCaps]


@functools.lru_cache(maxsize=1)
def _import() -> tuple[Any, str | None]:
    from vidpipe._lazy import optional_import

    try:
        return optional_import("PyNvVideoCodec", purpose="NVDEC decoding", install=_INSTALL), None
    except Exception as exc:  # noqa: BLE001 - BackendUnavailableError with the cause in it
        return None, str(exc)


def nvdec_module() -> Any:
    """The imported ``PyNvVideoCodec`` module; raises
    :class:`~vidpipe.errors.BackendUnavailableError` (with the reason) when it cannot load."""
    from vidpipe.errors import BackendUnavailableError

    module, reason = _import()
    if module is None:
        raise BackendUnavailableError(reason or "PyNvVideoCodec cannot be imported")
    return module


_caps_lock = threading.Lock()
_caps_cache: dict[tuple[int, str, str, int], DecoderCaps] = {}


def query_caps(gpu: int, codec: str, chroma: str, bit_depth: int) -> DecoderCaps:
    """``GetDecoderCaps`` for one combination on GPU ``gpu``, cached for the process (each call
    costs about 0.2 s). Raises :class:`~vidpipe.errors.BackendUnavailableError` without
    PyNvVideoCodec and ``RuntimeError`` when the driver's NVDEC library is missing."""
    key = (gpu, codec, chroma, bit_depth)
    with _caps_lock:
        hit = _caps_cache.get(key)
        if hit is not None:
            return hit
        nvc = nvdec_module()
        member = NVDEC_CODECS.get(codec)
        if member is None or chroma not in nvc.cudaVideoChromaFormat.__members__:
            caps = DecoderCaps(codec, chroma, bit_depth, False)
        else:
            with driver_work():  # not during a CUDA graph's capture, which it would invalidate
                raw = nvc.GetDecoderCaps(
                    gpuid=gpu,
                    codec=getattr(nvc.cudaVideoCodec, member),
                    chromaformat=nvc.cudaVideoChromaFormat.__members__[chroma],
                    bitdepth=bit_depth,
                )
            caps = DecoderCaps(
                codec,
                chroma,
                bit_depth,
                bool(raw.get("supported", 0)),
                engines=int(raw.get("num_decoder_engines", 0)),
                width_min=int(raw.get("width_min", 0)),
                height_min=int(raw.get("height_min", 0)),
                width_max=int(raw.get("width_max", 0)),
                height_max=int(raw.get("height_max", 0)),
                mb_max=int(raw.get("mb_num_max", 0)),
            )
        _caps_cache[key] = caps
    logger.debug("NVDEC caps gpu %d: %s", gpu, caps)
    return caps


_avail_lock = threading.Lock()
_avail_cache: dict[int, str | None] = {}


def nvdec_unavailable(device: "torch.device") -> str | None:
    """``None`` when NVDEC can run on ``device``, else a sentence saying why not (cached).

    Checks: a CUDA device, PyTorch sees it, PyNvVideoCodec imports (it needs the NVIDIA driver's
    libraries), and the driver's NVDEC library answers a capability query.
    """
    if device.type != "cuda":
        return f"NVDEC decodes on the GPU; the device is {device}"
    import torch

    if not torch.cuda.is_available():
        return "PyTorch sees no CUDA GPU"
    gpu = device.index if device.index is not None else torch.cuda.current_device()
    with _avail_lock:
        if gpu in _avail_cache:
            return _avail_cache[gpu]
    module, reason = _import()
    if module is None:
        why: str | None = reason
    else:
        try:
            query_caps(gpu, "h264", "420", 8)
            why = None
        except Exception as exc:  # noqa: BLE001 - e.g. "Could not dynamically load libnvcuvid.so.1"
            why = f"the NVIDIA video decoder library does not answer ({type(exc).__name__}: {exc})"
    with _avail_lock:
        _avail_cache[gpu] = why
    if why:
        logger.info("NVDEC unavailable on %s: %s", device, why)
    return why


def num_engines(gpu: int = 0, codec: str = "h264") -> int:
    """NVDEC engines on GPU ``gpu`` (from the caps of ``codec`` 8-bit 4:2:0; 1 if unknown)."""
    try:
        return max(1, query_caps(gpu, codec, "420", 8).engines)
    except Exception:  # noqa: BLE001
        return 1


def stream_unsupported(info: StreamInfo, caps: CapsLookup) -> str | None:
    """``None`` when vidpipe's NVDEC path can decode ``info``'s stream, else the reason.

    ``caps(codec, chroma, bit_depth)`` gives the GPU's limits (:func:`query_caps` bound to a
    GPU, or any table).
    """
    codec = canonical_codec(info.codec)
    what = f"{codec} {info.width}x{info.height} {info.pix_fmt or '?'}"
    if codec not in NVDEC_CODECS:
        if codec == "mjpeg":
            return f"{what}: MJPEG is decoded on the CPU (NVDEC's video path does not take JPEG)"
        return f"{what}: NVDEC does not decode {codec}"
    if info.chroma != "420":
        chroma = "unknown" if info.chroma is None else ":".join(info.chroma)
        return f"{what}: chroma {chroma} is not supported by vidpipe's NVDEC path (4:2:0 only)"
    if info.bit_depth not in (8, 10):
        return f"{what}: {info.bit_depth}-bit video is not supported by vidpipe's NVDEC path (8 or 10 bit)"
    if info.width % 2 or info.height % 2:
        return f"{what}: odd frame size {info.width}x{info.height} (NV12 needs even width and height)"
    c = caps(codec, "420", info.bit_depth)
    if not c.supported:
        profile = f" ({info.profile})" if info.profile else ""
        return f"{what}{profile}: this GPU's NVDEC does not decode {codec} {info.bit_depth}-bit 4:2:0"
    if not (c.width_min <= info.width <= c.width_max and c.height_min <= info.height <= c.height_max):
        return (
            f"{what}: frame size outside this GPU's NVDEC limits for {codec} "
            f"({c.width_min}x{c.height_min} to {c.width_max}x{c.height_max})"
        )
    mbs = ((info.width + 15) // 16) * ((info.height + 15) // 16)
    if c.mb_max and mbs > c.mb_max:
        return f"{what}: {mbs} macroblocks exceed this GPU's NVDEC limit of {c.mb_max} for {codec}"
    return None
