"""Moving a batch of per-frame detections to the host in one copy.

Each :class:`~vidpipe.types.FrameResult` holds its own small :class:`~vidpipe.types.Detections`,
possibly on the GPU. Calling ``.cpu()`` per frame would cost one device->host copy (and one
synchronisation) per frame; instead the detections of the whole batch are concatenated on their
device and packed into one ``(N, 6 or 7)`` float64 tensor (x1, y1, x2, y2, score, class id
[, track id]), copied with a single ``.cpu()``. float64 holds float32/float16 boxes and scores and
integer ids below 2**53 exactly, so unpacking on the host is lossless.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import torch

    from vidpipe.types import Detections, FrameResult

__all__ = ["HostRows", "to_host"]


@dataclass(frozen=True)
class HostRows:
    """The detections of a batch of frames, flattened, in host memory (numpy).

    Attributes:
        results: the frames of the batch, in order.
        counts: ``(F,)`` int64, detections per frame.
        frame_pos: ``(N,)`` int64, for each row the position of its frame in ``results``.
        boxes: ``(N, 4)`` float32 x1, y1, x2, y2 in source pixels.
        scores: ``(N,)`` float32.
        class_ids: ``(N,)`` int64.
        track_ids: ``(N,)`` int64 (``-1`` where ``track_valid`` is False: no ``track_ids``, or a
            negative id, i.e. not in a confirmed track), or ``None`` when tracks were not requested.
        track_valid: ``(N,)`` bool, or ``None``.
        d2h_copies: device->host copies made (0 when everything was already on the CPU).
        d2h_bytes: bytes copied from devices to the host.
    """

    results: Sequence["FrameResult"]
    counts: "np.ndarray"
    frame_pos: "np.ndarray"
    boxes: "np.ndarray"
    scores: "np.ndarray"
    class_ids: "np.ndarray"
    track_ids: "np.ndarray | None"
    track_valid: "np.ndarray | None"
    d2h_copies: int
    d2h_bytes: int

    def __len__(self) -> int:
        return int(self.boxes.shape[0])


def _pack(dets: Sequence["Detections"], tracks: bool) -> "torch.Tensor":
    """``(N, 6 | 7)`` float64 on the detections' device: boxes, score, class id [, track id]."""
    import torch

    f64 = torch.float64
    boxes = torch.cat([d.boxes for d in dets]).to(f64)
    cols = [
        boxes,
        torch.cat([d.scores for d in dets]).to(f64).unsqueeze(1),
        torch.cat([d.class_ids for d in dets]).to(f64).unsqueeze(1),
    ]
    if tracks:
        ids = [d.track_ids for d in dets]
        if all(t is not None for t in ids):  # the usual batch: one cat, one conversion (not one a frame)
            cols.append(torch.cat(ids).to(f64).unsqueeze(1))  # type: ignore[arg-type]
        else:
            parts = [
                t.to(f64) if t is not None else torch.full((len(d),), float("nan"), dtype=f64, device=boxes.device)
                for d, t in zip(dets, ids)
            ]
            cols.append(torch.cat(parts).unsqueeze(1))
    return torch.cat(cols, dim=1)


def to_host(results: Sequence["FrameResult"], *, tracks: bool = False) -> HostRows:
    """Flatten the detections of ``results`` into host arrays with one copy per device.

    Row order is frame order, then the detections' own order within each frame.
    """
    import numpy as np

    counts = np.fromiter((len(r.detections) for r in results), dtype=np.int64, count=len(results))
    offsets = np.concatenate([np.zeros(1, np.int64), np.cumsum(counts)])
    n = int(offsets[-1])
    width = 7 if tracks else 6
    by_device: dict[object, list[int]] = {}
    for i, r in enumerate(results):
        if counts[i]:
            by_device.setdefault(r.detections.device, []).append(i)

    packed = np.empty((n, width), dtype=np.float64)
    copies = nbytes = 0
    for device, positions in by_device.items():
        host = _pack([results[i].detections for i in positions], tracks).cpu().numpy()
        if getattr(device, "type", "cpu") != "cpu":
            copies += 1
            nbytes += host.nbytes
        if len(by_device) == 1:
            packed = host  # one device: its frames are all rows, in order
        else:
            rows = np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in positions])
            packed[rows] = host

    track_ids = track_valid = None
    if tracks:
        raw = packed[:, 6]
        track_valid = ~np.isnan(raw) & (raw >= 0)  # -1: a detection not (yet) in a confirmed track
        track_ids = np.where(track_valid, raw, -1).astype(np.int64)
    return HostRows(
        results=results,
        counts=counts,
        frame_pos=np.repeat(np.arange(len(results), dtype=np.int64), counts),
        boxes=packed[:, 0:4].astype(np.float32),
        scores=packed[:, 4].astype(np.float32),
        class_ids=packed[:, 5].astype(np.int64),
        track_ids=track_ids,
        track_valid=track_valid,
        d2h_copies=copies,
        d2h_bytes=nbytes,
    )
