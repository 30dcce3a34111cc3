"""vidpipe detections as ``supervision.Detections``, for supervision's annotators, zones and trackers.

Optional extra: ``pip install 'vidpipe[supervision]'``. supervision is imported on first use; when
it is missing the call raises :class:`~vidpipe.errors.BackendUnavailableError` (an ``ImportError``)
with that install hint.

Field mapping (one row per box, in vidpipe's row order; everything moved to the host once):

============================  ==============================================================
``supervision.Detections``    vidpipe
============================  ==============================================================
``xyxy``                      ``boxes`` ``(N, 4)`` float32, source pixels
``confidence``                ``scores`` ``(N,)`` float32
``class_id``                  ``class_ids`` ``(N,)`` int64
``tracker_id``                ``track_ids`` ``(N,)`` int64, ``None`` when not tracked
``data["class_name"]``        the class names (``str(id)`` for an id without a name)
``metadata``                  for a :class:`~vidpipe.types.FrameResult`: ``source``,
                              ``stream_id``, ``frame_index``, ``pts``, ``height``, ``width``
============================  ==============================================================

Example::

    import supervision as sv
    annotator = sv.BoxAnnotator()
    for frame in vidpipe.detect("street.mp4"):
        dets = frame.to_supervision()
        dets.data["class_name"], dets.tracker_id
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from vidpipe._lazy import optional_import
from vidpipe.errors import ConfigError

if TYPE_CHECKING:
    import supervision

    from vidpipe.types import Detections, FrameResult

__all__ = ["detections_to_supervision", "frame_to_supervision"]

INSTALL_HINT = "pip install 'vidpipe[supervision]' (or: pip install supervision)"


def _supervision() -> Any:
    return optional_import("supervision", purpose="to_supervision()", install=INSTALL_HINT)


def detections_to_supervision(
    detections: "Detections", names: Sequence[str] | None = None, *, metadata: dict | None = None
) -> "supervision.Detections":
    """``detections`` (of one frame) as a ``supervision.Detections``; see the module docstring.

    Args:
        detections: the boxes of one frame, on any device (copied to the host once).
        names: class names indexed by class id; ``data["class_name"]`` is filled when given.
        metadata: stored as ``supervision.Detections.metadata``.

    Raises:
        BackendUnavailableError: supervision is not installed (the message says how to install it).
        ConfigError: the detections hold the boxes of several frames of a batch (supervision's
            detections belong to one image): split them first with ``Detections.split(n)``.
    """
    sv = _supervision()
    import numpy as np

    host = detections.cpu()
    frames = host.frame.unique().tolist() if len(host) else []
    if len(frames) > 1:
        raise ConfigError(
            f"these detections hold boxes of {len(frames)} frames of a batch; supervision's Detections "
            "belong to one image: convert each frame's detections (detections.split(num_frames))"
        )
    class_id = host.class_ids.numpy().astype(np.int64, copy=False)
    data: dict[str, Any] = {}
    if names is not None:
        names = tuple(names)
        data["class_name"] = np.array(
            [names[i] if 0 <= i < len(names) else str(i) for i in class_id.tolist()], dtype=str
        )
    return sv.Detections(
        xyxy=host.boxes.numpy().astype(np.float32, copy=False).reshape(-1, 4),
        confidence=host.scores.numpy().astype(np.float32, copy=False),
        class_id=class_id,
        tracker_id=None if host.track_ids is None else host.track_ids.numpy().astype(np.int64, copy=False),
        data=data,
        metadata=dict(metadata or {}),
    )


def frame_to_supervision(result: "FrameResult") -> "supervision.Detections":
    """The detections of one :class:`~vidpipe.types.FrameResult` as ``supervision.Detections``,
    with class names in ``data["class_name"]`` and the frame's origin in ``metadata``."""
    m = result.meta
    metadata = {
        "source": m.source,
        "stream_id": m.stream_id,
        "frame_index": m.index,
        "pts": m.pts,
        "height": m.height,
        "width": m.width,
    }
    return detections_to_supervision(result.detections, result.names, metadata=metadata)
