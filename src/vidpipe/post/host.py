"""A batch's detections to the host, per frame, in source pixels: one copy, the rest in NumPy.

:func:`to_source`, then :meth:`~vidpipe.types.Detections.cpu` and
:meth:`~vidpipe.types.Detections.split`, do the same work in about fifty PyTorch calls a batch,
and PyTorch releases the GIL in every call: with a dozen decoder threads in the process, the
run's thread waits at each release to get the GIL back. Here the GPU does five calls (the columns
and the batch's letterbox packed into one float32 vector, then one device-to-host copy) and the
host the rest on arrays of a few hundred numbers, in NumPy, which keeps the GIL for them. Measured
on an H200 (``docs/bench/h200/host-results``): warm ``vidpipe.detect`` runs of a 4,800-frame
1080p file decoded by NVDEC in threads 4-13% faster, in six of six pairs with the PyTorch path.

The arithmetic is :func:`to_source`'s, in the same float32 steps: ``(x - pad) / scale``, then
clipped to ``[0, width] x [0, height]`` (bit-equal, ``tests/post/test_host_gpu.py``); class ids
and frame rows travel as float32, exact below 2**24.
"""

from __future__ import annotations

from vidpipe.post.dtypes import as_float32
from vidpipe.types import Detections, ModelInput, replace_unchecked

__all__ = ["results_on_host"]


def results_on_host(dets: Detections, inp: ModelInput) -> tuple[list[Detections], int]:
    """Per-frame CPU detections in source pixels, from a batch's detections in ``inp``'s model pixels.

    Args:
        dets: NMS's output for ``inp`` (boxes ``(K, 4)`` float32 in model-input pixels, ``frame``
            = row in the batch), on any device; rows of one frame need not be adjacent.
        inp: the batch (``scale`` and ``pad`` ``(B, 2)`` float32 on ``dets``' device).

    Returns:
        ``(per_frame, nbytes)``: ``len(inp)`` :class:`Detections` on the CPU (boxes ``(k, 4)``
        float32 in that frame's source pixels, ``frame`` all 0, in ``dets``' order within each
        frame), and the bytes copied from the device. Rows whose ``frame`` is not a row of the
        batch are dropped, as :meth:`~vidpipe.types.Detections.split` drops them.
    """
    import numpy as np
    import torch

    b, k = len(inp), len(dets)
    if k == 0:
        return [Detections.empty("cpu")] * b, 0
    parts = (
        as_float32(dets.boxes).reshape(-1), as_float32(dets.scores), dets.class_ids, dets.frame,
        as_float32(inp.scale).reshape(-1), as_float32(inp.pad).reshape(-1),
    )  # fmt: skip
    host = torch.cat(parts).cpu().numpy()  # float32 (ids and rows are exact in it): one copy
    boxes = host[: 4 * k].reshape(k, 4)
    scores = host[4 * k : 5 * k]
    class_ids = host[5 * k : 6 * k].astype(np.int64)
    frame = host[6 * k : 7 * k].astype(np.int64)
    scale = np.tile(host[7 * k : 7 * k + 2 * b].reshape(b, 2), 2)  # (B, 4) sx, sy, sx, sy
    pad = np.tile(host[7 * k + 2 * b :].reshape(b, 2), 2)
    limit = np.tile(np.array([(m.width, m.height) for m in inp.frames], dtype=np.float32), 2)  # w, h, w, h
    keep = (frame >= 0) & (frame < b)
    order = np.argsort(frame if keep.all() else np.where(keep, frame, b), kind="stable")[: int(keep.sum())]
    frame = frame[order]
    boxes = (boxes[order] - pad[frame]) / scale[frame]
    np.maximum(boxes, np.float32(0.0), out=boxes)
    np.minimum(boxes, limit[frame], out=boxes)
    sizes = np.bincount(frame, minlength=b).tolist()
    columns = (
        torch.from_numpy(boxes).split(sizes),
        torch.from_numpy(scores[order]).split(sizes),
        torch.from_numpy(class_ids[order]).split(sizes),
        torch.from_numpy(np.zeros(len(frame), dtype=np.int64)).split(sizes),  # every part's frame 0: one buffer
    )
    rows = list(zip(*columns))
    first = Detections(*rows[0])  # checked once; the others are slices of the same columns
    rest = (replace_unchecked(first, boxes=x, scores=s, class_ids=c, frame=f) for x, s, c, f in rows[1:])
    return [first, *rest], host.nbytes
