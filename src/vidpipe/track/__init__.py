"""Multi-object tracking: stable ids per stream (ByteTrack).

- :class:`ByteTrack`: the tracker of one stream, on numpy arrays (``update(boxes, scores,
  class_ids, t=...) -> ids``): the readable reference.
- :class:`CompiledByteTrack`: the same tracker compiled with numba (the same ids, microseconds a
  frame; ``update`` per frame or ``update_frames`` for many): what the stage uses.
- :class:`TrackerStage`: it as a pipeline stage (``vidpipe.detect(..., track=True)``).
- :class:`TrackConfig`: the options.
"""

from vidpipe.track.bytetrack import ByteTrack
from vidpipe.track.compiled import CompiledByteTrack
from vidpipe.track.config import TrackConfig
from vidpipe.track.stage import TrackerStage

__all__ = ["ByteTrack", "CompiledByteTrack", "TrackConfig", "TrackerStage"]
