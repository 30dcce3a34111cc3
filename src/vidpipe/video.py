"""``vidpipe.open_video``: decoded frames without a model.

Example::

    with vidpipe.open_video("street.mp4", device="cuda", frame_skip=5) as video:
        print(video.info.width, video.info.height, video.info.fps, video.choice.name)
        for batch in video.batches(32):
            batch.data      # (B, 3, H, W) uint8 RGB on the device
            batch.frames    # FrameMeta per frame: index, pts (seconds), size
    if video.partial:
        print(video.error)  # the file was truncated or damaged; the frames before it were delivered
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from vidpipe.decode.base import DecodeOptions, Decoder
from vidpipe.types import FrameBatch

if TYPE_CHECKING:
    import torch

__all__ = ["open_video"]


class RGBDecoder(Decoder):
    """A decoder whose YUV batches (NVDEC's NV12/P010) are converted to RGB on their device.

    Everything else (``info``, ``choice``, ``error``, counters, ``stats()``) is the wrapped
    decoder's. The conversion uses the stream's colour matrix and range
    (:func:`vidpipe.ops.fused.nv12_to_rgb`, bit-exact with PyAV's CPU conversion for 8 bit).
    """

    def __init__(self, inner: Decoder) -> None:
        self.inner = inner
        self.name = inner.name

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def error(self) -> Exception | None:  # type: ignore[override]
        return self.inner.error

    def batches(self, batch_size: int) -> Iterator[FrameBatch]:
        from vidpipe.ops.fused import nv12_to_rgb

        for batch in self.inner.batches(batch_size):
            if batch.format != "rgb":
                batch = FrameBatch(data=nv12_to_rgb(batch), frames=batch.frames)
            yield batch

    def close(self) -> None:
        self.inner.close()


def open_video(
    source: str | os.PathLike,
    *,
    device: "str | torch.device" = "auto",
    decoder: str = "auto",
    frame_skip: int = 1,
    max_frames: int | None = None,
    start: float | None = None,
    end: float | None = None,
    strict_gpu: bool = False,
    output: str = "rgb",
) -> Decoder:
    """Open a video file or stream URL for decoding; use it as a context manager.

    Args:
        source: path or URL of one video.
        device: ``"auto" | "cpu" | "cuda" | "cuda:N"``: where frames are delivered.
        decoder: ``"auto"`` (NVDEC when it can decode this stream on this device, else PyAV),
            ``"nvdec"``, ``"pyav"`` or ``"dali"``.
        frame_skip: deliver every N-th frame (indices 0, N, 2N, ... are kept).
        max_frames: stop after this many delivered frames.
        start, end: time range in seconds from the start of the stream (``end`` exclusive).
        strict_gpu: with a CUDA device, raise :class:`~vidpipe.errors.GpuFallbackError` instead
            of decoding on the CPU.
        output: ``"rgb"`` (default): ``(B, 3, H, W)`` uint8 RGB whatever the backend;
            ``"native"``: the backend's own format (NVDEC gives ``nv12``/``p010`` batches, the
            input of the fused preprocessing, with no conversion).

    Returns:
        A :class:`~vidpipe.decode.base.Decoder`: ``.info`` (:class:`StreamInfo`), ``.choice``
        (the backend and why), ``.batches(n)`` yielding :class:`~vidpipe.types.FrameBatch` of
        ``(B, 3, H, W)`` uint8 RGB on ``device``; iterating it yields one-frame batches. After
        iteration ``.error``/``.partial`` tell whether the stream was cut short.

    Raises:
        SourceError: missing, empty, unreadable input or no video stream.
        ConfigError: an invalid option (the message lists the allowed values).
        BackendUnavailableError, UnsupportedError, GpuFallbackError: see ``decoder``/``strict_gpu``.
    """
    from vidpipe._validate import check_choice
    from vidpipe.decode.registry import open_decoder, registered_backends
    from vidpipe.errors import ConfigError

    if not isinstance(source, (str, os.PathLike)):
        raise ConfigError(f"invalid source={source!r}; expected a path or URL of one video")
    check_choice("decoder", decoder, ("auto", *registered_backends()))
    if not isinstance(strict_gpu, bool):
        raise ConfigError(f"invalid strict_gpu={strict_gpu!r}; expected True or False")
    check_choice("output", output, ("rgb", "native"))
    options = DecodeOptions(frame_skip=frame_skip, max_frames=max_frames, start=start, end=end)
    dec = open_decoder(source, device=device, decoder=decoder, options=options, strict_gpu=strict_gpu)
    return RGBDecoder(dec) if output == "rgb" and dec.name != "pyav" else dec
