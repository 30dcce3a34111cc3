"""What the image loader yields: :class:`ImageBatch`, and :class:`SkippedImage` for bad files."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from vidpipe.types import FrameMeta, ModelInput

if TYPE_CHECKING:
    import torch

__all__ = ["ImageBatch", "ResizeMode", "SkipReason", "SkippedImage"]

ResizeMode = Literal["letterbox", "resize", "none"]

#: Why a file was skipped. ``missing``/``unreadable``: the OS could not read it; ``empty``: zero
#: bytes; ``not_image``: content is not JPEG/PNG/WebP/BMP/TIFF (whatever the extension);
#: ``truncated``/``corrupt``: the decoder or header check failed; ``unsupported``: a valid image
#: this build cannot decode (e.g. 12-bit JPEG); ``too_large``: over ``max_pixels`` (checked from
#: the header, before decoding).
SkipReason = Literal["missing", "unreadable", "empty", "not_image", "truncated", "corrupt", "unsupported", "too_large"]


@dataclass(frozen=True, slots=True)
class SkippedImage:
    """A file that was listed but not delivered, and why."""

    path: str
    index: int
    reason: SkipReason
    detail: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}: {self.detail}"

    def to_dict(self) -> dict:
        """Plain-JSON form for output metadata: ``{"path", "index", "reason", "detail"}``."""
        return {"path": self.path, "index": self.index, "reason": self.reason, "detail": self.detail}


@dataclass(frozen=True, repr=False)
class ImageBatch:
    """Decoded, resized images in listing order, on one device.

    Attributes:
        data: ``(B, 3, H, W)`` RGB on the loader's device for ``mode="letterbox"``/``"resize"``;
            for ``mode="none"`` a tuple of ``(3, h_i, w_i)`` tensors at native size. Float dtypes
            hold values in [0, 1]; ``uint8`` holds 0..255.
        paths: the file of each row.
        indices: position of each row's file in the listing (0-based; skipped files keep theirs).
        sizes: ``(height, width)`` of each source image after EXIF orientation.
        scale: ``(B, 2)`` float32 ``(sx, sy)`` model pixels per source pixel (per axis: the
            letterbox truncates the short side; 1 for ``"none"``), on ``data``'s device.
        pad: ``(B, 2)`` float32 ``(left, top)`` padding in model pixels, on ``data``'s device.
            A source point ``(x, y)`` lands at ``(x * sx + left, y * sy + top)``.
        skipped: files skipped while this batch was assembled (progress = ``len + len(skipped)``).
        mode: the resize mode that produced ``data``.
        stream_id: the run's source number, copied into :attr:`frames`.
        images: with ``keep_images``: each row's decoded image at its source size, ``(3, h_i,
            w_i)`` uint8 RGB, EXIF orientation applied (the coordinate system of ``sizes``), on
            the batch's device; else ``None``.
    """

    data: torch.Tensor | tuple[torch.Tensor, ...]
    paths: tuple[str, ...]
    indices: tuple[int, ...]
    sizes: tuple[tuple[int, int], ...]
    scale: torch.Tensor
    pad: torch.Tensor
    skipped: tuple[SkippedImage, ...] = ()
    mode: ResizeMode = "letterbox"
    stream_id: int = 0
    images: tuple[torch.Tensor, ...] | None = None

    def __post_init__(self) -> None:
        b = len(self.paths)
        if not (len(self.indices) == len(self.sizes) == b):
            raise ValueError(f"ImageBatch: {b} paths, {len(self.indices)} indices, {len(self.sizes)} sizes")
        if isinstance(self.data, tuple):
            if self.mode != "none" or len(self.data) != b:
                raise ValueError("ImageBatch.data is a tuple only for mode='none', one tensor per path")
        elif self.data.ndim != 4 or self.data.shape[0] != b or self.data.shape[1] != 3:
            raise ValueError(f"ImageBatch.data must be ({b}, 3, H, W), got {tuple(self.data.shape)}")
        if tuple(self.scale.shape) != (b, 2) or tuple(self.pad.shape) != (b, 2):
            raise ValueError(f"ImageBatch.scale and pad must be ({b}, 2)")
        if self.images is not None and len(self.images) != b:
            raise ValueError(f"ImageBatch.images must hold {b} images, got {len(self.images)}")

    def __len__(self) -> int:
        return len(self.paths)

    @property
    def device(self) -> torch.device:
        return self.scale.device

    @property
    def frames(self) -> tuple[FrameMeta, ...]:
        """One :class:`~vidpipe.types.FrameMeta` per row: ``source`` = path, ``index`` = listing
        position, ``pts=None``, ``height``/``width`` = oriented source size."""
        return tuple(
            FrameMeta(source=p, stream_id=self.stream_id, index=i, pts=None, height=h, width=w)
            for p, i, (h, w) in zip(self.paths, self.indices, self.sizes)
        )

    def to_model_input(self) -> ModelInput:
        """The batch as a :class:`~vidpipe.types.ModelInput` (needs ``mode="letterbox"`` and a
        float dtype): ``tensor`` is ``data`` (no copy), ``scale`` and ``pad`` ``(B, 2)``."""
        from vidpipe.errors import ConfigError

        if self.mode != "letterbox" or isinstance(self.data, tuple) or not self.data.dtype.is_floating_point:
            raise ConfigError(
                "ImageBatch.to_model_input() needs mode='letterbox' and dtype 'fp16' or 'fp32' "
                f"(got mode={self.mode!r}); load the images with those options"
            )
        return ModelInput(tensor=self.data, frames=self.frames, scale=self.scale, pad=self.pad, images=self.images)

    def __repr__(self) -> str:
        if isinstance(self.data, tuple):
            shape = f"{len(self.data)} native-size tensors"
        else:
            shape = f"{tuple(self.data.shape)} {str(self.data.dtype).removeprefix('torch.')} {self.data.device}"
        span = f"{self.indices[0]}..{self.indices[-1]}" if self.indices else "-"
        return f"ImageBatch(data={shape}, images={len(self)} [{span}], skipped={len(self.skipped)})"
