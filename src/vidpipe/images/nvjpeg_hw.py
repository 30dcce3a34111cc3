"""nvJPEG's hardware batched decoder, called directly (ctypes), with several batches in flight.

torchvision's ``decode_jpeg(list, device="cuda")`` drives the same hardware JPEG engines
(A100/H100/H200 "NVJPG") but serialises every call behind one global mutex and one decoder
state, waits for each batch to finish before returning, and writes on a stream of its own. This
decoder keeps ``concurrency`` independent decode states (each with its own CUDA event), so
several threads can each have a batch in the engines while the host-side work of another (header
parsing, bitstream copies) runs; it decodes on the caller's current stream, into tensors
allocated on that stream, and returns without waiting: outputs are ready in that stream's order,
like any other CUDA op.

The library is the ``libnvjpeg`` torchvision already loaded (or ships), so nothing extra is
installed. Files the hardware path does not take (``nvjpegDecodeBatchedSupported``: progressive,
4:1:0/4:1:1 chroma, ...) go to torchvision's decoder; a batch the engines reject is retried one
file at a time, so one bad file costs only its own image.
"""

from __future__ import annotations

import ctypes
import glob
import logging
import os
import queue
import threading
from typing import TYPE_CHECKING

from vidpipe.errors import BackendUnavailableError, DecodeError

if TYPE_CHECKING:
    import torch

__all__ = ["NvjpegHwDecoder", "find_libnvjpeg"]

logger = logging.getLogger(__name__)

_BACKEND_HARDWARE = 3
_OUTPUT_RGB = 3
_STATUS = {
    1: "not initialized", 2: "invalid parameter", 3: "bad JPEG", 4: "JPEG not supported", 5: "allocator failure",
    6: "execution failed", 7: "architecture mismatch (no hardware JPEG decoder)", 8: "internal error",
    9: "implementation not supported", 10: "incomplete bitstream",
}  # fmt: skip


class _Image(ctypes.Structure):
    """``nvjpegImage_t``: up to 4 planes, pointer and pitch (``size_t``) each."""

    _fields_ = [("channel", ctypes.c_void_p * 4), ("pitch", ctypes.c_size_t * 4)]


def find_libnvjpeg() -> str | None:
    """Path of the libnvjpeg to use: the one already loaded in this process (torchvision's),
    else torchvision's bundled copy, else the system's; ``None`` when there is none."""
    try:
        import torchvision.io.image  # noqa: F401 - loads torchvision's image extension and its libnvjpeg
    except Exception:  # noqa: BLE001 - torchvision is optional here; other places may have it
        pass
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                if os.path.basename(path).startswith("libnvjpeg") and ".so" in path:
                    return path
    except OSError:
        pass
    try:
        import torchvision

        libs = os.path.join(os.path.dirname(os.path.dirname(torchvision.__file__)), "torchvision.libs")
        found = sorted(glob.glob(os.path.join(libs, "libnvjpeg*.so*")))
        if found:
            return found[0]
    except Exception:  # noqa: BLE001
        pass
    import ctypes.util

    return ctypes.util.find_library("nvjpeg")


def _bind(lib: ctypes.CDLL) -> None:
    p, i, u, sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_size_t
    sigs = {
        "nvjpegCreateEx": [i, p, p, u, ctypes.POINTER(p)],
        "nvjpegJpegStateCreate": [p, ctypes.POINTER(p)],
        "nvjpegJpegStreamCreate": [p, ctypes.POINTER(p)],
        "nvjpegJpegStreamParseHeader": [p, p, sz, p],
        "nvjpegJpegStreamGetFrameDimensions": [p, ctypes.POINTER(u), ctypes.POINTER(u)],
        "nvjpegDecodeBatchedSupported": [p, p, ctypes.POINTER(i)],
        "nvjpegDecodeBatchedInitialize": [p, p, i, i, i],
        "nvjpegDecodeBatched": [p, p, ctypes.POINTER(p), ctypes.POINTER(sz), ctypes.POINTER(_Image), p],
    }
    for name, args in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = ctypes.c_int


class _Slot:
    """One decode state and what its last batch still uses."""

    def __init__(self, lib, handle) -> None:
        self.state = ctypes.c_void_p()
        self.stream = ctypes.c_void_p()
        _check(lib.nvjpegJpegStateCreate(handle, ctypes.byref(self.state)), "nvjpegJpegStateCreate")
        _check(lib.nvjpegJpegStreamCreate(handle, ctypes.byref(self.stream)), "nvjpegJpegStreamCreate")
        self.done = None  # CUDA event after its last batch
        self.keep: tuple = ()  # bitstreams and descriptors its last batch reads


def _check(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"{what} failed: nvJPEG status {status} ({_STATUS.get(status, 'unknown')})")


class NvjpegHwDecoder:
    """Batched JPEG decoding on the GPU's hardware JPEG engines, ``concurrency`` batches at once.

    ``decode(encoded)`` takes 1-D uint8 CPU tensors (whole files) and returns, per file, a
    ``(3, h, w)`` uint8 RGB tensor on ``device`` (not EXIF-oriented) or the exception for that
    file. It may be called from several threads at once (up to ``concurrency`` run in parallel,
    more wait). Raises :class:`BackendUnavailableError` at construction when the library or the
    hardware decoder is missing.
    """

    name = "nvjpeg-hw"

    def __init__(self, device: torch.device, *, concurrency: int = 2) -> None:
        path = find_libnvjpeg()
        if path is None:
            raise BackendUnavailableError("libnvjpeg not found (it ships with CUDA builds of torchvision)")
        try:
            lib = ctypes.CDLL(path)
            _bind(lib)
        except (OSError, AttributeError) as exc:
            raise BackendUnavailableError(f"cannot use {path}: {exc}") from exc
        import torch

        self.device = device
        self.concurrency = max(1, int(concurrency))
        self._lib = lib
        self._handle = ctypes.c_void_p()
        self._slots: queue.Queue[_Slot] = queue.Queue()
        try:
            with torch.cuda.device(device):
                status = lib.nvjpegCreateEx(_BACKEND_HARDWARE, None, None, 0, ctypes.byref(self._handle))
                _check(status, "nvjpegCreateEx(hardware backend)")
                for _ in range(self.concurrency):
                    self._slots.put(_Slot(lib, self._handle))
        except RuntimeError as exc:  # no CUDA device, no hardware engines (status 7), ...
            raise BackendUnavailableError(f"nvJPEG hardware decoder unavailable on {device}: {exc}") from exc
        self._fallback = None
        self._fallback_lock = threading.Lock()
        logger.debug("nvJPEG hardware decoder from %s, %d states", path, self.concurrency)

    def decode(self, encoded: list[torch.Tensor]) -> list[torch.Tensor | Exception]:
        slot = self._slots.get()
        try:
            return self._decode(slot, encoded)
        finally:
            self._slots.put(slot)

    def _decode(self, slot: _Slot, encoded: list[torch.Tensor]) -> list[torch.Tensor | Exception]:
        import torch

        lib, handle = self._lib, self._handle
        if slot.done is not None:
            slot.done.synchronize()  # the state and the bitstreams of its previous batch are free
            slot.done, slot.keep = None, ()
        out: list = [None] * len(encoded)
        hw: list[int] = []
        width, height, ok = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_int()
        for i, e in enumerate(encoded):
            if e.dtype != torch.uint8 or e.ndim != 1 or e.device.type != "cpu" or not e.is_contiguous():
                out[i] = ValueError("expected a contiguous 1-D uint8 CPU tensor")
                continue
            if lib.nvjpegJpegStreamParseHeader(handle, e.data_ptr(), e.numel(), slot.stream) != 0:
                continue  # torchvision's decoder reports what is wrong with it
            ok.value = -1
            lib.nvjpegDecodeBatchedSupported(handle, slot.stream, ctypes.byref(ok))
            if ok.value != 0 or lib.nvjpegJpegStreamGetFrameDimensions(
                slot.stream, ctypes.byref(width), ctypes.byref(height)
            ):
                continue
            out[i] = torch.empty((3, height.value, width.value), dtype=torch.uint8, device=self.device)
            hw.append(i)
        stream = torch.cuda.current_stream(self.device)
        if hw:
            try:
                self._run(slot, [encoded[i] for i in hw], [out[i] for i in hw], stream)
            except RuntimeError as exc:
                if len(hw) == 1:
                    out[hw[0]] = DecodeError(f"nvJPEG hardware decoder: {exc}")
                else:
                    logger.debug("nvJPEG hardware batch of %d failed (%s); file by file", len(hw), exc)
                    for i in hw:
                        try:
                            self._run(slot, [encoded[i]], [out[i]], stream)
                        except RuntimeError as one:
                            out[i] = DecodeError(f"nvJPEG hardware decoder: {one}")
        rest = [i for i, o in enumerate(out) if o is None]
        if rest:
            for i, r in zip(rest, self._torchvision().decode([encoded[i] for i in rest])):
                out[i] = r
        return out

    def _run(self, slot: _Slot, encoded: list, outs: list, stream) -> None:
        """One ``nvjpegDecodeBatched`` of ``encoded`` into ``outs`` on ``stream``."""
        import torch

        if slot.done is not None:
            slot.done.synchronize()
        n = len(encoded)
        data = (ctypes.c_void_p * n)(*[e.data_ptr() for e in encoded])
        lengths = (ctypes.c_size_t * n)(*[e.numel() for e in encoded])
        images = (_Image * n)()
        for k, t in enumerate(outs):
            plane = t.shape[1] * t.shape[2]
            base = t.data_ptr()
            for c in range(3):
                images[k].channel[c] = base + c * plane
                images[k].pitch[c] = t.shape[2]
        lib, handle = self._lib, self._handle
        _check(lib.nvjpegDecodeBatchedInitialize(handle, slot.state, n, 1, _OUTPUT_RGB), "nvjpegDecodeBatchedInitialize")
        _check(lib.nvjpegDecodeBatched(handle, slot.state, data, lengths, images, stream.cuda_stream),
               "nvjpegDecodeBatched")  # fmt: skip
        slot.done = torch.cuda.Event()
        slot.done.record(stream)
        slot.keep = (encoded, data, lengths, images)

    def _torchvision(self):
        with self._fallback_lock:
            if self._fallback is None:
                from vidpipe.images.decode_gpu import NvjpegDecoder

                self._fallback = NvjpegDecoder(self.device)
            return self._fallback
