"""nvJPEG's hardware batched decoder, called directly (ctypes), with batches overlapping.

torchvision's ``decode_jpeg(list, device="cuda")`` drives the same hardware JPEG engines
(A100/H100/H200 "NVJPG") but waits on the host for each batch to finish before returning (so the
engines idle while the caller prepares the next one), runs per-file header calls, and writes on a
stream of its own. This decoder sizes and routes files from the headers vidpipe already parsed,
keeps two decode states so one batch is in the engines while the next is prepared and
submitted, and decodes on the caller's current stream into tensors allocated there: the outputs
are ready in that stream's order, like any other CUDA op, with nothing waited for on the host.

Measured on one H200, 16 cores (torch 2.11, torchvision 0.26; 2,000 1080p quality-90 JPEGs,
batch 64):

- decode only, bytes in RAM (``vidpipe bench images``, same run): torchvision 4,419 img/s, this
  decoder 5,736 img/s (two states in turn, headers parsed beforehand);
- inside the loader (read + decode + letterbox, same run, one process): this decoder 4,241 img/s
  with 8 reader threads and 4,667 with 4, torchvision's 3,753 with 8 (an earlier version made
  a decoder per ``load()``, inside the timed pass, and was slower than torchvision's there:
  fixed by :func:`shared_decoder`). It is ``decoder="auto"``'s first choice;
- the engines are the limit: torchvision's decoder on a second thread beside this one (both on
  the engines) 5,496 img/s decode-only; nvJPEG's CUDA backend (``NVJPEG_BACKEND_GPU_HYBRID``,
  Huffman decoding on the SMs, same batched call) 1,227 img/s alone and 942 beside the engines;
  a third decode state 5,556. Each call waits about one batch's decode for its state;
- an earlier version with several states called from several threads at once: +1% decode-only
  over one state, and failed batches on the loader's threads, so calls are serialised.

The library is the ``libnvjpeg`` torchvision already loaded (or ships), so nothing extra is
installed. Files the engines do not take (progressive, 12-bit, 4:1:1, CMYK: see
:attr:`~vidpipe.images.formats.JpegInfo.hw_friendly`) go to torchvision's decoder, and so does a
whole batch the engines reject (torchvision then isolates any bad file).
"""

from __future__ import annotations

import ctypes
import glob
import logging
import os
import re
import threading
from typing import TYPE_CHECKING

from vidpipe.errors import BackendUnavailableError

if TYPE_CHECKING:
    import torch

__all__ = ["NvjpegHwDecoder", "find_libnvjpeg", "is_libnvjpeg", "shared_decoder"]

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


def is_libnvjpeg(name: str) -> bool:
    """Whether a file name is nvJPEG itself (``libnvjpeg.so.13``, torchvision's
    ``libnvjpeg-<hash>.so.12``), not a library named after it (nvImageCodec's
    ``libnvjpeg2k_ext.so.0.9.0``, loaded beside it where DALI or nvImageCodec is imported)."""
    return re.fullmatch(r"libnvjpeg(-[0-9a-f]+)?\.so(\.[0-9]+)*", name) is not None


def find_libnvjpeg() -> str | None:
    """Path of the libnvjpeg to use: the one already loaded in this process (torchvision's),
    else torchvision's bundled copy, else the system's; ``None`` when there is none."""
    from vidpipe._tvops import load, package_dir

    try:
        load("image")  # torchvision's image extension, and with it its libnvjpeg (no package import)
    except Exception:  # noqa: BLE001 - torchvision is optional here; other places may have it
        pass
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                if is_libnvjpeg(os.path.basename(path)):
                    return path
    except OSError:
        pass
    folder = package_dir()
    if folder is not None:
        libs = os.path.join(os.path.dirname(folder), "torchvision.libs")
        found = sorted(f for f in glob.glob(os.path.join(libs, "libnvjpeg*.so*")) if is_libnvjpeg(os.path.basename(f)))
        if found:
            return found[0]
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


_SHARED: dict[str, NvjpegHwDecoder] = {}
_SHARED_LOCK = threading.Lock()


def shared_decoder(device: torch.device) -> NvjpegHwDecoder:
    """The process-wide decoder for ``device``, created on first use (like torchvision's).

    A hardware-backend nvJPEG handle and its decode states are expensive to create (their
    pinned and device buffers grow to the batches seen, and creating one costs a large part of
    a second) and are never released (nvJPEG's own buffers; torchvision leaks its one too), so
    every loader on a device shares one; its calls are serialised anyway.
    """
    key = str(device)
    with _SHARED_LOCK:
        dec = _SHARED.get(key)
        if dec is None:
            dec = _SHARED[key] = NvjpegHwDecoder(device)
        return dec


def _check(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"{what} failed: nvJPEG status {status} ({_STATUS.get(status, 'unknown')})")


class NvjpegHwDecoder:
    """Batched JPEG decoding on the GPU's hardware JPEG engines, with batches overlapping.

    ``decode(encoded, infos)`` takes 1-D uint8 CPU tensors (whole files) and, optionally, their
    parsed headers (:class:`~vidpipe.images.formats.JpegInfo`: then no per-file library call is
    needed to size the outputs and route the files), and returns per file a ``(3, h, w)`` uint8
    RGB tensor on ``device`` (not EXIF-oriented) or the exception for that file. The outputs
    are allocated on the caller's current stream and decoded on it: ready in its order, nothing
    waited for on the host. Calls are serialised (``concurrency`` is 1), but each call uses the
    next of ``states`` decode states and only waits for *that* state's previous batch, so the
    engines already hold the previous batch while a call prepares and submits the next.
    Raises :class:`BackendUnavailableError` at construction when the library or the hardware
    decoder is missing.
    """

    name = "nvjpeg-hw"
    concurrency = 1

    def __init__(self, device: torch.device, *, states: int = 2) -> None:
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
        self._lib = lib
        self._handle = ctypes.c_void_p()
        self._slots: list[_Slot] = []
        try:
            with torch.cuda.device(device):
                status = lib.nvjpegCreateEx(_BACKEND_HARDWARE, None, None, 0, ctypes.byref(self._handle))
                _check(status, "nvjpegCreateEx(hardware backend)")
                self._slots = [_Slot(lib, self._handle) for _ in range(max(1, int(states)))]
        except RuntimeError as exc:  # no CUDA device, no hardware engines (status 7), ...
            raise BackendUnavailableError(f"nvJPEG hardware decoder unavailable on {device}: {exc}") from exc
        self._next = 0
        self._lock = threading.Lock()
        self._fallback = None
        self._warned = False
        logger.debug("nvJPEG hardware decoder from %s, %d states", path, len(self._slots))

    def decode(self, encoded: list[torch.Tensor], infos: list | None = None) -> list[torch.Tensor | Exception]:
        with self._lock:
            return self._decode(encoded, infos)

    def _decode(self, encoded: list[torch.Tensor], infos: list | None) -> list[torch.Tensor | Exception]:
        import torch

        slot = self._slots[self._next]
        self._next = (self._next + 1) % len(self._slots)
        out: list = [None] * len(encoded)
        hw: list[int] = []
        for i, e in enumerate(encoded):
            if e.dtype != torch.uint8 or e.ndim != 1 or e.device.type != "cpu" or not e.is_contiguous():
                out[i] = ValueError("expected a contiguous 1-D uint8 CPU tensor")
                continue
            size = self._size(slot, e, None if infos is None else infos[i])
            if size is not None:  # else torchvision's decoder takes it (and reports what is wrong)
                out[i] = torch.empty((3, *size), dtype=torch.uint8, device=self.device)
                hw.append(i)
        if hw:
            try:
                self._run(slot, [encoded[i] for i in hw], [out[i] for i in hw], torch.cuda.current_stream(self.device))
            except RuntimeError as exc:
                if not self._warned:
                    self._warned = True
                    logger.warning("nvJPEG hardware decoder failed on a batch of %d (%s); torchvision's decoder "
                                   "takes such batches (this warning is shown once)", len(hw), exc)  # fmt: skip
                for i in hw:
                    out[i] = None
        rest = [i for i, o in enumerate(out) if o is None]
        if rest:
            for i, r in zip(rest, self._torchvision().decode([encoded[i] for i in rest])):
                out[i] = r
        return out

    def _size(self, slot: _Slot, e: torch.Tensor, info) -> tuple[int, int] | None:
        """``(height, width)`` of a file the engines take, else ``None``."""
        if info is not None:
            return (info.height, info.width) if info.hw_friendly else None
        lib, handle = self._lib, self._handle
        if lib.nvjpegJpegStreamParseHeader(handle, e.data_ptr(), e.numel(), slot.stream) != 0:
            return None
        ok, width, height = ctypes.c_int(-1), ctypes.c_uint(), ctypes.c_uint()
        lib.nvjpegDecodeBatchedSupported(handle, slot.stream, ctypes.byref(ok))
        if ok.value != 0 or lib.nvjpegJpegStreamGetFrameDimensions(slot.stream, ctypes.byref(width), ctypes.byref(height)):
            return None
        return (height.value, width.value)

    def _run(self, slot: _Slot, encoded: list, outs: list, stream) -> None:
        """One ``nvjpegDecodeBatched`` of ``encoded`` into ``outs`` on ``stream`` with ``slot``'s state."""
        import torch

        n = len(encoded)
        data = (ctypes.c_void_p * n)(*[e.data_ptr() for e in encoded])
        lengths = (ctypes.c_size_t * n)(*[e.numel() for e in encoded])
        images = (_Image * n)()
        for k, t in enumerate(outs):
            h, w = t.shape[1], t.shape[2]
            base = t.data_ptr()
            images[k].channel[0], images[k].channel[1], images[k].channel[2] = base, base + h * w, base + 2 * h * w
            images[k].pitch[0] = images[k].pitch[1] = images[k].pitch[2] = w
        if slot.done is not None:
            slot.done.synchronize()  # this state's previous batch is done: its buffers are free
            slot.done, slot.keep = None, ()
        lib, handle = self._lib, self._handle
        _check(lib.nvjpegDecodeBatchedInitialize(handle, slot.state, n, 1, _OUTPUT_RGB), "nvjpegDecodeBatchedInitialize")
        _check(lib.nvjpegDecodeBatched(handle, slot.state, data, lengths, images, stream.cuda_stream),
               "nvjpegDecodeBatched")  # fmt: skip
        slot.done = torch.cuda.Event()
        slot.done.record(stream)
        slot.keep = (encoded, data, lengths, images)

    def _torchvision(self):
        if self._fallback is None:
            from vidpipe.images.decode_gpu import NvjpegDecoder

            self._fallback = NvjpegDecoder(self.device)
        return self._fallback
