"""Decoder backends by name, and the ``auto`` choice among them for one stream on one device.

A backend is a factory plus a ``check(info, device) -> str | None`` that returns ``None`` when the
backend can decode that stream on that device, else a sentence saying why not. Built-in backends
are listed by module path and imported on first use, so ``import vidpipe`` imports none of them;
a built-in module defines ``check`` and ``create(info, *, device, options) -> Decoder`` (and
may take ``index``, a scan of the stream already made: :func:`open_decoder`).
Adding a built-in backend is one line in :data:`_BUILTIN`.

``auto`` tries :data:`AUTO_ORDER` (hardware first, PyAV last) and takes the first whose check
passes; DALI runs only when asked for by name.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vidpipe._validate import check_choice
from vidpipe.decode.base import DecodeOptions, Decoder, StreamInfo
from vidpipe.errors import BackendUnavailableError, ConfigError, GpuFallbackError, UnsupportedError

if TYPE_CHECKING:
    import torch

    from vidpipe.decode.segments import StreamIndex

__all__ = [
    "BackendChoice",
    "register_backend",
    "registered_backends",
    "select_backend",
    "open_decoder",
    "AUTO_ORDER",
]

logger = logging.getLogger(__name__)

CheckFn = Callable[[StreamInfo, "torch.device"], "str | None"]
FactoryFn = Callable[..., Decoder]

#: built-in backends: name -> (module defining ``check`` and ``create``, decodes on the GPU)
_BUILTIN: dict[str, tuple[str, bool]] = {
    "nvdec": ("vidpipe.decode.nvdec", True),
    "pyav": ("vidpipe.decode.pyav", False),
    "dali": ("vidpipe.decode.dali", True),
}
#: what ``decoder="auto"`` tries, in order
AUTO_ORDER: tuple[str, ...] = ("nvdec", "pyav")


@dataclass(frozen=True)
class _Backend:
    name: str
    factory: FactoryFn
    check: CheckFn
    gpu: bool

    @property
    def plans_from_scan(self) -> bool:
        """Whether ``factory`` takes ``index``: a scan of the stream already made
        (:func:`~vidpipe.decode.segments.scan_stream`), which a segment decoder plans from."""
        try:
            return "index" in inspect.signature(self.factory).parameters
        except (TypeError, ValueError):  # a callable without a signature
            return False


@dataclass(frozen=True)
class BackendChoice:
    """The backend that will decode a stream, and why.

    Attributes:
        name: the chosen backend ("nvdec", "pyav", ...).
        reason: why it was chosen, for logs and output metadata.
        rejected: ``(name, reason)`` of every backend tried before it.
    """

    name: str
    reason: str
    rejected: tuple[tuple[str, str], ...] = ()

    @property
    def fell_back(self) -> bool:
        return bool(self.rejected)


_lock = threading.Lock()
_registered: dict[str, _Backend] = {}
_auto_extra: list[str] = []


def register_backend(name: str, factory: FactoryFn, check: CheckFn, *, gpu: bool, auto: bool = False) -> None:
    """Register (or replace) a backend.

    Args:
        name: the ``decoder=`` value that selects it.
        factory: ``factory(info, *, device, options) -> Decoder``.
        check: ``check(info, device) -> None`` if it can decode, else a human reason why not.
        gpu: whether it decodes on the GPU (matters for ``strict_gpu``).
        auto: also try it for ``decoder="auto"`` (before the CPU fallback).
    """
    with _lock:
        _registered[name] = _Backend(name, factory, check, gpu)
        if auto and name not in AUTO_ORDER and name not in _auto_extra:
            _auto_extra.append(name)


def registered_backends() -> tuple[str, ...]:
    """Names of every backend, built-in or registered (whether usable here or not)."""
    return tuple(dict.fromkeys([*_BUILTIN, *_registered]))


def _auto_order() -> tuple[str, ...]:
    return (*AUTO_ORDER[:-1], *_auto_extra, AUTO_ORDER[-1])


def _load(name: str) -> tuple[_Backend | None, str | None, bool]:
    """``(backend, None, gpu)`` or ``(None, reason it cannot load, gpu)``."""
    backend = _registered.get(name)
    if backend is not None:
        return backend, None, backend.gpu
    if name not in _BUILTIN:
        names = ", ".join(repr(n) for n in registered_backends())
        raise ConfigError(f"invalid decoder={name!r}; expected 'auto' or one of {names}")
    module_name, gpu = _BUILTIN[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            return None, f"the {name} backend is not part of this vidpipe installation", gpu
        return None, f"the {name} backend cannot be imported ({type(exc).__name__}: {exc})", gpu
    except BackendUnavailableError as exc:  # the module says itself what is missing
        return None, str(exc), gpu
    except Exception as exc:  # noqa: BLE001 - any import failure makes it unusable
        return None, f"the {name} backend cannot be imported ({type(exc).__name__}: {exc})", gpu
    backend = _Backend(name, module.create, module.check, gpu)
    with _lock:
        _registered.setdefault(name, backend)
    return backend, None, gpu


def _try(name: str, info: StreamInfo, device: "torch.device") -> tuple[str | None, bool]:
    backend, reason, gpu = _load(name)
    if backend is None:
        return reason, gpu
    try:
        return backend.check(info, device), gpu
    except Exception as exc:  # noqa: BLE001 - a failing check means "not usable", with its reason
        return f"{name} check failed ({type(exc).__name__}: {exc})", gpu


def _is_gpu_backend(name: str) -> bool:
    backend = _registered.get(name)
    return backend.gpu if backend is not None else _BUILTIN.get(name, ("", False))[1]


def _short(reason: str, limit: int = 80) -> str:
    """The first clause of a rejection reason, for people (the full text is logged at DEBUG):
    ``"the nvdec backend cannot be imported (X: (Y: ...))"`` -> ``"the nvdec backend cannot be
    imported"``."""
    head = reason.split(" (", 1)[0].split("; ", 1)[0].strip()
    return head if len(head) <= limit else head[: limit - 3].rstrip() + "..."


def _as_device(device: "torch.device | str") -> "torch.device":
    import torch

    return device if isinstance(device, torch.device) else torch.device(device)


def select_backend(
    info: StreamInfo,
    device: "torch.device | str",
    requested: str = "auto",
    *,
    strict_gpu: bool = False,
    frames: int | None = None,
) -> BackendChoice:
    """Choose the backend that decodes ``info`` on ``device`` (no CUDA call is made here but, for
    the short-file rule, asking which CUDA device is current).

    ``frames``: how many frames will be decoded, when this stream is its run's only input; with
    ``"auto"`` a short file is then read with PyAV where NVDEC's start would cost more than it
    gives back (:mod:`vidpipe.decode.auto_choice`). ``None``: no such rule.

    Raises:
        BackendUnavailableError: a named backend cannot be loaded here (package, driver).
        UnsupportedError: a named backend loads but cannot decode this stream on this device.
        GpuFallbackError: ``strict_gpu`` with a CUDA device and only a CPU backend would run.
    """
    check_choice("decoder", requested, ("auto", *registered_backends()))
    device = _as_device(device)
    on_gpu = device.type == "cuda"
    src = info.source
    if requested != "auto":
        reason, gpu = _try(requested, info, device)
        if reason is not None:
            backend, _, _ = _load(requested)
            cls = BackendUnavailableError if backend is None else UnsupportedError
            raise cls(f"decoder={requested!r} cannot decode {src}: {reason}")
        if strict_gpu and on_gpu and not gpu:
            raise GpuFallbackError(
                f"decoder={requested!r} decodes {src} on the CPU, but strict_gpu is set for device {device}; "
                "ask for decoder='auto' or 'nvdec', or drop strict_gpu"
            )
        choice = BackendChoice(requested, f"decoder={requested!r} was requested")
        logger.info("%s: decoding with %s (%s)", src, choice.name, choice.reason)
        return choice

    rejected: list[tuple[str, str]] = []
    for name in _auto_order():
        if not on_gpu and _is_gpu_backend(name):
            continue  # a CPU device never decodes on the GPU: not a fallback, not worth a word
        reason, gpu = _try(name, info, device)
        if reason is not None:
            rejected.append((name, reason))
            continue
        if strict_gpu and on_gpu and not gpu:
            why = "; ".join(f"{n}: {r}" for n, r in rejected) or "no GPU decoder is registered"
            raise GpuFallbackError(
                f"strict_gpu: no GPU decoder can decode {src} on {device} ({why}); {name} would run on "
                "the CPU; fix the reason above or drop strict_gpu"
            )
        if name == "nvdec" and on_gpu and not strict_gpu and frames is not None:
            short = _short_file(info, device, frames)
            if short is not None:
                choice = BackendChoice(AUTO_ORDER[-1], short)
                logger.info("%s: decoding with %s on the CPU (%s)", src, choice.name, short)
                return choice
        if rejected:
            detail = "; ".join(f"{n}: {r}" for n, r in rejected)
            why = "; ".join(f"{n.upper() if n == 'nvdec' else n} unavailable: {_short(r)}" for n, r in rejected)
            logger.debug("%s: skipped %s", src, detail)  # the full chain
        else:
            why = "first usable backend" if on_gpu else "CPU device"
        choice = BackendChoice(name, why, tuple(rejected))
        if rejected and on_gpu and not gpu:
            gpu_names = "/".join(n for n, _ in rejected if _is_gpu_backend(n)) or "a GPU decoder"
            logger.warning("%s: decoding with %s on the CPU instead of %s on the GPU (%s)", src, name, gpu_names, why)
        else:
            logger.info("%s: decoding with %s on %s", src, name, device)
        return choice
    detail = "; ".join(f"{n}: {r}" for n, r in rejected)
    raise UnsupportedError(f"no decoder can read {src} ({detail}); convert it with ffmpeg to H.264")


def _short_file(info: StreamInfo, device: "torch.device", frames: int) -> str | None:
    """Why PyAV, not NVDEC, should read a short file (:mod:`vidpipe.decode.auto_choice`); ``None``
    also where PyAV cannot read it."""
    from vidpipe._cpus import usable_cpus
    from vidpipe.decode.auto_choice import pyav_finishes_first

    why = pyav_finishes_first(info, device, frames, cpus=usable_cpus())
    if why is None or _try(AUTO_ORDER[-1], info, device)[0] is not None:
        return None
    return why


def open_decoder(
    source: str | os.PathLike | StreamInfo,
    *,
    device: "torch.device | str" = "auto",
    decoder: str = "auto",
    options: DecodeOptions | None = None,
    strict_gpu: bool = False,
    auto_short_files: bool = False,
    index: "StreamIndex | None" = None,
) -> Decoder:
    """Probe ``source``, choose a backend and open it; ``decoder.choice`` says which and why.

    ``index``: ``source``'s packet scan made already (:func:`~vidpipe.decode.segments.scan_stream`,
    e.g. by a run while its CUDA graph is captured): a backend whose factory takes ``index`` (the
    NVDEC decoder's segments) plans from it instead of reading the file's packets once more;
    other backends ignore it.

    ``auto_short_files``: with ``decoder="auto"`` on a GPU, read a short file with PyAV where
    NVDEC's start would cost more than it gives back (:mod:`vidpipe.decode.auto_choice`): a
    detection run passes it for its only input (a run of several files shares NVDEC's sessions
    from file to file).

    Frames of a video with a display rotation come out upright (a
    :class:`~vidpipe.decode.rotation.RotatedDecoder` around the backend's decoder).

    ``device``: ``"auto" | "cpu" | "cuda" | "cuda:N"`` (resolved once, here).
    """
    from vidpipe.decode.probe import probe
    from vidpipe.device import resolve_device

    check_choice("decoder", decoder, ("auto", *registered_backends()))
    dev = resolve_device(device)
    info = source if isinstance(source, StreamInfo) else probe(source)
    frames = None
    if auto_short_files and decoder == "auto":
        from vidpipe.decode.auto_choice import frames_to_decode

        frames = frames_to_decode(info, options)
    choice = select_backend(info, dev, decoder, strict_gpu=strict_gpu, frames=frames)
    backend, reason, _ = _load(choice.name)
    if backend is None:  # pragma: no cover - select_backend already loaded it
        raise BackendUnavailableError(reason or choice.name)
    options = options if options is not None else DecodeOptions()
    if strict_gpu and options.cpu_fallback:
        options = dataclasses.replace(options, cpu_fallback=False)
    scanned = {"index": index} if index is not None and backend.plans_from_scan else {}
    dec = backend.factory(info, device=dev, options=options, **scanned)
    dec.choice = choice
    mirror = bool(info.extra.get("mirror"))
    if info.rotation or mirror:  # every backend delivers stored frames; turn them upright as ffmpeg does
        from vidpipe.decode.rotation import RotatedDecoder

        logger.info(
            "%s: display rotation %d degrees%s; frames are turned upright",
            info.source, info.rotation, " and mirrored" if mirror else "",
        )  # fmt: skip
        dec = RotatedDecoder(dec, info.rotation, mirror=mirror)
    return dec
