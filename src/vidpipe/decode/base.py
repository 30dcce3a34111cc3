"""The decoder interface every backend implements, and the stream description they share."""

from __future__ import annotations

import abc
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from vidpipe._validate import check_range
from vidpipe.errors import ConfigError, DecodeError
from vidpipe.types import ColorSpec, FrameBatch

if TYPE_CHECKING:
    import torch

DecoderName = Literal["auto", "nvdec", "pyav", "dali"]
DECODER_NAMES: tuple[str, ...] = ("auto", "nvdec", "pyav", "dali")


@dataclass(frozen=True)
class StreamInfo:
    """What the container says about one video stream (no frame decoded).

    ``frame_count`` is the container's count (``None`` if unknown; it may be an estimate from the
    duration, see ``frame_count_exact``). ``color`` is the stream's matrix and range; when the
    stream leaves them unspecified the usual convention is assumed (BT.601 below 720 lines, else
    BT.709; limited range) and ``color_specified`` is ``False``.

    ``source`` is the input as shown (logs, errors, ``FrameMeta.source``): a URL's user and
    password are replaced by ``***``. ``location`` is what opens it (the URL with its
    credentials; the same as ``source`` for files); it is left out of ``repr`` and never shown.
    Constructing a ``StreamInfo`` with a raw URL as ``source`` fills both.
    """

    source: str
    container: str
    codec: str
    profile: str | None
    width: int
    height: int
    pix_fmt: str | None
    bit_depth: int
    chroma: Literal["420", "422", "444", "400"] | None
    fps: float | None
    frame_count: int | None
    frame_count_exact: bool
    duration: float | None
    time_base: Fraction
    start_time: float | None
    bit_rate: int | None
    color: ColorSpec
    color_specified: bool
    rotation: int = 0
    stream_index: int = 0
    extra: dict = field(default_factory=dict, compare=False)
    location: str = field(default="", repr=False, compare=False)

    def __post_init__(self) -> None:
        from vidpipe.sources.redact import redact_url

        if not self.location:
            object.__setattr__(self, "location", self.source)
        object.__setattr__(self, "source", redact_url(self.source))


#: the most decoder processes one decode may ask for (:mod:`vidpipe.decode.procpool`)
MAX_DECODER_PROCESSES = 64


@dataclass(frozen=True)
class DecodeOptions:
    """Which frames to deliver. Frames outside the selection are never converted or kept.

    Attributes:
        frame_skip: keep every ``frame_skip``-th decoded frame of the selected range (1 keeps
            all). Kept frames keep their numbers in the range (0, N, 2N, ...).
        max_frames: stop after this many *kept* frames (``None``: no limit).
        start: first presentation time in seconds to keep (``None``: from the beginning). The
            first frame at or after it is frame 0 of the range.
        end: presentation time in seconds at which to stop, exclusive (``None``: to the end).

    Frame numbers (``FrameMeta.index``) are positions in the selected range, in presentation
    order (FFmpeg's ``n``; ``ffmpeg -ss START -i FILE`` numbers the same way), never derived
    from timestamps; ``FrameMeta.pts`` is the presentation time.
        stream_id: the label every backend writes into ``FrameMeta.stream_id`` (the position of
            the source in a multi-source run).
        reuse_buffers: allow a backend to recycle the memory of a batch once the next batch is
            requested (a batch is then valid only until the next ``next()``). The pipeline sets
            it because it preprocesses each batch before asking for the next; it saves a fresh
            allocation per batch (page faults cost more than decoding at 1080p).
        cpu_fallback: let a GPU backend re-decode a failing part of the stream on the CPU
            (``strict_gpu`` turns it off: the part is then missing and the result partial).
        decoder_processes: NVDEC only: spread the decoder sessions over this many decoder
            processes (each with its own GIL; frames stay on the GPU), ``0``: threads in this
            process, ``None``: automatic (see :class:`~vidpipe.decode.nvdec.NvdecDecoder`).
        gpu_buffer_bytes: NVDEC only: GPU memory for frames decoded ahead of the consumer (its
            batch buffers, or the decoder processes' ring); ``None``: the decoder's default. A
            bound: the decode batch is lowered until the fewest buffers fit (``max_gpu_memory``).
        files_at_once: video files the run decodes at the same time as this one, itself included
            (the pipeline's open files): a pool of decoder processes is shared out among them,
            each taking ``ceil(processes / files_at_once)`` of its free children.
    """

    frame_skip: int = 1
    max_frames: int | None = None
    start: float | None = None
    end: float | None = None
    stream_id: int = 0
    reuse_buffers: bool = False
    cpu_fallback: bool = True
    decoder_processes: int | None = None
    gpu_buffer_bytes: int | None = None
    files_at_once: int = 1

    def __post_init__(self) -> None:
        check_range("frame_skip", self.frame_skip, low=1, integer=True)
        if self.max_frames is not None:
            check_range("max_frames", self.max_frames, low=1, integer=True)
        if self.start is not None:
            check_range("start", self.start, low=0)
        if self.end is not None:
            check_range("end", self.end, low=0, low_inclusive=False)
        check_range("stream_id", self.stream_id, low=0, integer=True)
        check_range("files_at_once", self.files_at_once, low=1, integer=True)
        if self.gpu_buffer_bytes is not None:
            check_range("gpu_buffer_bytes", self.gpu_buffer_bytes, low=1, integer=True)
        if self.decoder_processes is not None:
            check_range("decoder_processes", self.decoder_processes, low=0, high=MAX_DECODER_PROCESSES, integer=True)
        if self.start is not None and self.end is not None and self.end <= self.start:
            raise ConfigError(f"invalid time range: end={self.end} must be after start={self.start}")

    def wants(self, index: int, pts: float | None) -> bool | None:
        """``True`` to keep frame ``index`` (its number in the range) at ``pts``, ``False`` to skip
        it, ``None`` once past ``end``. The stride counts from frame 0 of the range."""
        if pts is not None:
            if self.end is not None and pts >= self.end:
                return None
            if self.start is not None and pts < self.start:
                return False
        return index % self.frame_skip == 0


def damaged_file(source: str, lost: str, kept: int) -> DecodeError:
    """The error of a damaged stream whose decode went on around the damage: ``lost`` says what
    was lost (``"3 frame(s) could not be decoded and are lost"``), ``kept`` how many frames were
    decoded (every decoder words it so)."""
    return DecodeError(
        f"{source}: the file is damaged: {lost}; the {kept} frames decoded around the damage were kept; check "
        "the file with ffprobe or re-encode it with ffmpeg"
    )


class Decoder(abc.ABC):
    """One open video stream, decoding frames to a device in presentation order.

    Use as a context manager or call :meth:`close`. After iteration, ``error`` holds the
    :class:`~vidpipe.errors.DecodeError` that cut the stream short (the frames before it were
    delivered) and ``partial`` is ``True``; a clean stream leaves ``error`` as ``None``.
    """

    name: ClassVar[str]

    info: StreamInfo
    device: "torch.device"
    options: DecodeOptions
    error: Exception | None = None
    frames_decoded: int = 0  # frames the codec produced (kept or skipped)
    frames_delivered: int = 0  # frames handed out in batches

    @property
    def partial(self) -> bool:
        return self.error is not None

    @abc.abstractmethod
    def batches(self, batch_size: int) -> Iterator[FrameBatch]:
        """Yield :class:`FrameBatch` objects of at most ``batch_size`` frames, in order.

        Every batch is on :attr:`device`; the last one may be shorter.
        """

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the codec and file handles. Safe to call twice."""

    def __enter__(self) -> "Decoder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[FrameBatch]:
        return self.batches(1)


class DecoderWrapper(Decoder):
    """A decoder around another (``inner``) that changes its batches, nothing else: ``info``,
    ``choice``, ``device``, ``error``, counters, ``close`` and any other attribute are the wrapped
    decoder's. Subclasses implement :meth:`batches`."""

    def __init__(self, inner: Decoder) -> None:
        self.inner = inner
        self.name = inner.name  # type: ignore[misc]

    def __getattr__(self, name: str) -> Any:  # only called for attributes not found here
        if name == "inner":  # not set yet (during unpickling): avoid recursing
            raise AttributeError(name)
        return getattr(self.inner, name)

    # Decoder defines these as class attributes, which __getattr__ would never see
    @property
    def error(self) -> Exception | None:  # type: ignore[override]
        return self.inner.error

    @property
    def frames_decoded(self) -> int:  # type: ignore[override]
        return self.inner.frames_decoded

    @property
    def frames_delivered(self) -> int:  # type: ignore[override]
        return self.inner.frames_delivered

    def close(self) -> None:
        self.inner.close()
