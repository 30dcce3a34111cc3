"""Typed, frozen dataclasses that cross the boundaries between pipeline stages.

Data flows one way::

    Packet -> (decode) -> FrameBatch -> (preprocess) -> ModelInput -> (model, head, NMS)
           -> Detections -> FrameResult -> sinks

Each class validates shape, dtype and device in ``__post_init__`` (raising ``ValueError``, never
``assert``) and prints shapes rather than data in its ``repr``. Tensors are never copied here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Literal, TypeVar

if TYPE_CHECKING:
    from collections.abc import Sequence

    import supervision
    import torch

    from vidpipe.stages.base import Event

__all__ = [
    "ColorSpec",
    "Packet",
    "FrameMeta",
    "FrameBatch",
    "ModelInput",
    "Detections",
    "FrameResult",
]

_T = TypeVar("_T")


def replace_unchecked(obj: _T, **changes: object) -> _T:
    """``dataclasses.replace(obj, **changes)`` without ``__init__`` (so without
    ``__post_init__``'s checks): for values the caller has checked already, on per-frame paths
    (a tracker's ids, results with them: the checks were a third of that cost on the run's
    thread)."""
    out = object.__new__(type(obj))
    out.__dict__.update(obj.__dict__, **changes)  # (a frozen dataclass's __dict__ takes them as they are)
    return out


PixelFormat = Literal["rgb", "nv12", "p010"]
Matrix = Literal["bt601", "bt709", "bt2020"]
Range = Literal["limited", "full"]


def _shape(t: "torch.Tensor") -> str:
    return f"{tuple(t.shape)} {str(t.dtype).removeprefix('torch.')} {t.device}"


@dataclass(frozen=True, slots=True)
class ColorSpec:
    """How YUV samples map to RGB: the matrix coefficients and the value range.

    ``limited`` is the broadcast range (Y in [16, 235], chroma in [16, 240] for 8 bit), ``full``
    uses all code values (JPEG).
    """

    matrix: Matrix = "bt601"
    range: Range = "limited"

    def __post_init__(self) -> None:
        if self.matrix not in ("bt601", "bt709", "bt2020"):
            raise ValueError(f"ColorSpec.matrix={self.matrix!r}; expected 'bt601', 'bt709' or 'bt2020'")
        if self.range not in ("limited", "full"):
            raise ValueError(f"ColorSpec.range={self.range!r}; expected 'limited' or 'full'")


@dataclass(frozen=True, slots=True)
class Packet:
    """One compressed access unit of a video stream, as demuxed (host memory).

    ``pts``/``dts`` are in ``time_base`` units (``None`` when the container has none).
    """

    data: bytes
    pts: int | None
    dts: int | None
    time_base: Fraction
    is_key: bool
    stream_id: int = 0

    def __repr__(self) -> str:
        return (
            f"Packet(bytes={len(self.data)}, pts={self.pts}, dts={self.dts}, "
            f"time_base={self.time_base}, is_key={self.is_key}, stream_id={self.stream_id})"
        )

    @property
    def pts_seconds(self) -> float | None:
        return None if self.pts is None else float(self.pts * self.time_base)


@dataclass(frozen=True, slots=True)
class FrameMeta:
    """Where one frame came from.

    Attributes:
        source: the input as the user gave it (path, URL or image file).
        stream_id: position of the source within the run (0-based).
        index: frame number within the source, 0-based, in presentation order. Frames skipped by a
            stride keep their original numbers (index 0, 5, 10, ... for ``frame_skip=5``).
        pts: presentation time in seconds, or ``None`` when the container has none.
        height, width: the decoded frame size in pixels (the coordinate system of the boxes).
        captured_at: live streams: UTC wall clock (seconds since the Unix epoch) when the frame's
            data was received; ``None`` for files and images.
        captured_mono: the same instant on ``time.monotonic()`` (for capture-to-result latency
            within this process); ``None`` for files and images.
        camera_time: the camera's own clock for this frame (UTC seconds since the epoch, from
            RTCP sender reports) where the stream carries it; else ``None``.
        connection: live streams: which connection the frame came through (0, then 1 after the
            first reconnect, ...): per-stream state (tracks) starts over when it changes; 0 for
            files and images.
    """

    source: str
    stream_id: int
    index: int
    pts: float | None
    height: int
    width: int
    captured_at: float | None = None
    captured_mono: float | None = None
    camera_time: float | None = None
    connection: int = 0


@dataclass(frozen=True, repr=False)
class FrameBatch:
    """A batch of decoded frames of one size, on one device.

    ``data`` layout by ``format``:

    - ``"rgb"``:  ``(B, 3, H, W)`` ``uint8``, RGB channel order.
    - ``"nv12"``: ``(B, H * 3 // 2, W)`` ``uint8``: H rows of luma then H/2 rows of interleaved
      U, V (even ``H`` and ``W``).
    - ``"p010"``: like ``nv12`` but ``uint16`` with samples in the 10 high bits.

    YUV formats carry their :class:`ColorSpec` in ``color``.
    """

    data: "torch.Tensor"
    frames: tuple[FrameMeta, ...]
    format: PixelFormat = "rgb"
    color: ColorSpec | None = None

    def __post_init__(self) -> None:
        import torch

        if not isinstance(self.data, torch.Tensor):
            raise ValueError(f"FrameBatch.data must be a torch.Tensor, got {type(self.data).__name__}")
        if not isinstance(self.frames, tuple):
            object.__setattr__(self, "frames", tuple(self.frames))
        b = len(self.frames)
        if self.format == "rgb":
            if self.data.ndim != 4 or self.data.shape[1] != 3 or self.data.dtype != torch.uint8:
                raise ValueError(f"rgb FrameBatch.data must be (B, 3, H, W) uint8, got {_shape(self.data)}")
            h, w = self.data.shape[2], self.data.shape[3]
        elif self.format in ("nv12", "p010"):
            want = torch.uint8 if self.format == "nv12" else torch.uint16
            if self.data.ndim != 3 or self.data.dtype != want or self.data.shape[1] % 3:
                raise ValueError(
                    f"{self.format} FrameBatch.data must be (B, H*3/2, W) {want}, got {_shape(self.data)}"
                )
            h, w = self.data.shape[1] * 2 // 3, self.data.shape[2]
            if self.color is None:
                raise ValueError(f"{self.format} FrameBatch needs a ColorSpec in `color`")
        else:
            raise ValueError(f"FrameBatch.format={self.format!r}; expected 'rgb', 'nv12' or 'p010'")
        if self.data.shape[0] != b:
            raise ValueError(f"FrameBatch has {self.data.shape[0]} frames of data but {b} FrameMeta")
        for m in self.frames:
            if (m.height, m.width) != (h, w):
                raise ValueError(f"FrameMeta size {m.height}x{m.width} does not match data {h}x{w}")

    def __len__(self) -> int:
        return len(self.frames)

    @property
    def height(self) -> int:
        return self.frames[0].height if self.frames else 0

    @property
    def width(self) -> int:
        return self.frames[0].width if self.frames else 0

    @property
    def device(self) -> "torch.device":
        return self.data.device

    def __repr__(self) -> str:
        idx = [m.index for m in self.frames]
        span = f"{idx[0]}..{idx[-1]}" if idx else "-"
        return f"FrameBatch(data={_shape(self.data)}, format={self.format!r}, frames={len(idx)} [{span}])"


@dataclass(frozen=True, repr=False)
class ModelInput:
    """A preprocessed batch ready for the model, with what is needed to map boxes back.

    Attributes:
        tensor: ``(B, 3, H, W)`` float16 or float32 RGB in [0, 1], letterboxed.
        frames: the source frames, one per batch row.
        scale: ``(B, 2)`` float32 ``(sx, sy)``, model pixels per source pixel along x and y, same
            device as ``tensor``. Per axis because the letterbox truncates the short side (a
            640x272 frame becomes 416x176: ``sx = 0.65``, ``sy = 176 / 272 = 0.6471``).
        pad: ``(B, 2)`` float32, left and top padding in model pixels, same device as ``tensor``.
        images: the decoded frames at the source's size, kept for later stages
            (``PipelineConfig.keep_frames``), else ``None``: ``(B, 3, H, W)`` uint8 RGB, or a tuple of
            ``B`` ``(3, H_i, W_i)`` uint8 tensors (frames of several sizes), on ``tensor``'s device;
            row ``i``'s size is ``frames[i]``'s ``(height, width)``.

    A source point ``(x, y)`` lands at ``(x * sx + pad_x, y * sy + pad_y)``.
    """

    tensor: "torch.Tensor"
    frames: tuple[FrameMeta, ...]
    scale: "torch.Tensor"
    pad: "torch.Tensor"
    images: "torch.Tensor | tuple[torch.Tensor, ...] | None" = None

    def __post_init__(self) -> None:
        import torch

        t = self.tensor
        if t.ndim != 4 or t.shape[1] != 3 or t.dtype not in (torch.float16, torch.float32, torch.bfloat16):
            raise ValueError(f"ModelInput.tensor must be (B, 3, H, W) float, got {_shape(t)}")
        if not isinstance(self.frames, tuple):
            object.__setattr__(self, "frames", tuple(self.frames))
        b = t.shape[0]
        if len(self.frames) != b:
            raise ValueError(f"ModelInput has {b} rows but {len(self.frames)} FrameMeta")
        if self.scale.shape != (b, 2) or self.pad.shape != (b, 2):
            raise ValueError(
                f"ModelInput.scale and pad must be ({b}, 2), got {tuple(self.scale.shape)} "
                f"and {tuple(self.pad.shape)}"
            )
        if self.scale.device != t.device or self.pad.device != t.device:
            raise ValueError("ModelInput.scale and pad must be on the tensor's device")
        if self.images is not None:
            self._check_images(torch)

    def _check_images(self, torch: "object") -> None:
        imgs = self.images
        if isinstance(imgs, list):
            imgs = tuple(imgs)
            object.__setattr__(self, "images", imgs)
        rows = imgs if isinstance(imgs, tuple) else None
        if rows is None:
            if imgs.ndim != 4 or imgs.shape[0] != len(self.frames):
                raise ValueError(f"ModelInput.images must be ({len(self.frames)}, 3, H, W) uint8, got {_shape(imgs)}")
            rows = imgs.unbind(0) if len(self.frames) else ()
        elif len(rows) != len(self.frames):
            raise ValueError(f"ModelInput.images has {len(rows)} frames but {len(self.frames)} FrameMeta")
        for img, m in zip(rows, self.frames):
            if img.ndim != 3 or img.shape[0] != 3 or img.dtype != torch.uint8:  # type: ignore[attr-defined]
                raise ValueError(f"ModelInput.images rows must be (3, H, W) uint8, got {_shape(img)}")
            if (img.shape[1], img.shape[2]) != (m.height, m.width):
                raise ValueError(
                    f"ModelInput.images row is {img.shape[1]}x{img.shape[2]} but its frame is {m.height}x{m.width}"
                )
            if img.device != self.tensor.device:
                raise ValueError(f"ModelInput.images is on {img.device} but tensor on {self.tensor.device}")
            if not isinstance(imgs, tuple):
                break  # one tensor: one shape, one device

    def image(self, i: int) -> "torch.Tensor | None":
        """Row ``i`` of :attr:`images` (a view, no copy), or ``None`` when frames are not kept."""
        if self.images is None:
            return None
        return self.images[i]

    def __len__(self) -> int:
        return len(self.frames)

    def __repr__(self) -> str:
        kept = "" if self.images is None else ", images kept"
        return f"ModelInput(tensor={_shape(self.tensor)}, frames={len(self.frames)}{kept})"


@dataclass(frozen=True, repr=False)
class Detections:
    """Detections of a batch of frames, flattened.

    Attributes:
        boxes: ``(N, 4)`` float32 ``x1, y1, x2, y2`` in source pixels.
        scores: ``(N,)`` float32 confidence in [0, 1].
        class_ids: ``(N,)`` int64 class index into the model's names.
        frame: ``(N,)`` int64 index of the frame within its batch (all 0 for one frame).
        track_ids: ``(N,)`` int64 or ``None`` when not tracked.

    All tensors live on one device; they stay on the GPU until :meth:`cpu` or :meth:`numpy`.
    """

    boxes: "torch.Tensor"
    scores: "torch.Tensor"
    class_ids: "torch.Tensor"
    frame: "torch.Tensor"
    track_ids: "torch.Tensor | None" = None

    def __post_init__(self) -> None:
        import torch

        n = self.boxes.shape[0] if self.boxes.ndim == 2 else -1
        if self.boxes.ndim != 2 or self.boxes.shape[1] != 4 or not self.boxes.dtype.is_floating_point:
            raise ValueError(f"Detections.boxes must be (N, 4) float, got {_shape(self.boxes)}")
        tensors = {"scores": self.scores, "class_ids": self.class_ids, "frame": self.frame}
        if self.track_ids is not None:
            tensors["track_ids"] = self.track_ids
        for name, t in tensors.items():
            if t.shape != (n,):
                raise ValueError(f"Detections.{name} must be ({n},), got {_shape(t)}")
            if t.device != self.boxes.device:
                raise ValueError(f"Detections.{name} is on {t.device} but boxes on {self.boxes.device}")
        for name in ("class_ids", "frame"):
            if tensors[name].dtype != torch.int64:
                raise ValueError(f"Detections.{name} must be int64, got {tensors[name].dtype}")

    @classmethod
    def empty(cls, device: "torch.device | str" = "cpu") -> "Detections":
        import torch

        return cls(
            boxes=torch.zeros((0, 4), dtype=torch.float32, device=device),
            scores=torch.zeros((0,), dtype=torch.float32, device=device),
            class_ids=torch.zeros((0,), dtype=torch.int64, device=device),
            frame=torch.zeros((0,), dtype=torch.int64, device=device),
        )

    def __len__(self) -> int:
        return int(self.boxes.shape[0])

    def with_track_ids(self, track_ids: "torch.Tensor") -> "Detections":
        """These detections with ``track_ids`` ``(N,)`` int64 on their device (a tracker's
        per-frame step: only the ids are checked; the other tensors are these, checked already).

        Raises:
            ValueError: ``track_ids`` is not ``(N,)`` int64 on the detections' device.
        """
        import torch

        if track_ids.shape != (len(self),) or track_ids.dtype != torch.int64 or track_ids.device != self.boxes.device:
            raise ValueError(
                f"track_ids must be ({len(self)},) int64 on {self.boxes.device}, got {_shape(track_ids)} "
                f"{track_ids.dtype} on {track_ids.device}"
            )
        return replace_unchecked(self, track_ids=track_ids)

    @property
    def device(self) -> "torch.device":
        return self.boxes.device

    def to(self, device: "torch.device | str", *, non_blocking: bool = False) -> "Detections":
        """The detections on ``device``. GPU -> CPU is one packed copy (one synchronisation),
        not one per tensor."""
        import torch

        dev = torch.device(device)
        if dev == self.device:
            return self
        if self.device.type == "cuda" and dev.type == "cpu" and not non_blocking:
            cols = [self.boxes.double(), self.scores.double()[:, None], self.class_ids.double()[:, None],
                    self.frame.double()[:, None]]  # fmt: skip
            if self.track_ids is not None:
                cols.append(self.track_ids.double()[:, None])
            packed = torch.cat(cols, 1).cpu()  # float64 holds float32 and ids < 2**53 exactly
            return Detections(
                packed[:, :4].float(),
                packed[:, 4].float(),
                packed[:, 5].long(),
                packed[:, 6].long(),
                None if self.track_ids is None else packed[:, 7].long(),
            )

        def mv(t):
            return None if t is None else t.to(device, non_blocking=non_blocking)

        return Detections(
            mv(self.boxes), mv(self.scores), mv(self.class_ids), mv(self.frame), mv(self.track_ids)
        )

    def cpu(self) -> "Detections":
        return self.to("cpu")

    def select(self, mask_or_index: "torch.Tensor") -> "Detections":
        """Rows picked by a boolean mask or an index tensor."""
        m = mask_or_index
        return Detections(
            self.boxes[m],
            self.scores[m],
            self.class_ids[m],
            self.frame[m],
            None if self.track_ids is None else self.track_ids[m],
        )

    def split(self, num_frames: int, *, by_frame: bool = False) -> "list[Detections]":
        """One :class:`Detections` per frame of the batch (``frame`` reset to 0), in order.

        Sorts by frame once and splits each column once (views), so the cost is one sort and a
        few calls, not one mask or slice per frame; the parts are made without ``__post_init__``'s
        checks (slices of checked columns: half of this method's time on the run's thread).
        ``by_frame``: the rows are sorted by frame already (NMS's order), so the sort is skipped
        (five PyTorch calls fewer).
        """
        import torch

        if len(self) == 0:
            empty = Detections.empty(self.device)
            return [empty] * num_frames
        d = self if by_frame else self.select(torch.argsort(self.frame, stable=True))
        counts = torch.bincount(d.frame, minlength=num_frames).tolist()[:num_frames]
        sizes = counts + [len(d) - sum(counts)]  # (rows of frames >= num_frames, if any: dropped)
        zeros = torch.zeros((len(d),), dtype=torch.int64, device=d.device)  # every part's frame 0: one buffer
        columns = [t.split(sizes)[:num_frames] for t in (d.boxes, d.scores, d.class_ids, zeros)]
        tracks = d.track_ids.split(sizes)[:num_frames] if d.track_ids is not None else (None,) * len(counts)
        return [replace_unchecked(d, boxes=b, scores=s, class_ids=c, frame=f, track_ids=t)
                for b, s, c, f, t in zip(*columns, tracks)]  # fmt: skip

    def to_supervision(self, names: "Sequence[str] | None" = None) -> "supervision.Detections":
        """These detections (of one frame) as ``supervision.Detections`` (optional extra
        ``vidpipe[supervision]``); ``names`` fills ``data["class_name"]``. See
        :mod:`vidpipe.adapters.supervision`."""
        from vidpipe.adapters.supervision import detections_to_supervision

        return detections_to_supervision(self, names)

    def __repr__(self) -> str:
        tracked = "" if self.track_ids is None else ", tracked"
        return f"Detections(n={len(self)}, device={self.device}{tracked})"


@dataclass(frozen=True, repr=False)
class FrameResult:
    """The detections of one frame, as yielded by :func:`vidpipe.detect` (in order per source).

    ``detections`` stay on the pipeline's device; ``names`` maps class ids to class names.
    ``events``: what the run's stages saw happen in this frame (zone entered, line crossed, ...;
    :class:`vidpipe.stages.Event`), in order. ``image``: the decoded frame, ``(3, H, W)`` uint8
    RGB on the pipeline's device at the source's size (the boxes' coordinates), only when a stage
    or the caller asked the run to keep frames; else ``None``. ``embeddings``: ``(N, D)`` float,
    one appearance vector per detection row (a ReID stage fills it), else ``None``.
    """

    meta: FrameMeta
    detections: Detections
    names: tuple[str, ...] = field(default=(), compare=False)
    events: "tuple[Event, ...]" = field(default=(), compare=False)
    image: "torch.Tensor | None" = field(default=None, compare=False)
    embeddings: "torch.Tensor | None" = field(default=None, compare=False)

    @property
    def source(self) -> str:
        return self.meta.source

    @property
    def stream_id(self) -> int:
        return self.meta.stream_id

    @property
    def index(self) -> int:
        return self.meta.index

    @property
    def pts(self) -> float | None:
        return self.meta.pts

    @property
    def size(self) -> tuple[int, int]:
        """``(height, width)`` of the source frame."""
        return (self.meta.height, self.meta.width)

    def labels(self) -> list[str]:
        """Class names of the detections, in row order (moves class ids to the host)."""
        ids = self.detections.class_ids.tolist()
        return [self.names[i] if 0 <= i < len(self.names) else str(i) for i in ids]

    def to_supervision(self) -> "supervision.Detections":
        """This frame's detections as ``supervision.Detections`` (optional extra
        ``vidpipe[supervision]``), with ``data["class_name"]`` and the frame's origin in
        ``metadata``. See :mod:`vidpipe.adapters.supervision`."""
        from vidpipe.adapters.supervision import frame_to_supervision

        return frame_to_supervision(self)

    def __repr__(self) -> str:
        return (
            f"FrameResult(source={self.meta.source!r}, index={self.meta.index}, "
            f"pts={self.meta.pts}, detections={len(self.detections)})"
        )

