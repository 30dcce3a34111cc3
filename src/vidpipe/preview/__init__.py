"""A live preview page beside the metrics endpoint: one tile per stream with an MJPEG view of
its (annotated) frames and its state, fps, latency and counts.

::

    hub = vidpipe.preview.PreviewHub()                    # latest frame per stream, JPEG on demand
    run = vidpipe.detect(["rtsp://cam1/s", "rtsp://cam2/s"], stages=[PreviewStage(hub)])
    with vidpipe.metrics.serve_metrics(run, port=9100) as endpoint:
        endpoint.attach_preview(hub)                      # http://127.0.0.1:9100/preview
        for batch in run.batches():
            ...
    hub.close()

Frames are JPEG-encoded only while a browser watches a stream (at most ``max_fps`` a second,
shrunk to ``max_width`` first), on a worker thread: with nvJPEG for CUDA frames, libjpeg for
CPU frames. CLI: ``vidpipe detect ... --metrics-port PORT --preview``; ``vidpipe serve`` with
``metrics: {port: PORT, preview: true}`` or ``--preview``.
"""

from __future__ import annotations

from vidpipe.preview.hub import PreviewHub, Watcher
from vidpipe.preview.jpeg import encode_jpeg
from vidpipe.preview.stage import PreviewStage, raw_frame

__all__ = ["PreviewHub", "PreviewStage", "Watcher", "encode_jpeg", "raw_frame"]
