"""``vidpipe.open_video``: decoded frames without a model.

Example::

    with vidpipe.open_video("street.mp4", device="cuda", frame_skip=5) as video:
        print(video.info.width, video.info.height, video.info.fps, video.choice.name)
        for batch in video.batches(32):
            batch.data      # (B, 3, H, W) uint8 RGB on the device
            batch.frames    # FrameMeta per frame: index, pts (seconds), size
    if video.partial:
        print(video.error)  # the file was truncated or damaged; the frames before it were delivered

    with vidpipe.open_video("street.mp4", device="cuda") as video:   # frames by number or time
        len(video), video[0], video[-1], video[10:20]                 # (3, H, W) / (N, 3, H, W) uint8
        video.get_frames_at(indices=[0, 50, 7]).frames                # FrameMeta: index, pts
        video.get_frames_played_at(seconds=[1.5, 2.0]).data           # (2, 3, H, W) on the device
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from vidpipe.decode.base import DecodeOptions, Decoder, DecoderWrapper
from vidpipe.types import FrameBatch

if TYPE_CHECKING:
    import torch

    from vidpipe.frame_access import FrameReader

__all__ = ["open_video", "Video"]


class Video(DecoderWrapper):
    """An open video: iterate it in batches, or read frames by number or time.

    Returned by :func:`open_video`. Everything a decoder has (``info``, ``choice``, ``device``,
    ``error``/``partial``, counters, ``stats()``) is the wrapped backend's; with ``output="rgb"``
    YUV batches (NVDEC's NV12/P010) are converted to RGB on their device
    (:func:`vidpipe.ops.fused.nv12_to_rgb`, bit-exact with PyAV's CPU conversion for 8 bit).

    Frame access (torchcodec's names), for files, whatever the ``frame_skip``/``start``/``end``
    of the iteration: frame ``i`` is the ``i``-th frame in presentation order, numbered as FFmpeg
    numbers them (``0 .. len(video) - 1``); times are seconds from the start of the stream (like
    :attr:`FrameMeta.pts`). Frames are decoded on the CPU (PyAV, from the keyframe before them)
    and delivered on :attr:`device` as ``uint8`` RGB, ``(3, H, W)`` per frame. See
    :mod:`vidpipe.frame_access`.

    - ``len(video)``: the number of frames (one demux scan on first use, nothing decoded).
    - ``video[i]``: ``(3, H, W)`` tensor; ``i`` may be negative. ``video[a:b:c]``: ``(N, 3, H, W)``.
    - ``video.get_frames_at(indices=[...])``, ``video.get_frames_in_range(start, stop, step)``,
      ``video.get_frames_played_at(seconds=[...])``: a
      :class:`~vidpipe.types.FrameBatch` (``data`` ``(N, 3, H, W)`` and a :class:`FrameMeta` per
      frame with its number and time), in the order asked.

    Out-of-range numbers or times raise :class:`~vidpipe.frame_access.OutOfRangeError` (an
    ``IndexError``); a live stream raises :class:`~vidpipe.errors.UnsupportedError`.
    """

    def __init__(self, inner: Decoder, *, rgb: bool = True) -> None:
        super().__init__(inner)
        self._rgb = rgb
        self._reader: Any = None

    def batches(self, batch_size: int) -> Iterator[FrameBatch]:
        if not self._rgb:
            yield from self.inner.batches(batch_size)
            return
        from vidpipe.ops.fused import nv12_to_rgb

        for batch in self.inner.batches(batch_size):
            if batch.format != "rgb":
                batch = FrameBatch(data=nv12_to_rgb(batch), frames=batch.frames)
            yield batch

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
        self.inner.close()

    def __repr__(self) -> str:
        i = self.inner.info
        return f"Video({i.source!r}, {i.codec} {i.width}x{i.height}, decoder={self.name!r}, device={self.device})"

    # ------------------------------------------------------------------------- frame access

    @property
    def _frames(self) -> "FrameReader":
        if self._reader is None:
            from vidpipe.frame_access import FrameReader

            stream_id = getattr(getattr(self.inner, "options", None), "stream_id", 0)
            self._reader = FrameReader(self.inner.info, self.inner.device, stream_id=stream_id)
        return self._reader

    def __len__(self) -> int:
        return len(self._frames)

    def __bool__(self) -> bool:  # an open video is true; without this, bool() would scan the file
        return True

    def __getitem__(self, key: "int | slice") -> "torch.Tensor":
        """Frame ``key`` as a ``(3, H, W)`` uint8 RGB tensor on :attr:`device`; a slice gives
        ``(N, 3, H, W)``."""
        reader = self._frames
        if isinstance(key, slice):
            numbers = list(range(*key.indices(len(reader))))
            if not numbers:
                import torch

                i = self.inner.info
                return torch.empty((0, 3, i.height, i.width), dtype=torch.uint8, device=self.inner.device)
            return reader.read(numbers).data
        return reader.read([reader.normalize(key, name="key")]).data[0]

    def get_frames_at(self, indices: "Sequence[int] | torch.Tensor") -> FrameBatch:
        """Frames ``indices`` (negative count from the end; any order, repeats allowed) as one
        :class:`FrameBatch` in that order. Each distinct frame is decoded once, in stream order."""
        reader = self._frames
        return reader.read([reader.normalize(i, name="indices") for i in _as_list(indices, "indices")])

    def get_frames_in_range(self, start: int, stop: int, step: int = 1) -> FrameBatch:
        """Frames ``start, start + step, ...`` before ``stop`` (Python ``range`` rules for
        negative values)."""
        from vidpipe._validate import check_range

        reader = self._frames
        step = check_range("step", step, low=1, integer=True)
        lo = reader.normalize(start, name="start")
        hi = reader.normalize(stop, name="stop", end=True)
        return reader.read(list(range(lo, hi, step)))

    def get_frames_played_at(self, seconds: "Sequence[float] | torch.Tensor") -> FrameBatch:
        """The frames shown at ``seconds`` (from the start of the stream): for each time the
        last frame whose timestamp is at or before it."""
        reader = self._frames
        return reader.read([reader.table.number_at(s) for s in _as_list(seconds, "seconds")])


def _as_list(values: Any, name: str) -> list:
    """A list, tuple, range, 1-D tensor or array of values as a list."""
    from vidpipe.errors import ConfigError

    if hasattr(values, "tolist") and not isinstance(values, (list, tuple)):  # tensor, ndarray
        values = values.tolist()
    if isinstance(values, (list, tuple, range)):
        return list(values)
    raise ConfigError(f"invalid {name}={values!r}; expected a list")


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
        A :class:`Video` (a :class:`~vidpipe.decode.base.Decoder`): ``.info`` (:class:`StreamInfo`),
        ``.choice`` (the backend and why), ``.batches(n)`` yielding :class:`~vidpipe.types.FrameBatch` of
        ``(B, 3, H, W)`` uint8 RGB on ``device``; iterating it yields one-frame batches. After
        iteration ``.error``/``.partial`` tell whether the stream was cut short. Frames by
        number or time: ``len(video)``, ``video[i]``, ``video.get_frames_at(indices)``,
        ``video.get_frames_played_at(seconds)`` (see :class:`Video`).

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
    return Video(dec, rgb=output == "rgb")
