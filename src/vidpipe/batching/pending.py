"""Frames queued *before* their preprocessing: :class:`PendingFrame`, and :func:`materialize`, which
preprocesses them when a batch takes them, all the frames of one kind in one call.

Why: live streams decoded in decoder processes (:mod:`vidpipe.sources.live_hub`) hand each frame
over as decoded (NV12/P016 from NVDEC, or RGB) in a buffer shared with the child. Preprocessing
each one as it arrives costs the run's process a kernel launch and some Python per frame, on the
threads that receive the frames, beside the model's thread. Measured on an H200 with paced 1080p30
RTMP streams (8 decoder processes): 441 results/s at 16 streams but 178 at 64, the receivers
behind and most frames dropped. Queued as they are, the frames of a batch are preprocessed by
the model's thread in one copy into a batch tensor and one fused letterbox launch, whatever the
stream count.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from vidpipe.types import FrameBatch, FrameMeta, ModelInput

if TYPE_CHECKING:
    import torch

__all__ = ["PendingFrame", "materialize"]


@dataclass(frozen=True)
class PendingFrame:
    """One decoded frame waiting for its batch, not yet preprocessed.

    Attributes:
        batch: the frame, a one-frame :class:`~vidpipe.types.FrameBatch` (a view of a buffer
            that is not ours to keep: see ``release``), on the run's device.
        input_shape: ``(3, H, W)`` of the model input it becomes (the batcher batches equal
            shapes together).
        release: called exactly once, when the buffer may be written again: with the CUDA
            event recorded after the work that reads it, or ``None`` (at once: that work is done,
            or the frame was dropped).
    """

    batch: FrameBatch
    input_shape: tuple[int, int, int]
    release: Callable[[Any], None]

    def __len__(self) -> int:
        return 1

    @property
    def frames(self) -> tuple[FrameMeta, ...]:
        return self.batch.frames


Part = Union[ModelInput, PendingFrame]


def materialize(parts: Sequence[Part], to_input: Callable[[FrameBatch], ModelInput] | None) -> ModelInput:
    """One model input of ``parts`` in their order: model inputs as they are, pending frames
    preprocessed by ``to_input`` (a :class:`~vidpipe.ops.preprocess.Preprocessor`; ``None`` only
    when no part is pending), those of one
    format, size and colour together in one call on the current CUDA stream, then released once
    that work is done (an event on that stream)."""
    from vidpipe.ops.preprocess import concat_inputs

    pending = [i for i, p in enumerate(parts) if isinstance(p, PendingFrame)]
    if not pending:
        return concat_inputs(list(parts))  # type: ignore[arg-type]
    import torch

    groups: dict[tuple, list[int]] = {}
    for i in pending:
        b = parts[i].batch  # type: ignore[union-attr]
        groups.setdefault((b.format, tuple(b.data.shape[1:]), b.data.dtype, b.color), []).append(i)
    out: list[Any] = list(parts)
    try:
        for idx in groups.values():
            batches = [parts[i].batch for i in idx]  # type: ignore[union-attr]
            data = batches[0].data if len(batches) == 1 else torch.cat([b.data for b in batches])
            joined = FrameBatch(data=data, frames=tuple(b.frames[0] for b in batches), format=batches[0].format,
                                color=batches[0].color)  # fmt: skip
            inp = to_input(joined)  # type: ignore[misc]
            if len(idx) == len(parts):  # every part, in order
                out = [inp]
                break
            for j, i in enumerate(idx):
                out[i] = _row(inp, j)
        result = concat_inputs(out)
    finally:
        done = _done_event(parts[pending[0]].batch.data)  # type: ignore[union-attr]
        for i in pending:
            parts[i].release(done)  # type: ignore[union-attr]
    return result


def _row(inp: ModelInput, j: int) -> ModelInput:
    images = None if inp.images is None else inp.images[j : j + 1]
    return ModelInput(inp.tensor[j : j + 1], (inp.frames[j],), inp.scale[j : j + 1], inp.pad[j : j + 1], images)


def _done_event(data: "torch.Tensor") -> Any:
    """An event after the work queued so far on the current stream (``None`` on the CPU)."""
    if data.device.type != "cuda":
        return None
    import torch

    ev = torch.cuda.Event()
    ev.record(torch.cuda.current_stream(data.device))
    return ev
