"""Optional decoder backend: NVIDIA DALI's video reader (``fn.readers.video``, NVDEC inside).

Only used when ``nvidia-dali`` is installed and asked for by name (``decoder="dali"``); never a
dependency and never picked by ``auto`` (measured on an H200 with DALI 2.4: 356 frames/s for
1080p H.264 through one reader, against 2,967 for vidpipe's segment-parallel NVDEC path in the same
``vidpipe bench decode`` run). It exists as a peer for
``vidpipe bench decode`` and for users who already run DALI pipelines.

Output: RGB ``(B, 3, H, W)`` uint8 batches on the GPU. DALI's reader is asked for YCbCr
(``image_type=YCbCr``: chroma upsampled by DALI) and vidpipe converts it with the stream's own
matrix and range (:func:`~vidpipe.ops.color.ycbcr444_to_rgb`), as its other decoders do: DALI's
own RGB differed from PyAV's by 6.7 levels on average on a BT.709 test pattern (NVIDIA H200, DALI
2.4). The reader outputs every
``frame_skip``-th frame in presentation order; each frame's time is looked up in a demux scan of
the file (the sorted packet timestamps: true times on variable frame rate too), and frames are
numbered within the selected range like every other backend (0 = the first frame at or after
``start``; with ``start`` and a stride the reader decodes every frame so the stride counts from
the range's first frame). Checked against PyAV on an H200 with DALI 2.4 (``tests/decode/test_dali.py``):
the same frame numbers and times, the same frame in each position.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from vidpipe.decode.base import DecodeOptions, Decoder, StreamInfo
from vidpipe.types import FrameBatch, FrameMeta

if TYPE_CHECKING:
    import torch

__all__ = ["DaliDecoder", "check", "create"]

logger = logging.getLogger(__name__)

_INSTALL = "pip install nvidia-dali-cuda130 (or -cuda120, matching your CUDA; see https://docs.nvidia.com/deeplearning/dali/)"
_CODECS = {"h264", "hevc", "vp8", "vp9", "av1", "libdav1d", "mpeg4", "mjpeg"}


def _dali() -> Any:
    from vidpipe._lazy import optional_import

    return optional_import("nvidia.dali", purpose="the DALI decoder", install=_INSTALL)


# Importing this module without DALI raises BackendUnavailableError (the registry reports it).
_dali()


def check(info: StreamInfo, device: "torch.device") -> str | None:
    """``None`` when DALI can decode ``info`` on ``device``, else why not."""
    if device.type != "cuda":
        return f"DALI's video reader decodes on the GPU; the device is {device}"
    try:
        _dali()
    except Exception as exc:  # noqa: BLE001
        return str(exc)
    if info.codec not in _CODECS:
        return f"DALI's video reader does not decode {info.codec}"
    from vidpipe.decode.probe import is_url

    if is_url(info.location):
        return "DALI's video reader reads files only"
    return None


def create(info: StreamInfo, *, device: "torch.device", options: DecodeOptions) -> "DaliDecoder":
    """Registry factory."""
    return DaliDecoder(info, device=device, options=options)


class DaliDecoder(Decoder):
    """Decode a file with ``nvidia.dali.fn.readers.video`` into RGB batches on the GPU.

    Args:
        source: a :class:`StreamInfo` or a path.
        device: a CUDA device.
        options: frame selection (the stride is DALI's ``stride``).
        num_threads: DALI CPU threads.
    """

    name = "dali"

    def __init__(
        self,
        source: StreamInfo | str | os.PathLike,
        *,
        device: "torch.device | str" = "cuda",
        options: DecodeOptions | None = None,
        num_threads: int = 2,
        stream_id: int | None = None,
    ) -> None:
        from vidpipe.decode.probe import probe
        from vidpipe.decode.registry import BackendChoice
        from vidpipe.device import resolve_device
        from vidpipe.errors import UnsupportedError

        self.choice = BackendChoice(self.name, "DaliDecoder was created directly")
        self.info = source if isinstance(source, StreamInfo) else probe(source)
        self.device = resolve_device(device)
        why = check(self.info, self.device)
        if why is not None:
            raise UnsupportedError(f"DALI cannot decode {self.info.source}: {why}")
        self.options = options if options is not None else DecodeOptions()
        self.num_threads = num_threads
        self.stream_id = self.options.stream_id if stream_id is None else stream_id
        self.error: Exception | None = None
        self.frames_decoded = 0
        self.frames_delivered = 0

    def _pipeline(self, sequence: int) -> Any:
        dali = _dali()
        from nvidia.dali import fn, pipeline_def, types

        stride = self.options.frame_skip if not self.options.start else 1

        @pipeline_def(
            batch_size=1, num_threads=self.num_threads, device_id=self.device.index or 0, prefetch_queue_depth=2
        )
        def pipe() -> Any:
            return fn.readers.video(
                device="gpu",
                filenames=[self.info.location],
                sequence_length=sequence,
                stride=stride,
                step=sequence * stride,
                random_shuffle=False,
                pad_sequences=True,
                skip_vfr_check=True,
                image_type=types.YCbCr,
                name="reader",
            )

        p = pipe()
        p.build()
        logger.debug("DALI %s pipeline built for %s", getattr(dali, "__version__", "?"), self.info.source)
        return p

    def _times(self) -> list[float]:
        """Presentation time (seconds) of every frame in order, from a demux scan (empty when the
        packets lack timestamps)."""
        from vidpipe.decode.segments import scan_stream

        index = scan_stream(self.info.location)
        if any(p is None for p in index.pts):
            return []
        shown = sorted(p for n, p in enumerate(index.pts) if n not in index.discarded)  # type: ignore[type-var]
        return [index.seconds(p) or 0.0 for p in shown]

    def batches(self, batch_size: int) -> Iterator[FrameBatch]:
        """RGB ``(B, 3, H, W)`` uint8 batches on :attr:`device`, in order."""
        import torch
        from nvidia.dali.plugin.pytorch import feed_ndarray

        from vidpipe.ops.color import ycbcr444_to_rgb

        opts = self.options
        fps = self.info.fps or 0.0
        times = self._times()
        first = 0  # file position of frame 0 of the range
        if opts.start:
            while first < len(times) and times[first] < opts.start:
                first += 1
        stride = 1 if opts.start else opts.frame_skip
        total = len(times) if times else (self.info.frame_count if self.info.frame_count_exact else None)
        p = self._pipeline(batch_size)
        sequences = int(next(iter(p.epoch_size().values())))
        kept = 0
        stream = torch.cuda.current_stream(self.device)
        for s in range(sequences):
            (video,) = p.run()
            t = video.as_tensor()
            buf = torch.empty(t.shape(), dtype=torch.uint8, device=self.device)  # (1, F, H, W, 3)
            feed_ndarray(t, buf, cuda_stream=stream)
            frames = buf[0]
            metas, rows, done = [], [], False
            for j in range(frames.shape[0]):
                position = (s * batch_size + j) * stride  # in the file
                if total is not None and position >= total:  # padding after the last frame
                    done = True
                    break
                self.frames_decoded += 1
                if position < first:
                    continue
                index = position - first
                pts = times[position] if position < len(times) else (position / fps if fps else None)
                want = opts.wants(index, pts)
                if want is None:  # past ``end``
                    done = True
                    break
                if not want:
                    continue
                rows.append(j)
                metas.append(FrameMeta(self.info.source, self.stream_id, index, pts, frames.shape[1], frames.shape[2]))
                if opts.max_frames is not None and kept + len(metas) >= opts.max_frames:
                    done = True
                    break
            if metas:
                data = ycbcr444_to_rgb(frames[rows], self.info.color)
                kept += len(metas)
                self.frames_delivered += len(metas)
                yield FrameBatch(data=data, frames=tuple(metas))
            if done:
                return
